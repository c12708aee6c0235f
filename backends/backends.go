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
package backends

import "context"

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
