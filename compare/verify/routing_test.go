package verify

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/reference"
)

// nearTie is the first backend with a forced near tie: at (pos, layer) its
// k-th and (k+1)-th router logits are set margin apart.
type nearTie struct {
	backends.Backend
	pos, layer, k int
	margin        float64
}

func (n nearTie) LogProbs(ctx context.Context, w backends.Window, from int, emit func(int, []float64) error) error {
	return n.Backend.(backends.LogProber).LogProbs(ctx, w, from, emit)
}

func (n nearTie) Probe(ctx context.Context, w backends.Window, at []backends.Point) (map[backends.Point][]float64, error) {
	m, err := n.Backend.(backends.Prober).Probe(ctx, w, at)
	if l, ok := m[backends.Point{Layer: n.layer, Site: arch.SiteRouter}]; ok && err == nil {
		E := len(l) / len(w.Tokens)
		row := l[n.pos*E : (n.pos+1)*E]
		o := topOrder(row)
		row[o[n.k]] = row[o[n.k-1]] - n.margin
	}
	return m, err
}

// flip is the second backend choosing, at (pos, layer), the (k+1)-th
// expert instead of the k-th (their router logits swapped), with the NLL
// of the target predicted from pos moved by dnll.
type flip struct {
	backends.Backend
	pos, layer, k int
	dnll          float64
}

func (f flip) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	s, err := f.Backend.Score(ctx, w, req)
	if i := f.pos + 1 - w.First; err == nil && w.Index == 0 && i >= 0 && i < len(s.NLL) {
		s.NLL[i] += f.dnll
	}
	return s, err
}

func (f flip) Probe(ctx context.Context, w backends.Window, at []backends.Point) (map[backends.Point][]float64, error) {
	m, err := f.Backend.(backends.Prober).Probe(ctx, w, at)
	if l, ok := m[backends.Point{Layer: f.layer, Site: arch.SiteRouter}]; ok && err == nil && w.Index == 0 {
		E := len(l) / len(w.Tokens)
		row := l[f.pos*E : (f.pos+1)*E]
		o := topOrder(row)
		row[o[f.k-1]], row[o[f.k]] = row[o[f.k]], row[o[f.k-1]]
	}
	return m, err
}

// TestRoutingFlipRule: a forced near tie (reference margin 1e-4) whose
// expert choice flips in the second backend and moves one token's NLL by
// 1.5. Without the rule the run fails on that token; with it the token is
// set apart (reported with its layer, experts, margin and ΔNLL) and the
// run passes when the margin is within RouterMargin, and fails naming the
// flip when it is not. The flip is detected in every window's own router
// logits (window 1 has none).
func TestRoutingFlipRule(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "qwen3_moe", 2); err != nil {
		t.Fatal(err)
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	spec, err := arch.For(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	router := &Router{TopK: spec.MoE.TopK}
	for i := 0; i < spec.Layers; i++ {
		if spec.Sparse(i) {
			router.Layers = append(router.Layers, i)
		}
	}
	ref, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var ws []backends.Window
	for i := 0; i < 2; i++ {
		toks := make([]int32, 40)
		for j := range toks {
			toks[j] = int32((j*31 + i*7 + 5) % backendtest.Vocab)
		}
		ws = append(ws, backends.Window{Index: i, Tokens: toks, First: 1})
	}
	const pos = 20
	layer, k := router.Layers[len(router.Layers)-1], router.TopK
	a := nearTie{ref, pos, layer, k, 1e-4}
	b := flip{ref, pos, layer, k, 1.5}
	run := func(margin float64, r *Router) *Report {
		tol := DefaultTolerances("fp64", false)
		tol.RouterMargin = margin
		rep, err := Run(context.Background(), a, b, ws, Options{Tolerances: tol, ProbeWindows: -1, Router: r})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := run(1e-3, nil); rep.Pass || rep.MaxPosition != pos+1 {
		t.Errorf("without the rule: pass %v, max |ΔNLL| at %d, failures %v", rep.Pass, rep.MaxPosition, rep.Failures)
	}
	rep := run(1e-3, router)
	if !rep.Pass || rep.SetApart != 1 || len(rep.RoutingFlips) != 1 || rep.Tokens != 2*39-1 {
		t.Fatalf("margin within the bound: pass %v, set apart %d, flips %+v, tokens %d, failures %v", rep.Pass, rep.SetApart, rep.RoutingFlips, rep.Tokens, rep.Failures)
	}
	f := rep.RoutingFlips[0]
	if f.Window != 0 || f.Position != pos || f.Layer != layer || !f.Excused || f.DNLL != 1.5 || !(f.Margin > 0.9e-4 && f.Margin < 1.1e-4) {
		t.Errorf("flip %+v", f)
	}
	// the bound is relative to the position's largest |router logit|
	pr, err := a.Probe(context.Background(), ws[0], []backends.Point{{Layer: layer, Site: arch.SiteRouter}})
	if err != nil {
		t.Fatal(err)
	}
	l := pr[backends.Point{Layer: layer, Site: arch.SiteRouter}]
	E := len(l) / len(ws[0].Tokens)
	scale := 1.0
	for _, v := range l[pos*E : (pos+1)*E] {
		scale = math.Max(scale, math.Abs(v))
	}
	if f.Bound != 1e-3*scale {
		t.Errorf("bound %g, want 1e-3 × %g", f.Bound, scale)
	}
	if scale > 10 {
		t.Fatalf("router logits up to %g: the 1e-5 case below needs them under 10", scale)
	}
	rep = run(1e-5, router)
	if rep.Pass || rep.SetApart != 0 || !strings.Contains(strings.Join(rep.Failures, "\n"), "routing flip at window 0 position 20") {
		t.Errorf("margin beyond the bound: pass %v, set apart %d, failures %v", rep.Pass, rep.SetApart, rep.Failures)
	}
}
