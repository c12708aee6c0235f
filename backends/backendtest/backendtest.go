package backendtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/internal/oracle"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	tol           float64
	archs         []string
	deterministic bool
	ctx           int
	acc           *accuracy // nil: from Info().Precision
}

// accuracy bounds |NLL − oracle NLL| over the targets of one window.
type accuracy struct{ max, mean float64 }

// precisionAccuracy is the default agreement with the float64 oracle per
// Info().Precision. fp64: summation-order rounding only (observed ~1e-13 on
// these models). fp32/bf16/fp16: the emulated CUDA kernels' documented
// end-to-end tolerances against the reference (docs/cuda.md, TestAgainstReference
// in backends/cuda).
func precisionAccuracy(prec string) (accuracy, bool) {
	switch prec {
	case "fp64":
		return accuracy{1e-9, 1e-10}, true
	case "fp32":
		return accuracy{1e-4, 2e-5}, true
	case "bf16":
		return accuracy{0.25, 0.06}, true
	case "fp16":
		return accuracy{0.04, 0.01}, true
	}
	return accuracy{}, false
}

// Accuracy sets the largest and the mean |NLL − oracle NLL| allowed over the
// targets of a window, overriding the default chosen from Info().Precision.
// A backend reporting another precision must set it.
func Accuracy(maxAbs, meanAbs float64) Option {
	return func(c *config) { c.acc = &accuracy{maxAbs, meanAbs} }
}

// Tolerance sets the absolute tolerance for comparisons between a backend's
// own outputs (NLL vs −logprob, self-KL, suffix windows, normalisation).
// The default, 1e-10, suits float64 backends; reduced-precision backends
// pass their own (it never loosens the error checks).
func Tolerance(abs float64) Option { return func(c *config) { c.tol = abs } }

// Archs restricts the models to the named fixtures (model_type values of
// arch.Names; default all).
func Archs(names ...string) Option { return func(c *config) { c.archs = names } }

// NonDeterministic skips the bit-identical repeat check.
func NonDeterministic() Option { return func(c *config) { c.deterministic = false } }

// Context sets the window length used by the checks (default 80, longer
// than one 64-row block of the usual tilings).
func Context(n int) Option { return func(c *config) { c.ctx = n } }

// Vocab of the fixtures written by Run.
const Vocab = fixtures.SuiteVocab

// Run checks newBackend on every fixture architecture. newBackend opens the
// model directory it is given; Run closes the backend.
func Run(t *testing.T, newBackend func(t *testing.T, modelDir string) backends.Backend, opts ...Option) {
	c := config{tol: 1e-10, deterministic: true, ctx: 80}
	for _, o := range opts {
		o(&c)
	}
	archs := c.archs
	if len(archs) == 0 {
		archs = arch.Names()
	}
	for _, a := range archs {
		t.Run(a, func(t *testing.T) {
			dir := t.TempDir()
			emb, err := WriteModel(dir, a, 1)
			if err != nil {
				t.Fatal(err)
			}
			b := newBackend(t, dir)
			if b == nil {
				t.Fatal("newBackend returned nil")
			}
			defer b.Close()
			s := suite{t: t, b: b, c: c, emb: emb, dir: dir}
			s.run()
		})
	}
}

// reporter is the part of testing.TB the checks use.
type reporter interface {
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

type suite struct {
	t   reporter
	b   backends.Backend
	c   config
	emb []float64 // [Vocab][hidden] embedding as written
	dir string    // model directory, read by the oracle
}

func tokens(n int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 99))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(Vocab))
	}
	return out
}

// call runs f, turning a panic into a test error.
func (s *suite) call(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.t.Errorf("%s: panic: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

func (s *suite) score(what string, w backends.Window, req backends.Request) (backends.Scores, error) {
	var sc backends.Scores
	err := s.call(what, func() error {
		var err error
		sc, err = s.b.Score(context.Background(), w, req)
		return err
	})
	return sc, err
}

func (s *suite) run() {
	t := s.t
	if v := s.b.Info().Vocab; v != Vocab {
		t.Errorf("Info().Vocab = %d, want %d", v, Vocab)
	}
	toks := tokens(s.c.ctx, 5)
	w := backends.Window{Index: 3, Tokens: toks, First: 1}
	sc, err := s.score("Score", w, backends.Request{TopK: 4})
	if err != nil {
		t.Fatalf("Score: %v", err)
	}
	n := len(toks) - 1
	if len(sc.NLL) != n || len(sc.Top) != 4*n || sc.KL != nil || sc.BaseNLL != nil {
		t.Fatalf("Score lengths: NLL %d Top %d KL %d BaseNLL %d, want %d, %d, 0, 0", len(sc.NLL), len(sc.Top), len(sc.KL), len(sc.BaseNLL), n, 4*n)
	}
	for i, v := range sc.NLL {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < -s.c.tol {
			t.Errorf("NLL[%d] = %v", i, v)
		}
	}
	s.checkTop(sc.Top, 4, n)
	s.checkOracle(toks, sc.NLL)

	// LogProbs consistency.
	var rows [][]float64
	if lp, ok := s.b.(backends.LogProber); ok {
		err := s.call("LogProbs", func() error {
			return lp.LogProbs(context.Background(), w, 0, func(pos int, row []float64) error {
				if pos != len(rows) {
					return fmt.Errorf("emit position %d, want %d", pos, len(rows))
				}
				if len(row) != Vocab {
					return fmt.Errorf("row of %d values, want %d", len(row), Vocab)
				}
				rows = append(rows, append([]float64(nil), row...))
				return nil
			})
		})
		if err != nil {
			t.Fatalf("LogProbs: %v", err)
		}
		if len(rows) != len(toks) {
			t.Fatalf("LogProbs emitted %d rows, want %d", len(rows), len(toks))
		}
		for p, row := range rows {
			if z := logSumExp(row); math.Abs(z) > s.c.tol {
				t.Errorf("LogProbs row %d: log Σ exp = %g, want 0", p, z)
			}
		}
		for i := 0; i < n; i++ {
			if d := math.Abs(sc.NLL[i] + rows[i][toks[i+1]]); d > s.c.tol {
				t.Errorf("target %d: NLL %v, −LogProbs %v", i, sc.NLL[i], -rows[i][toks[i+1]])
			}
			top := sc.Top[4*i : 4*i+4]
			for k := 1; k < 4; k++ {
				a, b := rows[i][top[k-1]], rows[i][top[k]]
				if a < b-s.c.tol {
					t.Errorf("target %d: top ids %v not sorted by log-prob", i, top)
				}
			}
			if best := argmax(rows[i]); rows[i][best]-rows[i][top[0]] > s.c.tol {
				t.Errorf("target %d: top-1 %d (lp %v), arg-max %d (lp %v)", i, top[0], rows[i][top[0]], best, rows[i][best])
			}
		}
		// From a later position only.
		var got int
		err = s.call("LogProbs from", func() error {
			return lp.LogProbs(context.Background(), w, len(toks)-3, func(pos int, row []float64) error {
				if pos != len(toks)-3+got {
					return fmt.Errorf("emit position %d", pos)
				}
				got++
				return nil
			})
		})
		if err != nil || got != 3 {
			t.Errorf("LogProbs from len-3: %d rows, %v", got, err)
		}
		s.checkSelfKL(w, rows, sc.NLL)
	}

	// Suffix windows.
	for _, first := range []int{2, 17, len(toks) - 1} {
		ws := backends.Window{Index: 4, Tokens: toks, First: first}
		suf, err := s.score(fmt.Sprintf("Score First=%d", first), ws, backends.Request{})
		if err != nil {
			t.Errorf("Score First=%d: %v", first, err)
			continue
		}
		if len(suf.NLL) != len(toks)-first {
			t.Errorf("First=%d: %d NLLs, want %d", first, len(suf.NLL), len(toks)-first)
			continue
		}
		for i, v := range suf.NLL {
			if d := math.Abs(v - sc.NLL[first-1+i]); d > s.c.tol {
				t.Errorf("First=%d target %d: NLL %v, First=1 gives %v", first, i, v, sc.NLL[first-1+i])
			}
		}
	}

	// Causality: the tokens after a position never change its NLL, so a
	// prefix of the window scores its targets as the whole window does.
	for _, n := range []int{2, 33, len(toks) / 2} {
		pre, err := s.score(fmt.Sprintf("Score prefix of %d tokens", n), backends.Window{Index: 5, Tokens: toks[:n], First: 1}, backends.Request{})
		if err != nil {
			t.Errorf("Score prefix of %d tokens: %v", n, err)
			continue
		}
		if len(pre.NLL) != n-1 {
			t.Errorf("prefix of %d tokens: %d NLLs, want %d", n, len(pre.NLL), n-1)
			continue
		}
		for i, v := range pre.NLL {
			if d := math.Abs(v - sc.NLL[i]); !(d <= s.c.tol) {
				t.Errorf("prefix of %d tokens, target %d: NLL %v, the whole window gives %v", n, i, v, sc.NLL[i])
			}
		}
	}

	// Determinism.
	if s.c.deterministic {
		again, err := s.score("Score repeat", w, backends.Request{TopK: 4})
		if err != nil {
			t.Fatalf("Score repeat: %v", err)
		}
		for i := range sc.NLL {
			if math.Float64bits(again.NLL[i]) != math.Float64bits(sc.NLL[i]) {
				t.Errorf("repeat: NLL[%d] %v then %v", i, sc.NLL[i], again.NLL[i])
			}
		}
		for i := range sc.Top {
			if again.Top[i] != sc.Top[i] {
				t.Errorf("repeat: Top[%d] %d then %d", i, sc.Top[i], again.Top[i])
			}
		}
	}

	s.checkErrors(toks)
	s.checkProbe(toks[:9])
}

// checkOracle compares the NLL of every target of toks with the oracle's
// log-probabilities computed from the same checkpoint.
func (s *suite) checkOracle(toks []int32, nll []float64) {
	t := s.t
	acc, ok := precisionAccuracy(s.b.Info().Precision)
	if s.c.acc != nil {
		acc, ok = *s.c.acc, true
	}
	if !ok {
		t.Errorf("Info().Precision %q has no default oracle accuracy: pass backendtest.Accuracy", s.b.Info().Precision)
		return
	}
	m, err := arch.OpenDir(s.dir)
	if err != nil {
		t.Errorf("oracle: %v", err)
		return
	}
	defer m.Close()
	// The oracle costs O(T³): by causality the first oracleTokens positions
	// of a long window are scored exactly as a window of that length.
	const oracleTokens = 96
	if len(toks) > oracleTokens {
		toks, nll = toks[:oracleTokens], nll[:oracleTokens-1]
	}
	lp, err := oracle.LogProbs(m.Config, m.ReadFloat64, toks, oracle.Options{})
	if err != nil {
		t.Errorf("oracle: %v", err)
		return
	}
	var worst, sum float64
	at := 0
	for i, v := range nll {
		d := math.Abs(v + lp[i][toks[i+1]])
		if !(d <= worst) { // NaN counts as worst
			worst, at = d, i
		}
		sum += d
	}
	mean := sum / float64(len(nll))
	if !(worst <= acc.max) || !(mean <= acc.mean) {
		t.Errorf("NLL against the float64 oracle: max |Δ| %.3g at target %d (NLL %v, oracle %v), mean %.3g; accuracy %g, %g",
			worst, at, nll[at], -lp[at][toks[at+1]], mean, acc.max, acc.mean)
	}
}

func (s *suite) checkTop(top []int32, k, n int) {
	for i := 0; i < n; i++ {
		seen := map[int32]bool{}
		for _, id := range top[i*k : (i+1)*k] {
			if id < 0 || id >= Vocab || seen[id] {
				s.t.Errorf("target %d: top ids %v: out of range or repeated", i, top[i*k:(i+1)*k])
				break
			}
			seen[id] = true
		}
	}
}

// memBase serves log-prob rows: KL position i is rows[i+off].
type memBase struct {
	rows [][]float64
	off  int
}

func (m memBase) Vocab() int { return Vocab }
func (m memBase) LogProbs(i int, dst []float64) error {
	if i+m.off < 0 || i+m.off >= len(m.rows) {
		return fmt.Errorf("KL position %d out of range", i)
	}
	copy(dst, m.rows[i+m.off])
	return nil
}

func (s *suite) checkSelfKL(w backends.Window, rows [][]float64, nll []float64) {
	t := s.t
	sc, err := s.score("Score with Base", w, backends.Request{Base: memBase{rows, w.First - 1}})
	if err != nil {
		t.Errorf("Score with Base: %v", err)
		return
	}
	if len(sc.KL) != len(nll) || len(sc.BaseNLL) != len(nll) {
		t.Errorf("Score with Base: %d KL, %d BaseNLL, want %d", len(sc.KL), len(sc.BaseNLL), len(nll))
		return
	}
	for i := range nll {
		if math.Abs(sc.KL[i]) > s.c.tol || math.IsNaN(sc.KL[i]) {
			t.Errorf("self KL at target %d = %g", i, sc.KL[i])
		}
		if d := math.Abs(sc.BaseNLL[i] - nll[i]); d > s.c.tol {
			t.Errorf("BaseNLL[%d] = %v, NLL %v", i, sc.BaseNLL[i], nll[i])
		}
	}
	all, err := s.score("Score KLAllPositions", w, backends.Request{Base: memBase{rows, 0}, KLAllPositions: true})
	if err != nil {
		t.Errorf("Score KLAllPositions: %v", err)
		return
	}
	if len(all.KL) != len(w.Tokens) {
		t.Errorf("KLAllPositions: %d KL values, want %d", len(all.KL), len(w.Tokens))
		return
	}
	for i, v := range all.KL {
		if math.Abs(v) > s.c.tol || math.IsNaN(v) {
			t.Errorf("self KL (all positions) at %d = %g", i, v)
		}
	}
	// A shifted base (row p+1 against Q at p) is a different distribution:
	// KL must be clearly positive, proving KL is computed at all.
	shifted, err := s.score("Score shifted Base", w, backends.Request{Base: memBase{rows, w.First}})
	if err == nil && len(shifted.KL) > 1 {
		var sum float64
		for _, v := range shifted.KL[:len(shifted.KL)-1] {
			sum += v
		}
		if !(sum > 1e-3) {
			t.Errorf("KL against a different distribution sums to %g", sum)
		}
	}
}

func (s *suite) checkErrors(toks []int32) {
	t := s.t
	bad := []struct {
		name string
		w    backends.Window
	}{
		{"token id = vocab", backends.Window{Tokens: []int32{1, Vocab, 2}, First: 1}},
		{"token id > vocab", backends.Window{Tokens: []int32{1, 2, 1 << 30}, First: 1}},
		{"negative token id", backends.Window{Tokens: []int32{-1, 2}, First: 1}},
		{"empty window", backends.Window{Tokens: nil, First: 1}},
		{"First 0", backends.Window{Tokens: toks[:5], First: 0}},
		{"First > len", backends.Window{Tokens: toks[:5], First: 6}},
	}
	for _, c := range bad {
		if _, err := s.score(c.name, c.w, backends.Request{}); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	sc, err := s.score("First = len", backends.Window{Tokens: toks[:5], First: 5}, backends.Request{TopK: 2})
	if err != nil || len(sc.NLL) != 0 || len(sc.Top) != 0 {
		t.Errorf("First = len: NLL %v Top %v err %v, want empty and no error", sc.NLL, sc.Top, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.call("Score cancelled", func() error {
		_, err := s.b.Score(ctx, backends.Window{Tokens: toks, First: 1}, backends.Request{})
		return err
	})
	if err == nil {
		t.Errorf("Score with a cancelled context: no error")
	}
	// Still usable after errors.
	if _, err := s.score("Score after errors", backends.Window{Tokens: toks[:7], First: 1}, backends.Request{}); err != nil {
		t.Errorf("Score after errors: %v", err)
	}
}

func (s *suite) checkProbe(toks []int32) {
	pr, ok := s.b.(backends.Prober)
	if !ok {
		return
	}
	pt := backends.Point{Layer: -1, Site: arch.SiteEmbed}
	var got map[backends.Point][]float64
	err := s.call("Probe", func() error {
		var err error
		got, err = pr.Probe(context.Background(), backends.Window{Tokens: toks, First: 1}, []backends.Point{pt})
		return err
	})
	if err != nil {
		s.t.Errorf("Probe embed: %v", err)
		return
	}
	e := got[pt]
	if len(e) != len(toks)*hidden {
		s.t.Errorf("Probe embed: %d values, want %d", len(e), len(toks)*hidden)
		return
	}
	for p, id := range toks {
		for c := 0; c < hidden; c++ {
			if d := math.Abs(e[p*hidden+c] - s.emb[int(id)*hidden+c]); d > s.c.tol*(1+math.Abs(s.emb[int(id)*hidden+c])) {
				s.t.Errorf("Probe embed pos %d col %d: %v, want %v", p, c, e[p*hidden+c], s.emb[int(id)*hidden+c])
				return
			}
		}
	}
	if _, err := pr.Probe(context.Background(), backends.Window{Tokens: toks, First: 1}, []backends.Point{{Layer: 99, Site: arch.SiteAttnOut}}); err == nil {
		s.t.Errorf("Probe of layer 99: no error")
	}
}

func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

func argmax(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// hidden is the width of the models WriteModel writes.
const hidden = fixtures.SuiteHidden

// WriteModel writes the suite's deterministic random model of the named
// architecture (any of arch.Names) into dir and returns its embedding matrix
// [Vocab][hidden] as stored; it is fixtures.WriteSuiteModel, which documents
// the config, dtypes and weight distributions.
func WriteModel(dir, archName string, seed uint64) ([]float64, error) {
	return fixtures.WriteSuiteModel(dir, archName, seed)
}
