package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
)

// fake returns fixed scores for one window of 5 tokens (First 2, so three
// targets at positions 2, 3, 4). With lp set it is also a LogProber whose
// row for position p is {-(p+1), -(p+2)}, and its Score checks that the
// base rows Run hands to the second backend are exactly those rows.
type fake struct {
	nll, kl []float64
	top     []int32
	lp      bool
}

func (f *fake) Info() backends.Info { return backends.Info{Name: "fake", Precision: "fp32", Vocab: 2} }
func (f *fake) Close() error        { return nil }

func (f *fake) Score(_ context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	s := backends.Scores{NLL: append([]float64(nil), f.nll...), Top: append([]int32(nil), f.top...)}
	if req.Base != nil {
		row := make([]float64, 2)
		for i := 0; i < w.NumTargets(); i++ {
			if err := req.Base.LogProbs(i, row); err != nil {
				return s, err
			}
			p := float64(w.First - 1 + i)
			if row[0] != -(p+1) || row[1] != -(p+2) {
				return s, fmt.Errorf("base row %d = %v, want the first backend's row of position %v", i, row, p)
			}
		}
		if err := req.Base.LogProbs(w.NumTargets(), row); err == nil {
			return s, fmt.Errorf("base row %d (past the targets) accepted", w.NumTargets())
		}
		s.KL = append([]float64(nil), f.kl...)
	}
	return s, nil
}

type fakeLP struct{ fake }

func (f *fakeLP) LogProbs(_ context.Context, w backends.Window, from int, emit func(int, []float64) error) error {
	for p := from; p < len(w.Tokens); p++ {
		if err := emit(p, []float64{-float64(p + 1), -float64(p + 2)}); err != nil {
			return err
		}
	}
	return nil
}

// TestStatisticsHandComputed checks every figure of the report against
// values computed by hand, and which tolerances fail.
func TestStatisticsHandComputed(t *testing.T) {
	a := &fakeLP{fake{nll: []float64{1, 2, 3}, top: []int32{0, 1, 1}}}
	b := &fake{nll: []float64{1.5, 2, 2}, kl: []float64{0.1, 0.2, 0.6}, top: []int32{0, 1, 0}}
	w := backends.Window{Index: 7, Tokens: []int32{0, 1, 0, 1, 1}, First: 2}
	tol := Tolerances{MaxNLL: 1, MeanNLL: 0.4, MeanKL: 0.31, MinTop1: 0.7, PPLRel: 0.2, HiddenRel: 1e-3}
	rep, err := Run(context.Background(), a, b, []backends.Window{w}, Options{Tolerances: tol})
	if err != nil {
		t.Fatal(err)
	}
	// Δ = b − a = (0.5, 0, −1): max 1 at the third target (position 4).
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-15*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %.17g, want %.17g", name, got, want)
		}
	}
	if rep.Tokens != 3 || rep.Windows != 1 || rep.MaxWindow != 7 || rep.MaxPosition != 4 {
		t.Errorf("tokens %d windows %d, max at window %d position %d; want 3, 1, 7, 4", rep.Tokens, rep.Windows, rep.MaxWindow, rep.MaxPosition)
	}
	near("max |ΔNLL|", rep.MaxAbsNLLDiff, 1)
	near("mean |ΔNLL|", rep.MeanAbsNLLDiff, 0.5)
	near("RMS ΔNLL", rep.RMSNLLDiff, math.Sqrt(1.25/3))
	near("mean KL", rep.MeanKL, 0.3)
	near("max KL", rep.MaxKL, 0.6)
	near("top-1 agreement", rep.Top1Agreement, 2.0/3)
	near("PPL first", rep.PPL[0], math.Exp(2))
	near("PPL second", rep.PPL[1], math.Exp(5.5/3))
	// mean |ΔNLL| 0.5 > 0.4 and top-1 2/3 < 0.7 fail; max 1 ≤ 1, KL 0.3 ≤ 0.31
	// and |e^(−1/6) − 1| = 0.154 ≤ 0.2 pass.
	got := strings.Join(rep.Failures, "\n")
	if rep.Pass || len(rep.Failures) != 2 || !strings.Contains(got, "mean |ΔNLL| 0.5 > 0.4") || !strings.Contains(got, "top-1 agreement 0.6667 < 0.7000") {
		t.Errorf("pass %v, failures:\n%s", rep.Pass, got)
	}

	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"first":"fake fp32"`, `"ppl":[`, `"max_nll":1,`, `"hidden_rel":0.001`, `"top1_agreement":`, `"pass":false`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("JSON report lacks %s: %s", key, js)
		}
	}

	// A NaN NLL in the second backend is an infinite difference, never a pass.
	b.nll = []float64{1, math.NaN(), 3}
	b.top = a.top
	rep, err = Run(context.Background(), a, b, []backends.Window{w}, Options{Tolerances: Tolerances{MaxNLL: 10, MeanNLL: 10, MeanKL: 10, PPLRel: 10, HiddenRel: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || !math.IsInf(rep.MaxAbsNLLDiff, 1) || rep.MaxPosition != 3 {
		t.Errorf("NaN NLL: pass %v, max |ΔNLL| %v at position %d", rep.Pass, rep.MaxAbsNLLDiff, rep.MaxPosition)
	}
	// ... and the report stays writable (JSON has no NaN or infinity).
	rep.Points = []PointError{{Layer: 0, Site: "attn_out", RelErr: math.NaN(), MaxAbs: math.Inf(1)}}
	js, err = json.MarshalIndent(rep, "", " ")
	if err != nil {
		t.Fatalf("JSON of a report with non-finite figures: %v", err)
	}
	for _, key := range []string{`"max_abs_dnll": "+Inf"`, `"ppl": [`, `"rel_err": "NaN"`, `"max_abs": "+Inf"`, `"site": "attn_out"`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("JSON report lacks %s: %s", key, js)
		}
	}
	if strings.Contains(string(js), "first_bad") {
		t.Errorf("omitempty first_bad written: %s", js)
	}
}
