package cuda

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/fixtures"
)

// BenchmarkEmuScore measures the emulator on a small fixture window (the
// kernels run as host C++, one fiber per CUDA thread): tokens/s is a
// property of the emulator, not a GPU estimate (docs/cuda.md has those).
func BenchmarkEmuScore(b *testing.B) {
	for _, c := range []struct {
		name        string
		hidden, ctx int
		prec        string
	}{{"llama-h64-L2-T256-bf16", 64, 256, "bf16"}, {"llama-h256-L2-T256-bf16", 256, 256, "bf16"}, {"llama-h256-L2-T256-fp32", 256, 256, "fp32"}} {
		b.Run(c.name, func(b *testing.B) {
			o, err := fixtures.Defaults("llama")
			if err != nil {
				b.Fatal(err)
			}
			o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = c.hidden, 2*c.hidden, 4, 2, c.hidden/4
			dir := filepath.Join(b.TempDir(), "m")
			if err := fixtures.Write(dir, o); err != nil {
				b.Fatal(err)
			}
			be, err := New(openModel(b, dir), emuDevices(b, 1, 1<<30), Options{Name: "emu", Precision: c.prec, MaxTokens: c.ctx})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			w := backends.Window{Tokens: testTokens(c.ctx, o.Vocab, 1), First: 1}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := be.Score(context.Background(), w, backends.Request{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.ctx*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
