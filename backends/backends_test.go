package backends

import (
	"strings"
	"testing"
)

type vocabOnly int

func (v vocabOnly) Vocab() int                        { return int(v) }
func (vocabOnly) LogProbs(i int, dst []float64) error { return nil }

func TestWindowValidate(t *testing.T) {
	toks := []int32{1, 2, 3, 4}
	cases := []struct {
		w     Window
		vocab int
		want  string // "" = valid
	}{
		{Window{Index: 3, Tokens: toks, First: 1}, 5, ""},
		{Window{Index: 3, Tokens: toks, First: 4}, 5, ""}, // no target: valid, empty scores
		{Window{Index: 3, Tokens: toks, First: 1}, 0, ""}, // vocabulary unknown: ids not checked
		{Window{Index: 3, Tokens: nil, First: 1}, 5, "window 3 is empty"},
		{Window{Index: 3, Tokens: toks, First: 0}, 5, "window 3: first target 0 outside [1, 4]"},
		{Window{Index: 3, Tokens: toks, First: 5}, 5, "window 3: first target 5 outside [1, 4]"},
		{Window{Index: 3, Tokens: toks, First: 1}, 4, "window 3 position 3: token id 4 outside the vocabulary [0, 4)"},
		{Window{Index: 3, Tokens: []int32{0, -1}, First: 1}, 4, "window 3 position 1: token id -1 outside the vocabulary [0, 4)"},
	}
	for _, c := range cases {
		err := c.w.Validate(c.vocab)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%+v vocab %d: %q, want %q", c.w, c.vocab, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%+v vocab %d: valid, want %q", c.w, c.vocab, c.want)
		}
	}
	w := Window{Index: 1, Tokens: toks, First: 1}
	for from, ok := range map[int]bool{-1: false, 0: true, 4: true, 5: false} {
		if err := w.CheckFrom(from); (err == nil) != ok {
			t.Errorf("CheckFrom(%d): %v", from, err)
		}
	}
}

func TestRequestValidate(t *testing.T) {
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{TopK: 0}, ""},
		{Request{TopK: 8, Base: vocabOnly(8)}, ""},
		{Request{TopK: 9}, "TopK 9 outside [0, 8]"},
		{Request{TopK: -1}, "TopK -1 outside [0, 8]"},
		{Request{Base: vocabOnly(7)}, "base log-probs have vocab 7, model has 8"},
	} {
		err := c.r.Validate(8)
		if (err == nil) != (c.want == "") || err != nil && err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
}

// The shapes and the position arithmetic of the contract, on a window of 6
// tokens whose first target is 3: targets 3, 4, 5 predicted by logits
// positions 2, 3, 4.
func TestScoresShapeAndPositions(t *testing.T) {
	w := Window{Tokens: make([]int32, 6), First: 3}
	scored := Request{Base: vocabOnly(4), TopK: 2}
	all := Request{Base: vocabOnly(4), KLAllPositions: true}
	cases := []struct {
		name                  string
		r                     Request
		nll, kl, baseNLL, top int
		lo, hi                int
		klOfPos               map[int]int // logits position → KL index
		numKL                 int
	}{
		{"no base", Request{}, 3, 0, 0, 0, 2, 5, nil, 0},
		{"scored KL, top-2", scored, 3, 3, 3, 6, 2, 5, map[int]int{2: 0, 3: 1, 4: 2}, 3},
		{"KL at all positions", all, 3, 6, 0, 0, 0, 6, map[int]int{0: 0, 2: 2, 5: 5}, 6},
	}
	for _, c := range cases {
		sc := NewScores(w, c.r)
		if len(sc.NLL) != c.nll || len(sc.KL) != c.kl || len(sc.BaseNLL) != c.baseNLL || len(sc.Top) != c.top {
			t.Errorf("%s: NLL %d KL %d BaseNLL %d Top %d, want %d %d %d %d", c.name, len(sc.NLL), len(sc.KL), len(sc.BaseNLL), len(sc.Top), c.nll, c.kl, c.baseNLL, c.top)
		}
		if lo, hi := c.r.LogitsRange(w); lo != c.lo || hi != c.hi {
			t.Errorf("%s: logits range [%d, %d), want [%d, %d)", c.name, lo, hi, c.lo, c.hi)
		}
		if n := c.r.NumKLPositions(w); n != c.numKL {
			t.Errorf("%s: %d KL positions, want %d", c.name, n, c.numKL)
		}
		for pos, ki := range c.klOfPos {
			if got := c.r.KLIndex(w, pos); got != ki {
				t.Errorf("%s: KL index of logits position %d = %d, want %d", c.name, pos, got, ki)
			}
			if got := KLLogitsPosition(c.r.KLAllPositions, w.First, ki); got != pos {
				t.Errorf("%s: logits position of KL index %d = %d, want %d", c.name, ki, got, pos)
			}
		}
	}
	for pos, want := range map[int]int{1: -1, 2: 0, 4: 2, 5: -1} {
		ti, ok := w.Target(pos)
		if ok != (want >= 0) || ok && ti != want {
			t.Errorf("Target(%d) = %d, %v; want %d", pos, ti, ok, want)
		}
	}
	if !strings.Contains(Window{Index: 2}.Validate(1).Error(), "window 2") {
		t.Error("errors name the window")
	}
}
