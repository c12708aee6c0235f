package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
)

// Tolerances bound the differences Run accepts.
type Tolerances struct {
	MaxNLL    float64 `json:"max_nll"`    // max |ΔNLL| over all scored tokens
	MeanNLL   float64 `json:"mean_nll"`   // mean |ΔNLL|
	MeanKL    float64 `json:"mean_kl"`    // mean KL(first ‖ second)
	MinTop1   float64 `json:"min_top1"`   // minimum fraction of tokens with the same top-1
	PPLRel    float64 `json:"ppl_rel"`    // |PPL_second / PPL_first − 1|
	HiddenRel float64 `json:"hidden_rel"` // relative L2 error of any probed hidden state
	// RouterMargin is the routing-flip rule's bound (mixture-of-experts
	// models): a token whose top-k expert choice differs between the
	// backends in some layer is set apart, not counted in the NLL, KL,
	// top-1 and PPL figures, when the first backend's router margin there
	// (its k-th minus its (k+1)-th largest router logit) is at most
	// RouterMargin × max(1, the token's largest |router logit|): the
	// second backend's precision moves router logits by that much
	// (relative to their size: rounding errors scale with the values), so
	// the choice is a near tie either way. A flip with a larger margin is
	// a failure.
	RouterMargin float64 `json:"router_margin"`
}

// DefaultTolerances returns the tolerances for a second backend computing
// with the given precision ("fp64", "fp32", "bf16", "fp16"). actQuant says
// that the checkpoint quantizes Linear inputs at run time (W4A4, W8A8,
// FP8): its coarse activation grids turn the rounding noise of a reduced
// precision into whole code steps, so bf16/fp16 tolerances widen there,
// and the kernels of such checkpoints are verified in fp32. The values sit
// several times above what each precision produces on the fixtures
// (docs/cuda.md lists the measurements) and far below a wrong kernel's
// errors (order 1 in fp32).
func DefaultTolerances(precision string, actQuant bool) Tolerances {
	switch precision {
	case "fp64":
		return Tolerances{MaxNLL: 1e-9, MeanNLL: 1e-10, MeanKL: 1e-12, MinTop1: 1, PPLRel: 1e-10, HiddenRel: 1e-10, RouterMargin: 1e-9}
	case "fp32":
		if actQuant {
			return Tolerances{MaxNLL: 0.1, MeanNLL: 5e-3, MeanKL: 1e-3, MinTop1: 0.97, PPLRel: 5e-3, HiddenRel: 1e-2, RouterMargin: 0.05}
		}
		return Tolerances{MaxNLL: 2e-2, MeanNLL: 1e-3, MeanKL: 1e-4, MinTop1: 0.98, PPLRel: 2e-3, HiddenRel: 1e-3, RouterMargin: 1e-4}
	case "fp16":
		if actQuant {
			return Tolerances{MaxNLL: 3, MeanNLL: 0.06, MeanKL: 0.1, MinTop1: 0.9, PPLRel: 0.05, HiddenRel: 0.3, RouterMargin: 0.3}
		}
		return Tolerances{MaxNLL: 0.1, MeanNLL: 0.02, MeanKL: 2e-3, MinTop1: 0.95, PPLRel: 0.02, HiddenRel: 2e-2, RouterMargin: 0.01}
	default: // bf16
		if actQuant {
			return Tolerances{MaxNLL: 4, MeanNLL: 0.2, MeanKL: 0.3, MinTop1: 0.75, PPLRel: 0.1, HiddenRel: 0.5, RouterMargin: 0.5}
		}
		return Tolerances{MaxNLL: 0.5, MeanNLL: 0.08, MeanKL: 2e-2, MinTop1: 0.9, PPLRel: 0.05, HiddenRel: 0.1, RouterMargin: 0.05}
	}
}

// Options configures Run.
type Options struct {
	Tolerances Tolerances
	// ProbeWindows is the number of windows (from the first) whose hidden
	// states are compared when both backends implement backends.Prober;
	// 0 = 1, negative = none.
	ProbeWindows int
	// Layers is the model's number of decoder layers (probe points are
	// embed, every layer's sites, final_norm); 0 compares embed and
	// final_norm only.
	Layers int
	// Router enables the routing-flip rule (Tolerances.RouterMargin) for a
	// mixture-of-experts model: its sparse layers and top-k. Both backends
	// must then be backends.Prober with arch.SiteRouter.
	Router   *Router
	Progress io.Writer // one line per window when non-nil
}

// Router describes a model's expert routing for the routing-flip rule.
type Router struct {
	Layers []int // the mixture-of-experts layers
	TopK   int   // experts per token
}

// RoutingFlip is one (position, layer) where the backends chose different
// experts.
type RoutingFlip struct {
	Window   int     `json:"window"`
	Position int     `json:"position"` // the token whose hidden state was routed (its logits predict Position+1)
	Layer    int     `json:"layer"`
	First    []int   `json:"first"`  // experts the first backend chose (descending logit)
	Second   []int   `json:"second"` // experts the second backend chose
	Margin   float64 `json:"margin"` // first backend's k-th minus (k+1)-th router logit
	Bound    float64 `json:"bound"`  // RouterMargin × max(1, first backend's largest |router logit| at the position)
	Excused  bool    `json:"excused"`
	DNLL     float64 `json:"dnll"` // NLL difference of the target Position+1 (0 when not scored)
}

// PointError is the relative error of one probed hidden state.
type PointError struct {
	Layer  int     `json:"layer"`
	Site   string  `json:"site"`
	RelErr float64 `json:"rel_err"` // ‖b − a‖₂ / ‖a‖₂ over the window's rows
	MaxAbs float64 `json:"max_abs"`
	Row    int     `json:"row"` // position of the largest absolute difference
	Col    int     `json:"col"`
}

// Report is the outcome of Run.
type Report struct {
	First          string       `json:"first"`  // backend name and precision
	Second         string       `json:"second"` // backend name and precision
	Windows        int          `json:"windows"`
	Tokens         int          `json:"tokens"`
	MaxAbsNLLDiff  float64      `json:"max_abs_dnll"`
	MaxWindow      int          `json:"max_window"`   // window index of the largest |ΔNLL|
	MaxPosition    int          `json:"max_position"` // its target position
	MeanAbsNLLDiff float64      `json:"mean_abs_dnll"`
	RMSNLLDiff     float64      `json:"rms_dnll"`
	MeanKL         float64      `json:"mean_kl"`
	MaxKL          float64      `json:"max_kl"`
	Top1Agreement  float64      `json:"top1_agreement"`
	PPL            [2]float64   `json:"ppl"` // of the first and the second backend
	Points         []PointError `json:"points,omitempty"`
	// RoutingFlips lists every routing disagreement (Options.Router);
	// SetApart counts the scored tokens left out of the figures above
	// because each of their flips is within Tolerances.RouterMargin.
	RoutingFlips []RoutingFlip `json:"routing_flips,omitempty"`
	SetApart     int           `json:"set_apart_tokens"`
	// RouterMaxAbsDiff is the largest |Δ router logit| between the
	// backends over every token and MoE layer (what RouterMargin must
	// cover: a flip needs a margin below the sum of two logits' errors).
	RouterMaxAbsDiff float64     `json:"router_max_abs_diff,omitempty"`
	FirstBad         *PointError `json:"first_bad,omitempty"` // first probe point (forward order) beyond HiddenRel
	Tolerances       Tolerances  `json:"tolerances"`
	Failures         []string    `json:"failures,omitempty"`
	Pass             bool        `json:"pass"`
}

// firstLogProbs is an in-memory BaseLogProbs: the first backend's
// log-probs of one window's target positions.
type firstLogProbs struct {
	vocab int
	data  [][]float64
}

func (r *firstLogProbs) Vocab() int { return r.vocab }
func (r *firstLogProbs) LogProbs(i int, dst []float64) error {
	if i < 0 || i >= len(r.data) {
		return fmt.Errorf("verify: KL position %d outside [0, %d)", i, len(r.data))
	}
	copy(dst, r.data[i])
	return nil
}

// Run scores windows with a (which must be a backends.LogProber, like the
// reference) and b, and compares them.
func Run(ctx context.Context, a, b backends.Backend, windows []backends.Window, opt Options) (*Report, error) {
	lpa, ok := a.(backends.LogProber)
	if !ok {
		return nil, fmt.Errorf("verify: the first backend (%s) cannot emit log-probs; put the reference first", a.Info().Name)
	}
	ia, ib := a.Info(), b.Info()
	if ia.Vocab != ib.Vocab {
		return nil, fmt.Errorf("verify: vocabularies differ: %s has %d, %s has %d", ia.Name, ia.Vocab, ib.Name, ib.Vocab)
	}
	if len(windows) == 0 {
		return nil, errors.New("verify: no windows")
	}
	rep := &Report{First: ia.Name + " " + ia.Precision, Second: ib.Name + " " + ib.Precision, Tolerances: opt.Tolerances, Windows: len(windows)}
	var sumAbs, sumSq, sumKL, sumA, sumB float64
	agree := 0
	for wi, w := range windows {
		base := &firstLogProbs{vocab: ia.Vocab}
		err := lpa.LogProbs(ctx, w, w.First-1, func(pos int, lp []float64) error {
			if pos < len(w.Tokens)-1 {
				base.data = append(base.data, append([]float64(nil), lp...))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("verify: %s: window %d: %w", ia.Name, w.Index, err)
		}
		sa, err := a.Score(ctx, w, backends.Request{TopK: 1})
		if err != nil {
			return nil, fmt.Errorf("verify: %s: window %d: %w", ia.Name, w.Index, err)
		}
		sb, err := b.Score(ctx, w, backends.Request{Base: base, TopK: 1})
		if err != nil {
			return nil, fmt.Errorf("verify: %s: window %d: %w", ib.Name, w.Index, err)
		}
		if len(sa.NLL) != len(sb.NLL) || len(sb.KL) != len(sb.NLL) {
			return nil, fmt.Errorf("verify: window %d: %d and %d scores (%d KL)", w.Index, len(sa.NLL), len(sb.NLL), len(sb.KL))
		}
		apart, err := routing(ctx, a, b, w, opt, rep, sa.NLL, sb.NLL)
		if err != nil {
			return nil, err
		}
		for i := range sa.NLL {
			if apart[i] {
				rep.SetApart++
				continue
			}
			d := sb.NLL[i] - sa.NLL[i]
			if ad := math.Abs(d); ad > rep.MaxAbsNLLDiff || math.IsNaN(d) {
				rep.MaxAbsNLLDiff, rep.MaxWindow, rep.MaxPosition = ad, w.Index, w.First+i
				if math.IsNaN(d) {
					rep.MaxAbsNLLDiff = math.Inf(1)
				}
			}
			sumAbs += math.Abs(d)
			sumSq += d * d
			sumKL += sb.KL[i]
			rep.MaxKL = math.Max(rep.MaxKL, sb.KL[i])
			sumA += sa.NLL[i]
			sumB += sb.NLL[i]
			if sa.Top[i] == sb.Top[i] {
				agree++
			}
			rep.Tokens++
		}
		if wi < max(opt.ProbeWindows, 1) && opt.ProbeWindows >= 0 {
			if err := probe(ctx, a, b, w, opt.Layers, rep); err != nil {
				return nil, err
			}
		}
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "verify: window %d/%d done (%d tokens)\n", wi+1, len(windows), rep.Tokens)
		}
	}
	n := float64(rep.Tokens)
	if n > 0 {
		rep.MeanAbsNLLDiff, rep.RMSNLLDiff, rep.MeanKL = sumAbs/n, math.Sqrt(sumSq/n), sumKL/n
		rep.Top1Agreement = float64(agree) / n
		rep.PPL = [2]float64{math.Exp(sumA / n), math.Exp(sumB / n)}
	}
	rep.check()
	return rep, nil
}

// routing applies the routing-flip rule to window w: it probes both
// backends' router logits at every mixture-of-experts layer, records each
// position whose top-k choice differs (ties to the lower expert index on
// both sides, see topOrder), and returns the target indices (of w's NLL) to set
// apart: those predicted from a flipped position all of whose flips are
// within Tolerances.RouterMargin. A flip beyond the margin is kept in the
// figures and fails the run (Report.check).
func routing(ctx context.Context, a, b backends.Backend, w backends.Window, opt Options, rep *Report, nllA, nllB []float64) ([]bool, error) {
	apart := make([]bool, len(nllA))
	r := opt.Router
	if r == nil || len(r.Layers) == 0 {
		return apart, nil
	}
	pa, ok1 := a.(backends.Prober)
	pb, ok2 := b.(backends.Prober)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("verify: the routing-flip rule needs router logits from both backends (%s, %s)", a.Info().Name, b.Info().Name)
	}
	var pts []backends.Point
	for _, l := range r.Layers {
		pts = append(pts, backends.Point{Layer: l, Site: arch.SiteRouter})
	}
	ha, err := pa.Probe(ctx, w, pts)
	if err != nil {
		return nil, fmt.Errorf("verify: %s router probe: %w", a.Info().Name, err)
	}
	hb, err := pb.Probe(ctx, w, pts)
	if err != nil {
		return nil, fmt.Errorf("verify: %s router probe: %w", b.Info().Name, err)
	}
	T := len(w.Tokens)
	bad := make([]bool, len(nllA)) // a flip beyond the margin predicts this target
	for _, p := range pts {
		x, y := ha[p], hb[p]
		if len(x) != len(y) || len(x) == 0 || len(x)%T != 0 {
			return nil, fmt.Errorf("verify: router logits of layer %d: %d and %d values", p.Layer, len(x), len(y))
		}
		E := len(x) / T
		if r.TopK < 1 || r.TopK >= E {
			return nil, fmt.Errorf("verify: top-%d routing over %d experts", r.TopK, E)
		}
		for pos := 0; pos < T; pos++ {
			la, lb := x[pos*E:(pos+1)*E], y[pos*E:(pos+1)*E]
			for e := range la {
				if d := math.Abs(lb[e] - la[e]); d > rep.RouterMaxAbsDiff || math.IsNaN(d) {
					rep.RouterMaxAbsDiff = d
				}
			}
			oa, ob := topOrder(la), topOrder(lb)
			if sameSet(oa[:r.TopK], ob[:r.TopK]) {
				continue
			}
			f := RoutingFlip{Window: w.Index, Position: pos, Layer: p.Layer,
				First: append([]int(nil), oa[:r.TopK]...), Second: append([]int(nil), ob[:r.TopK]...),
				Margin: la[oa[r.TopK-1]] - la[oa[r.TopK]]}
			scale := 1.0
			for _, v := range la {
				scale = math.Max(scale, math.Abs(v))
			}
			f.Bound = opt.Tolerances.RouterMargin * scale
			f.Excused = f.Margin <= f.Bound
			if i := pos + 1 - w.First; i >= 0 && i < len(nllA) {
				f.DNLL = nllB[i] - nllA[i]
				if f.Excused {
					apart[i] = true
				} else {
					bad[i] = true
				}
			}
			rep.RoutingFlips = append(rep.RoutingFlips, f)
		}
	}
	for i := range apart {
		apart[i] = apart[i] && !bad[i]
	}
	return apart, nil
}

// topOrder returns the expert indices by descending logit, ties to the
// lower index, the same rule for both backends' logits (the backends
// themselves break exact ties as torch.topk does, internal/torchtopk; a
// tie has margin 0 and is excused).
func topOrder(l []float64) []int {
	o := make([]int, len(l))
	for i := range o {
		o[i] = i
	}
	sort.SliceStable(o, func(i, j int) bool { return l[o[i]] > l[o[j]] })
	return o
}

func sameSet(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// probe compares every probe point of one window, in forward order.
func probe(ctx context.Context, a, b backends.Backend, w backends.Window, layers int, rep *Report) error {
	pa, ok1 := a.(backends.Prober)
	pb, ok2 := b.(backends.Prober)
	if !ok1 || !ok2 {
		return nil
	}
	pts := []backends.Point{{Layer: -1, Site: arch.SiteEmbed}}
	for l := 0; l < layers; l++ {
		for _, s := range arch.LayerSites() {
			pts = append(pts, backends.Point{Layer: l, Site: s})
		}
	}
	pts = append(pts, backends.Point{Layer: -1, Site: arch.SiteFinalNorm})
	ha, err := pa.Probe(ctx, w, pts)
	if err != nil {
		return fmt.Errorf("verify: %s probe: %w", a.Info().Name, err)
	}
	hb, err := pb.Probe(ctx, w, pts)
	if err != nil {
		return fmt.Errorf("verify: %s probe: %w", b.Info().Name, err)
	}
	T := len(w.Tokens)
	for _, p := range pts {
		x, y := ha[p], hb[p]
		if len(x) != len(y) || len(x) == 0 || len(x)%T != 0 {
			return fmt.Errorf("verify: probe %d/%s: %d and %d values", p.Layer, p.Site, len(x), len(y))
		}
		width := len(x) / T
		var num, den float64
		e := PointError{Layer: p.Layer, Site: p.Site}
		for i := range x {
			d := y[i] - x[i]
			num += d * d
			den += x[i] * x[i]
			if ad := math.Abs(d); ad > e.MaxAbs || math.IsNaN(d) {
				e.MaxAbs, e.Row, e.Col = ad, i/width, i%width
				if math.IsNaN(d) {
					e.MaxAbs = math.Inf(1)
				}
			}
		}
		e.RelErr = math.Sqrt(num / math.Max(den, 1e-300))
		if math.IsNaN(e.RelErr) {
			e.RelErr = math.Inf(1)
		}
		if i := indexOf(rep.Points, p); i >= 0 { // several probe windows: keep the worst
			if e.RelErr > rep.Points[i].RelErr {
				rep.Points[i] = e
			}
		} else {
			rep.Points = append(rep.Points, e)
		}
	}
	return nil
}

func indexOf(ps []PointError, p backends.Point) int {
	for i, e := range ps {
		if e.Layer == p.Layer && e.Site == p.Site {
			return i
		}
	}
	return -1
}

func (r *Report) check() {
	t := r.Tolerances
	fail := func(cond bool, f string, a ...any) {
		if cond {
			r.Failures = append(r.Failures, fmt.Sprintf(f, a...))
		}
	}
	fail(!(r.MaxAbsNLLDiff <= t.MaxNLL), "max |ΔNLL| %.3g > %.3g (window %d, position %d)", r.MaxAbsNLLDiff, t.MaxNLL, r.MaxWindow, r.MaxPosition)
	fail(!(r.MeanAbsNLLDiff <= t.MeanNLL), "mean |ΔNLL| %.3g > %.3g", r.MeanAbsNLLDiff, t.MeanNLL)
	fail(!(r.MeanKL <= t.MeanKL), "mean KL %.3g > %.3g", r.MeanKL, t.MeanKL)
	fail(!(r.Top1Agreement >= t.MinTop1), "top-1 agreement %.4f < %.4f", r.Top1Agreement, t.MinTop1)
	rel := math.Abs(r.PPL[1]/r.PPL[0] - 1)
	fail(!(rel <= t.PPLRel), "PPL %.6g vs %.6g: relative difference %.3g > %.3g", r.PPL[0], r.PPL[1], rel, t.PPLRel)
	for _, f := range r.RoutingFlips {
		if !f.Excused {
			fail(true, "routing flip at window %d position %d layer %d: experts %v vs %v with a router margin of %.3g > %.3g", f.Window, f.Position, f.Layer, f.First, f.Second, f.Margin, f.Bound)
			break
		}
	}
	for i := range r.Points {
		if !(r.Points[i].RelErr <= t.HiddenRel) {
			p := r.Points[i]
			r.FirstBad = &p
			fail(true, "hidden state layer %d site %s: relative error %.3g > %.3g (largest at position %d, column %d)", p.Layer, p.Site, p.RelErr, t.HiddenRel, p.Row, p.Col)
			break
		}
	}
	r.Pass = len(r.Failures) == 0
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "verify: %s vs %s on %d windows, %d scored tokens\n", r.First, r.Second, r.Windows, r.Tokens)
	row := func(name, val, tol string) { fmt.Fprintf(w, "  %-22s %-28s %s\n", name, val, tol) }
	t := r.Tolerances
	row("max |ΔNLL|", fmt.Sprintf("%.3g (window %d, pos %d)", r.MaxAbsNLLDiff, r.MaxWindow, r.MaxPosition), fmt.Sprintf("≤ %.3g", t.MaxNLL))
	row("mean |ΔNLL|", fmt.Sprintf("%.3g", r.MeanAbsNLLDiff), fmt.Sprintf("≤ %.3g", t.MeanNLL))
	row("RMS ΔNLL", fmt.Sprintf("%.3g", r.RMSNLLDiff), "")
	row("KL mean / max", fmt.Sprintf("%.3g / %.3g", r.MeanKL, r.MaxKL), fmt.Sprintf("mean ≤ %.3g", t.MeanKL))
	row("top-1 agreement", fmt.Sprintf("%.4f", r.Top1Agreement), fmt.Sprintf("≥ %.4f", t.MinTop1))
	row("PPL", fmt.Sprintf("%.6g / %.6g", r.PPL[0], r.PPL[1]), fmt.Sprintf("relative ≤ %.3g", t.PPLRel))
	if len(r.RoutingFlips) > 0 || r.RouterMaxAbsDiff > 0 {
		fmt.Fprintf(w, "  routing flips (top-k experts differ; set apart when the first backend's router margin ≤ %.3g × max(1, max |router logit|)): %d, %d scored tokens set apart; max |Δ router logit| %.3g\n", t.RouterMargin, len(r.RoutingFlips), r.SetApart, r.RouterMaxAbsDiff)
		for _, f := range r.RoutingFlips {
			what := "set apart"
			if !f.Excused {
				what = "beyond the margin"
			}
			fmt.Fprintf(w, "    window %d position %d layer %d: experts %v vs %v, margin %.3g, ΔNLL %.3g (%s)\n", f.Window, f.Position, f.Layer, f.First, f.Second, f.Margin, f.DNLL, what)
		}
	}
	if len(r.Points) > 0 {
		fmt.Fprintf(w, "  hidden states (relative L2 error, tolerance %.3g):\n", t.HiddenRel)
		for _, p := range r.Points {
			mark := ""
			if !(p.RelErr <= t.HiddenRel) {
				mark = "  <-- beyond tolerance"
			}
			fmt.Fprintf(w, "    layer %3d %-10s %.3g%s\n", p.Layer, p.Site, p.RelErr, mark)
		}
	}
	if r.Pass {
		fmt.Fprintln(w, "verify: PASS")
		return
	}
	fmt.Fprintln(w, "verify: FAIL")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  %s\n", f)
	}
}

// MarshalJSON writes the report with the field names of its tags. JSON has
// no NaN or infinity, and those are exactly the figures of a broken kernel
// (an infinite |ΔNLL|, a NaN KL): they are written as the strings "NaN",
// "+Inf" and "-Inf" instead of making the whole report unwritable.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report // no MarshalJSON: the default encoding
	return json.Marshal(finiteJSON(reflect.ValueOf(plain(*r))))
}

// finiteJSON converts v into a value encoding/json accepts: structs become
// maps keyed by their json tags (omitempty honoured), non-finite floats
// become strings.
func finiteJSON(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "+Inf"
		case math.IsInf(f, -1):
			return "-Inf"
		}
		return f
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return finiteJSON(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = finiteJSON(v.Index(i))
		}
		return out
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if opts == "omitempty" && v.Field(i).IsZero() {
				continue
			}
			out[name] = finiteJSON(v.Field(i))
		}
		return out
	}
	return v.Interface()
}
