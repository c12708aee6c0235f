package cuda

import (
	"context"
	"math"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/reference"
)

type memRows [][]float64

func (m memRows) Vocab() int { return len(m[0]) }
func (m memRows) LogProbs(i int, dst []float64) error {
	copy(dst, m[i])
	return nil
}

// TestKLAgainstReference: KL(P_dense ‖ Q_quantized) from the fused kernel
// (fp32) equals the reference's float64 KL of the same quantized model
// against the same base rows, in both KL coverages, and BaseNLL is exact.
// Budget: the kernel sums V terms p·(log p − log q) in fp32 with log q from
// an fp32 log-sum-exp: |ΔKL| ≤ 1e-5 + 1e-3·KL.
func TestKLAgainstReference(t *testing.T) {
	dense := writeQuantized(t, "qwen2", "", false)
	quantDir := writeQuantized(t, "qwen2", "W4A16-G32", false)
	toks := testTokens(60, 260, 4)
	w := backends.Window{Index: 0, Tokens: toks, First: 3}
	base, err := reference.New(openModel(t, dense), reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	var rows memRows
	if err := base.LogProbs(context.Background(), w, 0, func(pos int, lp []float64) error {
		rows = append(rows, append([]float64(nil), lp...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, quantDir)
	ref, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	emuB, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64, HeadRows: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer emuB.Close()
	for _, all := range []bool{false, true} {
		var src backends.BaseLogProbs = memRows(rows[w.First-1 : len(rows)-1])
		if all {
			src = rows
		}
		req := backends.Request{Base: src, KLAllPositions: all}
		rs, err := ref.Score(context.Background(), w, req)
		if err != nil {
			t.Fatal(err)
		}
		es, err := emuB.Score(context.Background(), w, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.KL) != len(es.KL) || len(es.KL) == 0 {
			t.Fatalf("all=%v: %d and %d KL values", all, len(rs.KL), len(es.KL))
		}
		sum := 0.0
		for i := range rs.KL {
			sum += rs.KL[i]
			if d := math.Abs(es.KL[i] - rs.KL[i]); !(d <= 1e-5+1e-3*rs.KL[i]) { // a NaN KL fails
				t.Errorf("all=%v KL[%d]: emu %v, reference %v", all, i, es.KL[i], rs.KL[i])
			}
		}
		if !(sum/float64(len(rs.KL)) > 1e-4) {
			t.Errorf("all=%v: mean KL %g: the quantized model should differ from its base", all, sum/float64(len(rs.KL)))
		}
		for i := range rs.BaseNLL {
			if es.BaseNLL[i] != rs.BaseNLL[i] {
				t.Errorf("BaseNLL[%d]: emu %v, reference %v", i, es.BaseNLL[i], rs.BaseNLL[i])
			}
		}
	}
}
