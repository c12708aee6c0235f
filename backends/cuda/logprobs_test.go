package cuda

import (
	"context"
	"math"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/reference"
)

// TestLogProbsOnDevice: rows normalized on the device (log_softmax_rows)
// equal the reference's float64 log-softmax (fp32 model, fp32 precision:
// |Δ| ≤ 1e-4, the end-to-end NLL budget of docs/cuda.md), sum to 1 in
// probability, and agree with Score's NLL of the same targets to a few
// fp32 ulps (one fp32 log-sum-exp for both).
func TestLogProbsOnDevice(t *testing.T) {
	dir := writeQuantized(t, "qwen2", "", false)
	m := openModel(t, dir)
	toks := testTokens(45, 260, 5)
	w := backends.Window{Tokens: toks, First: 1}
	ref, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	b, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64, HeadRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var want [][]float64
	if err := ref.LogProbs(context.Background(), w, 0, func(pos int, lp []float64) error {
		want = append(want, append([]float64(nil), lp...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sc, err := b.Score(context.Background(), w, backends.Request{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := b.LogProbs(context.Background(), w, 0, func(pos int, lp []float64) error {
		if pos != n {
			t.Fatalf("position %d, want %d", pos, n)
		}
		n++
		var p float64
		for c, v := range lp {
			if d := math.Abs(v - want[pos][c]); !(d <= 1e-4) {
				t.Fatalf("pos %d id %d: %v, reference %v", pos, c, v, want[pos][c])
			}
			p += math.Exp(v)
		}
		if math.Abs(p-1) > 1e-5 {
			t.Errorf("pos %d: probabilities sum to %v", pos, p)
		}
		if pos+1 < len(toks) {
			nll := -lp[toks[pos+1]]
			if d := math.Abs(nll - sc.NLL[pos]); d > 4e-7*(1+nll) {
				t.Errorf("pos %d: -log p(target) %v, Score's NLL %v", pos, nll, sc.NLL[pos])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(toks) {
		t.Errorf("%d rows emitted, want %d", n, len(toks))
	}
}
