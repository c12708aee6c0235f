// Package backends defines the contract between the evaluation driver
// (package compare) and the engines that run a model forward (package
// reference, package backends/cuda). It imports only the standard library.
//
// A backend scores one window of token ids at a time and returns per-token
// quantities, never full logits: the negative log-likelihood of each target
// token, optionally the KL divergence against base log-probabilities supplied
// by the caller, and optionally the top-k token ids. Full-vocabulary
// log-probabilities are only produced through the optional LogProber
// interface (used to save a base model's distribution).
//
// Positions. A window holds len(Tokens) ids. Target position p (First <= p <
// len(Tokens)) is the prediction of Tokens[p] from the logits at position
// p-1. Scores have one entry per target position, in order, unless stated
// otherwise.
//
// The contract's arithmetic lives here, beside the interface, and both
// backends and the driver call it rather than repeat it: Window.Validate
// (shape and ids), Request.Validate, NewScores (the shape of a window's
// Scores), Request.LogitsRange (the logits rows a request needs),
// Request.KLIndex and KLLogitsPosition (KL position ↔ logits position) and
// Window.Target (logits position → target index). The forward passes stay
// independent: only this contract is shared.
package backends

import (
	"context"
	"fmt"
)

// Info describes a backend instance.
type Info struct {
	Name      string // "reference", "emu", "cuda"
	Precision string // "fp64", "bf16", "fp16", "fp32"
	Devices   []string
	Vocab     int // number of logits per position
}

// Window is one sequence to run forward.
type Window struct {
	Index  int     // run order; resume and shard merge key on it
	Tokens []int32 // the ids fed to the model, BOS already applied by the caller
	First  int     // first target position, 1 <= First <= len(Tokens)
}

// NumTargets returns the number of scored target positions.
func (w Window) NumTargets() int { return len(w.Tokens) - w.First }

// Validate checks w against the contract: at least one token, 1 <= First
// <= len(Tokens), and, when vocab > 0, every id in [0, vocab).
func (w Window) Validate(vocab int) error {
	T := len(w.Tokens)
	if T == 0 {
		return fmt.Errorf("window %d is empty", w.Index)
	}
	if w.First < 1 || w.First > T {
		return fmt.Errorf("window %d: first target %d outside [1, %d]", w.Index, w.First, T)
	}
	if vocab > 0 {
		for p, id := range w.Tokens {
			if id < 0 || int(id) >= vocab {
				return fmt.Errorf("window %d position %d: token id %d outside the vocabulary [0, %d)", w.Index, p, id, vocab)
			}
		}
	}
	return nil
}

// CheckFrom checks the first logits position of a LogProber call:
// 0 <= from <= len(Tokens).
func (w Window) CheckFrom(from int) error {
	if T := len(w.Tokens); from < 0 || from > T {
		return fmt.Errorf("window %d: from %d outside [0, %d]", w.Index, from, T)
	}
	return nil
}

// Target returns the target index (into Scores.NLL) predicted by the
// logits at position pos, and whether pos predicts a scored target
// (First <= pos+1 < len(Tokens)).
func (w Window) Target(pos int) (int, bool) {
	p := pos + 1
	return p - w.First, p >= w.First && p < len(w.Tokens)
}

// BaseLogProbs supplies a base model's full-vocabulary log-probabilities
// for the positions of one window for which KL is requested.
type BaseLogProbs interface {
	Vocab() int
	// LogProbs writes the base log-probs of KL position i into dst
	// (len(dst) == Vocab()).
	LogProbs(i int, dst []float64) error
}

// Request says which optional quantities Score computes besides NLL.
type Request struct {
	// Base, when non-nil, asks for KL(P_base || Q) at every KL position.
	Base BaseLogProbs
	// KLAllPositions selects compare_q's KL coverage: every logits position
	// 0..len(Tokens)-1 (the last one has no target) instead of one per
	// target position (logits position p-1 for target p).
	KLAllPositions bool
	// TopK > 0 asks for the ids of the K most probable tokens at each
	// target's logits position, most probable first (ties: lower id first).
	TopK int
}

// Validate checks r against a model's vocabulary: 0 <= TopK <= vocab and
// base log-probs of the same vocabulary.
func (r Request) Validate(vocab int) error {
	if r.TopK < 0 || r.TopK > vocab {
		return fmt.Errorf("TopK %d outside [0, %d]", r.TopK, vocab)
	}
	if r.Base != nil && r.Base.Vocab() != vocab {
		return fmt.Errorf("base log-probs have vocab %d, model has %d", r.Base.Vocab(), vocab)
	}
	return nil
}

// LogitsRange returns the logits positions [lo, hi) that r needs for w:
// the targets' (First-1 … len-2), or every position when KL is asked at
// all positions.
func (r Request) LogitsRange(w Window) (lo, hi int) {
	if r.Base != nil && r.KLAllPositions {
		return 0, len(w.Tokens)
	}
	return w.First - 1, len(w.Tokens) - 1
}

// KLIndex returns the KL position (index into Scores.KL and into
// BaseLogProbs) of logits position pos of w: pos itself with
// KLAllPositions, else the index of the target pos predicts.
func (r Request) KLIndex(w Window, pos int) int {
	if r.KLAllPositions {
		return pos
	}
	return pos + 1 - w.First
}

// KLLogitsPosition is the inverse of Request.KLIndex: the logits position
// of KL position i of a window whose first target is first.
func KLLogitsPosition(allPositions bool, first, i int) int {
	if allPositions {
		return i
	}
	return first - 1 + i
}

// NumKLPositions is the number of KL positions of w under r (0 without a
// base): len(Tokens) with KLAllPositions, else one per target.
func (r Request) NumKLPositions(w Window) int {
	switch {
	case r.Base == nil:
		return 0
	case r.KLAllPositions:
		return len(w.Tokens)
	}
	return w.NumTargets()
}

// NewScores allocates the Scores of w under r: NLL per target, KL per KL
// position and BaseNLL per target when r has a base (BaseNLL only for
// KL at the scored positions), TopK ids per target.
func NewScores(w Window, r Request) Scores {
	nt := w.NumTargets()
	sc := Scores{NLL: make([]float64, nt)}
	if r.Base != nil {
		sc.KL = make([]float64, r.NumKLPositions(w))
		if !r.KLAllPositions {
			sc.BaseNLL = make([]float64, nt)
		}
	}
	if r.TopK > 0 {
		sc.Top = make([]int32, nt*r.TopK)
	}
	return sc
}

// Scores holds per-position results of one window.
type Scores struct {
	NLL     []float64 // -log Q(Tokens[p] | Tokens[:p]) for each target p
	KL      []float64 // per KL position, when Request.Base != nil
	Top     []int32   // TopK ids per target position, flattened, when TopK > 0
	BaseNLL []float64 // -log P_base(target) per target position, when Request.Base != nil and !KLAllPositions
}

// Backend runs a model forward over windows.
type Backend interface {
	Info() Info
	Score(ctx context.Context, w Window, req Request) (Scores, error)
	Close() error
}

// LogProber is implemented by backends that can emit full log-probability
// rows (for saving a base model's distribution). emit is called for every
// logits position pos in [from, len(w.Tokens)) in increasing order; lp is
// only valid during the call.
type LogProber interface {
	LogProbs(ctx context.Context, w Window, from int, emit func(pos int, lp []float64) error) error
}

// Point names an intermediate activation: the output of Site in Layer.
// Site names are the constants of package arch.
type Point struct {
	Layer int
	Site  string
}

// Prober is implemented by backends that expose intermediate activations
// (for locating a diverging kernel in verify). The returned slices are
// row-major [len(w.Tokens)][width].
type Prober interface {
	Probe(ctx context.Context, w Window, at []Point) (map[Point][]float64, error)
}
