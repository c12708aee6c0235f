package reference

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/detmath"
)

// rowsBase serves base log-probs from memory: KL position i is rows[i+off].
type rowsBase struct {
	rows [][]float64
	off  int
}

func (r rowsBase) Vocab() int { return len(r.rows[0]) }
func (r rowsBase) LogProbs(i int, dst []float64) error {
	copy(dst, r.rows[i+r.off])
	return nil
}

func TestScoreConsistency(t *testing.T) {
	cfg := testConfigs()["mistral-mqa-untied"]
	q, err := newBackend(cfg, randomWeights(cfg, 21), 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newBackend(cfg, randomWeights(cfg, 22), 0)
	if err != nil {
		t.Fatal(err)
	}
	toks := randomTokens(75, cfg.VocabSize, 5)
	lq := allLogProbs(t, q, toks)
	lp := allLogProbs(t, p, toks)
	// Give the base a few exact zeros: p = 0 terms must contribute 0.
	lp[10][3], lp[10][4] = math.Inf(-1), math.Inf(-1)
	lp[70][0] = math.Inf(-1)
	// The KL specification: p = detmath.Exp (the same bits on every
	// GOARCH), terms summed in index order with rounded products.
	kl := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			if pa := detmath.Exp(a[i]); pa > 0 {
				s += float64(pa * (a[i] - b[i]))
			}
		}
		return s
	}
	for _, first := range []int{1, 2, 40, 74, 75} {
		w := backends.Window{Index: 7, Tokens: toks, First: first}
		const k = 5
		sc, err := q.Score(context.Background(), w, backends.Request{Base: rowsBase{lp, first - 1}, TopK: k})
		if err != nil {
			t.Fatal(err)
		}
		n := len(toks) - first
		if len(sc.NLL) != n || len(sc.KL) != n || len(sc.BaseNLL) != n || len(sc.Top) != n*k {
			t.Fatalf("First %d: lengths NLL %d KL %d BaseNLL %d Top %d, want %d", first, len(sc.NLL), len(sc.KL), len(sc.BaseNLL), len(sc.Top), n)
		}
		for i := 0; i < n; i++ {
			pos := first - 1 + i
			tgt := toks[pos+1]
			if sc.NLL[i] != -lq[pos][tgt] {
				t.Errorf("First %d target %d: NLL %v, LogProbs gives %v", first, i, sc.NLL[i], -lq[pos][tgt])
			}
			if sc.BaseNLL[i] != -lp[pos][tgt] {
				t.Errorf("First %d target %d: BaseNLL %v, want %v", first, i, sc.BaseNLL[i], -lp[pos][tgt])
			}
			if want := kl(lp[pos], lq[pos]); sc.KL[i] != want || !(want > 0) || math.IsInf(want, 0) {
				t.Errorf("First %d target %d: KL %v, want %v", first, i, sc.KL[i], want)
			}
			ids := make([]int32, cfg.VocabSize)
			for v := range ids {
				ids[v] = int32(v)
			}
			slices.SortStableFunc(ids, func(a, b int32) int {
				switch {
				case lq[pos][a] > lq[pos][b]:
					return -1
				case lq[pos][a] < lq[pos][b]:
					return 1
				}
				return 0
			})
			if !slices.Equal(sc.Top[i*k:(i+1)*k], ids[:k]) {
				t.Errorf("First %d target %d: top %v, want %v", first, i, sc.Top[i*k:(i+1)*k], ids[:k])
			}
		}
	}
	// compare_q coverage: every logits position, KL index = position.
	sc, err := q.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{Base: rowsBase{lp, 0}, KLAllPositions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.KL) != len(toks) || sc.BaseNLL != nil {
		t.Fatalf("KLAllPositions: len(KL) %d BaseNLL %v", len(sc.KL), sc.BaseNLL)
	}
	for pos := range toks {
		if want := kl(lp[pos], lq[pos]); sc.KL[pos] != want {
			t.Errorf("KLAllPositions pos %d: %v want %v", pos, sc.KL[pos], want)
		}
	}
	// KL of a model against itself is exactly 0.
	self, err := q.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{Base: rowsBase{lq, 0}})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range self.KL {
		if v != 0 {
			t.Errorf("self KL at %d = %v", i, v)
		}
	}
}

func TestTopKTies(t *testing.T) {
	lp := []float64{-2, -1, -3, -1, -1, -0.5, -3}
	dst := make([]int32, 4)
	topK(lp, 4, make([]int32, len(lp)), dst)
	if want := []int32{5, 1, 3, 4}; !slices.Equal(dst, want) {
		t.Errorf("small k: %v want %v", dst, want)
	}
	big := make([]float64, 100)
	for i := range big {
		big[i] = -float64(i % 7)
	}
	dst = make([]int32, 40)
	topK(big, 40, make([]int32, 100), dst)
	// 15 zeros (ids 0,7,...,98), then 14 of -1 (1,8,...,92), then 11 of -2.
	want := []int32{}
	for r := 0; r < 3; r++ {
		for i := r; i < 100; i += 7 {
			want = append(want, int32(i))
		}
	}
	if !slices.Equal(dst, want[:40]) {
		t.Errorf("large k: %v want %v", dst, want[:40])
	}
}

func TestScoreErrors(t *testing.T) {
	cfg := testConfigs()["llama-mha"]
	b, err := newBackend(cfg, randomWeights(cfg, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	ok := []int32{1, 2, 3}
	ctx := context.Background()
	cases := []struct {
		name string
		w    backends.Window
		req  backends.Request
	}{
		{"empty", backends.Window{First: 1}, backends.Request{}},
		{"id = vocab", backends.Window{Tokens: []int32{1, int32(cfg.VocabSize)}, First: 1}, backends.Request{}},
		{"negative id", backends.Window{Tokens: []int32{-1, 2}, First: 1}, backends.Request{}},
		{"first 0", backends.Window{Tokens: ok, First: 0}, backends.Request{}},
		{"first > len", backends.Window{Tokens: ok, First: 4}, backends.Request{}},
		{"topk > vocab", backends.Window{Tokens: ok, First: 1}, backends.Request{TopK: cfg.VocabSize + 1}},
		{"base vocab", backends.Window{Tokens: ok, First: 1}, backends.Request{Base: rowsBase{rows: [][]float64{{0}}}}},
	}
	for _, c := range cases {
		if _, err := b.Score(ctx, c.w, c.req); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	// No targets: empty scores, no error.
	sc, err := b.Score(ctx, backends.Window{Tokens: ok, First: 3}, backends.Request{TopK: 2})
	if err != nil || len(sc.NLL) != 0 || len(sc.Top) != 0 {
		t.Errorf("First = len: %+v, %v", sc, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Score(ctx, backends.Window{Tokens: ok, First: 1}, backends.Request{}); err == nil {
		t.Error("Score after Close accepted")
	}
}
