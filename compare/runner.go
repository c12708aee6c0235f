package compare

import (
	"context"
	"fmt"
	"math"

	"github.com/qppl/qppl/backends"
)

// Runner scores windows with a backend and turns each into a WindowResult.
//
// Resume and shard hook: Skip leaves out windows (already journaled, or
// belonging to another shard) and OnWindow receives each finished window in
// run order before Run moves on, so a journal can append
// WindowResult.MarshalBinary and fsync it. Reduce over the journaled and
// the newly run windows gives the same Result as one uninterrupted run.
type Runner struct {
	Backend backends.Backend
	Windows []backends.Window

	// Base, when non-nil, supplies the base log-probs: the windows it
	// covers are scored with KL, base NLL, base top-1 and top-K overlap.
	Base *Store
	// Save, when non-nil, receives the backend's log-probs of every stored
	// position (the backend must implement backends.LogProber); for those
	// windows NLL and top-1 are computed from the same log-probs, in one
	// forward pass. Save and Base exclude each other.
	Save *StoreWriter
	// TopK is the K of the top-K agreement (values < 2: none).
	TopK int
	// Top1 asks for Q's top-1 id per target even without a base (token
	// dumps).
	Top1 bool

	Progress *Progress
	Skip     func(index int) bool
	OnWindow func(WindowResult) error
}

// Run scores every window not skipped, in order. On error or cancellation
// it returns the windows finished so far with the error.
func (r *Runner) Run(ctx context.Context) ([]WindowResult, error) {
	if r.Backend == nil {
		return nil, fmt.Errorf("runner: no backend")
	}
	if r.Save != nil && r.Base != nil {
		return nil, fmt.Errorf("saving base log-probs and scoring against a base cannot be combined in one run")
	}
	vocab := r.Backend.Info().Vocab
	if r.Base != nil && vocab > 0 && r.Base.Header().Vocab != vocab {
		return nil, fmt.Errorf("base log-probs have vocabulary %d, backend %s has %d", r.Base.Header().Vocab, r.Backend.Info().Name, vocab)
	}
	var lpr backends.LogProber
	if r.Save != nil {
		var ok bool
		if lpr, ok = r.Backend.(backends.LogProber); !ok {
			return nil, fmt.Errorf("backend %s cannot emit log-probs, needed to save base log-probs", r.Backend.Info().Name)
		}
		if vocab > 0 && r.Save.Header().Vocab != vocab {
			return nil, fmt.Errorf("base store vocabulary %d, backend %s has %d", r.Save.Header().Vocab, r.Backend.Info().Name, vocab)
		}
	}
	var total int64
	todo := 0
	for _, w := range r.Windows {
		if err := w.Validate(vocab); err != nil {
			return nil, err
		}
		if r.Skip == nil || !r.Skip(w.Index) {
			total += int64(len(w.Tokens))
			todo++
		}
	}
	k := 0 // ids per target asked of Score
	if r.Base != nil {
		k = max(r.TopK, 1)
	} else if r.Top1 {
		k = 1
	}
	r.Progress.Start(todo, total)
	defer r.Progress.Finish()
	var out []WindowResult
	var doneTok int64
	for _, w := range r.Windows {
		if r.Skip != nil && r.Skip(w.Index) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("interrupted before window %d: %w", w.Index, err)
		}
		var wr WindowResult
		var err error
		if from, ok := r.saving(w); ok {
			wr, err = r.saveWindow(ctx, lpr, w, from)
		} else {
			wr, err = r.scoreWindow(ctx, w, k)
		}
		if err != nil {
			return out, err
		}
		if err := wr.validate(); err != nil {
			return out, fmt.Errorf("backend %s: %w", r.Backend.Info().Name, err)
		}
		if r.OnWindow != nil {
			if err := r.OnWindow(wr); err != nil {
				return out, fmt.Errorf("window %d: %w", w.Index, err)
			}
		}
		out = append(out, wr)
		doneTok += int64(len(w.Tokens))
		r.Progress.Update(len(out), doneTok)
	}
	return out, nil
}

func (r *Runner) saving(w backends.Window) (int, bool) {
	if r.Save == nil {
		return 0, false
	}
	return r.Save.Wants(w.Index)
}

// scoreWindow runs Score, with the base when the store covers w.
func (r *Runner) scoreWindow(ctx context.Context, w backends.Window, k int) (WindowResult, error) {
	t := w.NumTargets()
	wr := WindowResult{Index: w.Index, First: w.First, Len: len(w.Tokens)}
	req := backends.Request{TopK: k}
	var obs *baseObserver
	if r.Base != nil {
		lp, ok, err := r.Base.Window(w)
		if err != nil {
			return wr, err
		}
		if !ok && r.Base.KLMode() == KLScored {
			return wr, fmt.Errorf("base log-probs %s hold no window %d (they cover %d windows): made for a different run", r.Base.path, w.Index, len(r.Base.wins))
		}
		if ok {
			obs = newBaseObserver(lp, w, r.Base.KLMode(), max(r.TopK, 1))
			req.Base = obs
			req.KLAllPositions = r.Base.KLMode() == KLCompareQ
		}
	}
	sc, err := r.Backend.Score(ctx, w, req)
	if err != nil {
		return wr, fmt.Errorf("window %d: %w", w.Index, err)
	}
	name := r.Backend.Info().Name
	if len(sc.NLL) != t {
		return wr, fmt.Errorf("backend %s window %d: %d NLL values for %d targets", name, w.Index, len(sc.NLL), t)
	}
	wr.NLL = append([]float64(nil), sc.NLL...)
	if k > 0 {
		if len(sc.Top) != t*k {
			return wr, fmt.Errorf("backend %s window %d: %d top ids for %d targets × top-%d", name, w.Index, len(sc.Top), t, k)
		}
		wr.Top1 = make([]int32, t)
		for i := range wr.Top1 {
			wr.Top1[i] = sc.Top[i*k]
		}
	}
	if obs == nil {
		return wr, nil
	}
	if len(sc.KL) != obs.Len() {
		return wr, fmt.Errorf("backend %s window %d: %d KL values for %d KL positions", name, w.Index, len(sc.KL), obs.Len())
	}
	wr.KL = append([]float64(nil), sc.KL...)
	if err := obs.fill(); err != nil {
		return wr, err
	}
	// The base run's exact target NLL and top ids, when the store has them:
	// the record encoding (u16) then changes nothing but the KL.
	nll, top, kt, ok, err := r.Base.Targets(w.Index)
	if err != nil {
		return wr, err
	}
	if ok && len(nll) == t {
		copy(obs.baseNLL, nll)
		if obs.k <= kt {
			for i := range t {
				copy(obs.baseTop[i*obs.k:(i+1)*obs.k], top[i*kt:i*kt+obs.k])
			}
		}
	}
	wr.BaseNLL = obs.baseNLL
	wr.BaseTop1 = make([]int32, t)
	for i := range wr.BaseTop1 {
		wr.BaseTop1[i] = obs.baseTop[i*obs.k]
	}
	if r.TopK > 1 {
		wr.TopKOverlap = make([]int32, t)
		for i := range wr.TopKOverlap {
			wr.TopKOverlap[i] = overlap(sc.Top[i*k:(i+1)*k], obs.baseTop[i*obs.k:(i+1)*obs.k])
		}
	}
	return wr, nil
}

// saveWindow runs the backend's LogProbs once: stored positions go to the
// store, targets get their NLL and top-1 from the same rows.
func (r *Runner) saveWindow(ctx context.Context, lpr backends.LogProber, w backends.Window, from int) (WindowResult, error) {
	t := w.NumTargets()
	wr := WindowResult{Index: w.Index, First: w.First, Len: len(w.Tokens), NLL: make([]float64, t), Top1: make([]int32, t)}
	got := make([]bool, t)
	kt := r.Save.Header().TargetTopK
	top := make([]int32, t*kt) // exact top ids of every target, for the store
	allPos := r.Save.Header().KLMode == KLCompareQ
	next := from
	err := lpr.LogProbs(ctx, w, from, func(pos int, lp []float64) error {
		if pos != next {
			return fmt.Errorf("log-probs of window %d: got position %d, want %d", w.Index, pos, next)
		}
		next++
		if allPos || pos+1 < len(w.Tokens) {
			if err := r.Save.Write(w.Index, pos, lp); err != nil {
				return err
			}
		}
		if t, ok := w.Target(pos); ok {
			wr.NLL[t] = -lp[w.Tokens[pos+1]]
			wr.Top1[t] = argmax(lp)
			if kt > 0 {
				topK(lp, top[t*kt:(t+1)*kt])
			}
			got[t] = true
		}
		return nil
	})
	if err != nil {
		return wr, fmt.Errorf("window %d: %w", w.Index, err)
	}
	for i, ok := range got {
		if !ok {
			return wr, fmt.Errorf("backend %s window %d: no log-probs for target position %d", r.Backend.Info().Name, w.Index, w.First+i)
		}
	}
	if kt > 0 {
		if err := r.Save.WriteTargets(w.Index, wr.NLL, top); err != nil {
			return wr, err
		}
	}
	return wr, nil
}

// argmax returns the index of the largest value (lowest index on ties).
func argmax(v []float64) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// topK writes into ids the indices of the k largest values of v, largest
// first, lower index first on ties.
func topK(v []float64, ids []int32) {
	k := len(ids)
	n := 0
	for i, x := range v {
		if n == k && !(x > v[ids[k-1]]) {
			continue
		}
		j := min(n, k-1)
		if n < k {
			n++
		}
		for j > 0 && x > v[ids[j-1]] {
			ids[j] = ids[j-1]
			j--
		}
		ids[j] = int32(i)
	}
}

func overlap(a, b []int32) int32 {
	var n int32
	for _, x := range a {
		for _, y := range b {
			if x == y {
				n++
				break
			}
		}
	}
	return n
}

// baseObserver wraps a window's stored base log-probs for the backend: it
// records the base NLL and top-K of each target as the backend reads the
// rows, then applies the store's floor (entries ≤ floor become −Inf, i.e.
// probability 0, so that KL with a u16 store skips them as llama.cpp does,
// and decoded values above 0 become 0). Backends must give a
// zero-probability base entry a zero KL term.
type baseObserver struct {
	src     *StoreLogProbs
	w       backends.Window
	mode    KLMode
	k       int
	floor   float64
	baseNLL []float64
	baseTop []int32
	seen    []bool
}

func newBaseObserver(src *StoreLogProbs, w backends.Window, mode KLMode, k int) *baseObserver {
	t := w.NumTargets()
	return &baseObserver{src: src, w: w, mode: mode, k: k, floor: src.Floor(),
		baseNLL: make([]float64, t), baseTop: make([]int32, t*k), seen: make([]bool, t)}
}

func (o *baseObserver) Vocab() int { return o.src.Vocab() }
func (o *baseObserver) Len() int   { return o.src.Len() }

func (o *baseObserver) LogProbs(i int, dst []float64) error {
	if err := o.src.LogProbs(i, dst); err != nil {
		return err
	}
	o.observe(i, dst)
	if !math.IsInf(o.floor, -1) {
		for j, v := range dst {
			switch {
			case v <= o.floor:
				dst[j] = math.Inf(-1)
			case v > 0:
				// float32 rounding of scale·65535 + min_log_prob can put a
				// near-certain token a few ulps above 0; a log-prob is ≤ 0.
				dst[j] = 0
			}
		}
	}
	return nil
}

// observe records the target statistics of KL position i (raw values).
func (o *baseObserver) observe(i int, lp []float64) {
	t, ok := o.w.Target(klLogitsPos(o.mode, o.w.First, i))
	if !ok {
		return
	}
	p := o.w.First + t
	if o.seen[t] {
		return
	}
	o.baseNLL[t] = -lp[o.w.Tokens[p]]
	topK(lp, o.baseTop[t*o.k:(t+1)*o.k])
	o.seen[t] = true
}

// fill reads the rows of targets the backend did not read through us.
func (o *baseObserver) fill() error {
	var buf []float64
	for t, ok := range o.seen {
		if ok {
			continue
		}
		if buf == nil {
			buf = make([]float64, o.src.Vocab())
		}
		// the KL position of target t's logits position
		i := backends.Request{KLAllPositions: o.mode == KLCompareQ}.KLIndex(o.w, o.w.First+t-1)
		if err := o.src.LogProbs(i, buf); err != nil {
			return err
		}
		o.observe(i, buf)
	}
	return nil
}
