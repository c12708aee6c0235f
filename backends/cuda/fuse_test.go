package cuda

import (
	"context"
	"math"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
)

// gemmCounter counts a device's GEMMs.
type gemmCounter struct {
	device.Device
	n int
}

func (g *gemmCounter) Gemm(x device.Gemm) error { g.n++; return g.Device.Gemm(x) }

func (g *gemmCounter) BatchedGemm(x device.BatchedGemm) error {
	return g.Device.(device.BatchedGemmer).BatchedGemm(x)
}

// TestFusionBitIdentical: fused q|k|v and gate|up GEMMs give bit-identical
// NLLs to separate GEMMs on the emulator (each output element is the same
// dot product), with 3 fewer projection GEMMs per layer, for dense weights
// multiplied directly (fp32 F32 fixture), dequantized weights (W4A16,
// GPTQ) and q/k/v biases (qwen2); activation-quantized schemes do not fuse.
func TestFusionBitIdentical(t *testing.T) {
	cases := []struct {
		arch, scheme, prec string
	}{
		{"llama", "", "fp32"},
		{"qwen2", "", "bf16"}, // F32 weights at bf16 are cast into the scratch: fused there
		{"qwen2", "W4A16-G32", "fp32"},
		{"mistral", "GPTQ", "bf16"},
		{"qwen3", "W8A8", "fp32"},
	}
	for _, c := range cases {
		dir := writeQuantized(t, c.arch, c.scheme, false)
		m := openModel(t, dir)
		toks := testTokens(50, 260, 7)
		w := backends.Window{Tokens: toks, First: 1}
		var nll [2][]float64
		var gemms [2]int
		for i, nofuse := range []bool{true, false} {
			gc := &gemmCounter{Device: emuDevices(t, 1, 1<<30)[0]}
			b, err := New(m, []device.Device{gc}, Options{Name: "emu", Precision: c.prec, MaxTokens: 64, NoFusion: nofuse})
			if err != nil {
				t.Fatal(err)
			}
			gc.n = 0
			sc, err := b.Score(context.Background(), w, backends.Request{})
			if err != nil {
				t.Fatal(err)
			}
			nll[i], gemms[i] = sc.NLL, gc.n
			b.Close()
		}
		for p := range nll[0] {
			if math.Float64bits(nll[0][p]) != math.Float64bits(nll[1][p]) {
				t.Fatalf("%s %s %s: target %d: fused NLL %v, unfused %v", c.arch, c.scheme, c.prec, p, nll[1][p], nll[0][p])
			}
		}
		saved := gemms[0] - gemms[1]
		t.Logf("%s %s %s: %d GEMMs unfused, %d fused", c.arch, c.scheme, c.prec, gemms[0], gemms[1])
		if c.scheme == "W8A8" {
			if saved != 0 {
				t.Errorf("%s %s: activation-quantized layers fused (%d GEMMs saved)", c.arch, c.scheme, saved)
			}
			continue
		}
		if saved != 3*2 { // 2 layers × (q,k,v → 1: 2 saved; gate,up → 1: 1 saved)
			t.Errorf("%s %s %s: %d GEMMs saved, want 6", c.arch, c.scheme, c.prec, saved)
		}
	}
}
