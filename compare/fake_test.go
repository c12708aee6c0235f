package compare

import (
	"context"
	"fmt"
	"math"

	"github.com/qppl/qppl/backends"
)

// toyModel is a deterministic "model" whose log-probs are a closed-form
// function of the previous token and the position, so every statistic can
// be recomputed independently in the tests.
type toyModel struct {
	vocab int
	shift float64 // differs between "base" and "quantized"
	calls int
}

// logits at logits position p of tokens.
func (m *toyModel) logits(tokens []int32, p int) []float64 {
	l := make([]float64, m.vocab)
	for j := range l {
		l[j] = math.Sin(float64(int(tokens[p])*7+j*3+p%5)+m.shift) * 3
	}
	return l
}

func (m *toyModel) logProbs(tokens []int32, p int) []float64 {
	l := m.logits(tokens, p)
	mx := l[0]
	for _, v := range l {
		mx = max(mx, v)
	}
	var s float64
	for _, v := range l {
		s += math.Exp(v - mx)
	}
	lse := mx + math.Log(s)
	for j := range l {
		l[j] -= lse
	}
	return l
}

func (m *toyModel) Info() backends.Info {
	return backends.Info{Name: "toy", Precision: "fp64", Vocab: m.vocab}
}
func (m *toyModel) Close() error { return nil }

func (m *toyModel) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	m.calls++
	var sc backends.Scores
	for p := w.First; p < len(w.Tokens); p++ {
		lp := m.logProbs(w.Tokens, p-1)
		sc.NLL = append(sc.NLL, -lp[w.Tokens[p]])
		if req.TopK > 0 {
			ids := make([]int32, req.TopK)
			topKRef(lp, ids)
			sc.Top = append(sc.Top, ids...)
		}
	}
	if req.Base != nil {
		var positions []int
		if req.KLAllPositions {
			for p := 0; p < len(w.Tokens); p++ {
				positions = append(positions, p)
			}
		} else {
			for p := w.First; p < len(w.Tokens); p++ {
				positions = append(positions, p-1)
			}
		}
		base := make([]float64, req.Base.Vocab())
		for i, pos := range positions {
			if err := req.Base.LogProbs(i, base); err != nil {
				return sc, err
			}
			sc.KL = append(sc.KL, klRef(base, m.logProbs(w.Tokens, pos)))
		}
	}
	return sc, nil
}

func (m *toyModel) LogProbs(ctx context.Context, w backends.Window, from int, emit func(int, []float64) error) error {
	for p := from; p < len(w.Tokens); p++ {
		if err := emit(p, m.logProbs(w.Tokens, p)); err != nil {
			return err
		}
	}
	return nil
}

// klRef is Σ p (log p − log q), terms with p = 0 skipped.
func klRef(base, q []float64) float64 {
	var s float64
	for j, lb := range base {
		if math.IsInf(lb, -1) {
			continue
		}
		s += math.Exp(lb) * (lb - q[j])
	}
	return s
}

// topKRef: sort all ids by (value desc, id asc), take the first len(ids).
func topKRef(v []float64, ids []int32) {
	used := make([]bool, len(v))
	for k := range ids {
		best := -1
		for j := range v {
			if !used[j] && (best < 0 || v[j] > v[best]) {
				best = j
			}
		}
		used[best] = true
		ids[k] = int32(best)
	}
}

var _ backends.LogProber = (*toyModel)(nil)
var _ = fmt.Sprint
