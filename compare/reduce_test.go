package compare

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.17g, want %.17g", name, got, want)
	}
}

// Hand-computed: NLLs {1,2,3} and {4}: mean 2.5, E[x²]=7.5, var 1.25,
// SE = sqrt(1.25/3).
func TestReducePPLHand(t *testing.T) {
	ws := []WindowResult{
		{Index: 1, First: 1, Len: 2, NLL: []float64{4}},
		{Index: 0, First: 1, Len: 4, NLL: []float64{1, 2, 3}},
	}
	r, err := Reduce(ws, ReduceOptions{Bootstrap: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Windows != 2 || r.TokensScored != 4 {
		t.Fatalf("windows %d tokens %d", r.Windows, r.TokensScored)
	}
	near(t, "nll_mean", r.NLLMean, 2.5, 1e-15)
	near(t, "ppl", r.PPL, math.Exp(2.5), 1e-15)
	near(t, "nll_mean_se", r.NLLMeanSE, math.Sqrt(1.25/3), 1e-15)
	near(t, "ppl_se", r.PPLSE, math.Exp(2.5)*math.Sqrt(1.25/3), 1e-15)
	if r.PPLBootstrap != nil || r.KLD != nil {
		t.Error("unexpected bootstrap or KLD")
	}
}

func TestReduceErrors(t *testing.T) {
	cases := map[string][]WindowResult{
		"appears twice": {{Index: 0, First: 1, Len: 2, NLL: []float64{1}}, {Index: 0, First: 1, Len: 2, NLL: []float64{1}}},
		"window 3 position 2: NLL NaN is not finite": {{Index: 3, First: 1, Len: 3, NLL: []float64{1, math.NaN()}}},
		"2 NLL values for 1 targets":                 {{Index: 0, First: 1, Len: 2, NLL: []float64{1, 2}}},
		"no windows":                                 nil,
		"window 2 KL position 1: KL +Inf is not finite": {{Index: 2, First: 1, Len: 3, NLL: []float64{1, 2}, Top1: []int32{0, 0},
			KL: []float64{0, math.Inf(1)}, BaseNLL: []float64{1, 1}, BaseTop1: []int32{0, 0}}},
		"window 4 position 2: base NLL NaN is not finite": {{Index: 4, First: 1, Len: 3, NLL: []float64{1, 2}, Top1: []int32{0, 0},
			KL: []float64{0, 0}, BaseNLL: []float64{1, math.NaN()}, BaseTop1: []int32{0, 0}}},
	}
	for want, ws := range cases {
		_, err := Reduce(ws, ReduceOptions{})
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
}

func contains(s, sub string) bool {
	return strings.Contains(s, sub)
}

// Percentiles interpolate at fraction·(n-1) as llama.cpp.
func TestPercentileHand(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	p := percentiles(v)
	want := Percentiles{Max: 5, P999: 4.996, P99: 4.96, P95: 4.8, P90: 4.6, P75: 4, P50: 3, P25: 2, P10: 1.4, P5: 1.2, P1: 1.04, P01: 1.004, Min: 1}
	got := []float64{p.Max, p.P999, p.P99, p.P95, p.P90, p.P75, p.P50, p.P25, p.P10, p.P5, p.P1, p.P01, p.Min}
	exp := []float64{want.Max, want.P999, want.P99, want.P95, want.P90, want.P75, want.P50, want.P25, want.P10, want.P5, want.P1, want.P01, want.Min}
	for i := range got {
		near(t, "percentile", got[i], exp[i], 1e-12)
	}
	if percentile([]float64{7}, 0.5) != 7 {
		t.Error("single value")
	}
}

// KLD statistics on 12 paired tokens against an independent two-pass
// computation of llama.cpp's formulas.
func TestReduceKLDHand(t *testing.T) {
	q := []float64{0.5, 1.5, 2.0, 0.1, 3.0, 0.7, 1.1, 2.2, 0.9, 1.3, 0.2, 4.0}
	b := []float64{0.4, 1.7, 1.8, 0.1, 2.5, 0.9, 1.0, 2.0, 1.2, 1.3, 0.3, 3.1}
	kl := []float64{0.01, 0.02, 0.0, 0.05, 0.3, 0.004, 0.02, 0.07, 0.1, 0.0, 0.002, 0.6}
	top := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	btop := []int32{1, 2, 0, 4, 5, 0, 7, 8, 9, 10, 11, 0} // 9 of 12 agree
	ov := []int32{3, 2, 1, 3, 3, 0, 2, 3, 3, 3, 1, 2}
	ws := []WindowResult{
		{Index: 0, First: 1, Len: 8, NLL: q[:7], Top1: top[:7], KL: kl[:7], BaseNLL: b[:7], BaseTop1: btop[:7], TopKOverlap: ov[:7]},
		{Index: 1, First: 3, Len: 8, NLL: q[7:], Top1: top[7:], KL: kl[7:], BaseNLL: b[7:], BaseTop1: btop[7:], TopKOverlap: ov[7:]},
		{Index: 2, First: 1, Len: 3, NLL: []float64{9, 9}}, // no base: not paired
	}
	r, err := Reduce(ws, ReduceOptions{KLMode: "scored", TopK: 3, Bootstrap: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := r.KLD
	n := 12.0
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	se := func(v []float64) float64 { // sqrt(popvar/(n-1)), two-pass
		m := mean(v)
		var s float64
		for _, x := range v {
			s += (x - m) * (x - m)
		}
		return math.Sqrt(s / float64(len(v)) / float64(len(v)-1))
	}
	cov := func(a, c []float64) float64 {
		ma, mc := mean(a), mean(c)
		var s float64
		for i := range a {
			s += (a[i] - ma) * (c[i] - mc)
		}
		return s / n / (n - 1)
	}
	if s.Rows != 2 || s.Positions != 12 || s.PairedTokens != 12 || s.Mode != "scored" {
		t.Fatalf("rows %d positions %d paired %d", s.Rows, s.Positions, s.PairedTokens)
	}
	near(t, "kld mean", s.Mean, mean(kl), 1e-14)
	near(t, "kld se", s.MeanSE, se(kl), 1e-12)
	// sorted kl: 0 0 .002 .004 .01 .02 .02 .05 .07 .1 .3 .6 → median (.02+.02)/2
	near(t, "kld median", s.Median, 0.02, 1e-15)
	near(t, "kld p90", s.Percentiles.P90, 0.1+0.9*(0.3-0.1), 1e-12) // 0.9*11 = 9.9
	near(t, "kld max", s.Percentiles.Max, 0.6, 0)
	near(t, "ppl", s.PPL, math.Exp(mean(q)), 1e-14)
	near(t, "ppl se", s.PPLSE, math.Exp(mean(q))*se(q), 1e-12)
	near(t, "base ppl", s.BasePPL, math.Exp(mean(b)), 1e-14)
	c := cov(q, b)
	near(t, "correlation", s.NLLCorrelation, c/(se(q)*se(b)), 1e-10)
	near(t, "ln ratio", s.LnPPLRatio, mean(q)-mean(b), 1e-14)
	lrse := math.Sqrt(se(q)*se(q) + se(b)*se(b) - 2*c)
	near(t, "ln ratio se", s.LnPPLRatioSE, lrse, 1e-10)
	near(t, "ratio", s.PPLRatio, math.Exp(mean(q)-mean(b)), 1e-14)
	near(t, "ratio se", s.PPLRatioSE, math.Exp(mean(q)-mean(b))*lrse, 1e-10)
	pq, pb := math.Exp(mean(q)), math.Exp(mean(b))
	near(t, "diff", s.PPLDiff, pq-pb, 1e-13)
	near(t, "diff se", s.PPLDiffSE, math.Sqrt(pq*pq*se(q)*se(q)+pb*pb*se(b)*se(b)-2*pq*pb*c), 1e-10)
	dp := make([]float64, 12)
	dp2 := make([]float64, 12)
	for i := range dp {
		dp[i] = math.Exp(-q[i]) - math.Exp(-b[i])
		dp2[i] = dp[i] * dp[i]
	}
	near(t, "dp mean", s.DeltaP.Mean, mean(dp), 1e-14)
	near(t, "dp se", s.DeltaP.MeanSE, se(dp), 1e-10)
	near(t, "dp rms", s.DeltaP.RMS, math.Sqrt(mean(dp2)), 1e-14)
	near(t, "dp rms se", s.DeltaP.RMSSE, 0.5/math.Sqrt(mean(dp2))*se(dp2), 1e-10)
	near(t, "same top", s.SameTop, 0.75, 0)
	near(t, "same top se", s.SameTopSE, math.Sqrt(0.75*0.25/11), 1e-15)
	ovf := make([]float64, 12)
	for i := range ov {
		ovf[i] = float64(ov[i]) / 3
	}
	if len(s.TopK) != 1 || s.TopK[0].K != 3 {
		t.Fatalf("top-k %+v", s.TopK)
	}
	near(t, "top-3 rate", s.TopK[0].Rate, mean(ovf), 1e-14)
	near(t, "top-3 se", s.TopK[0].SE, se(ovf), 1e-10)
	// The unpaired window still counts for PPL.
	if r.TokensScored != 14 {
		t.Errorf("tokens %d", r.TokensScored)
	}
}

// Bit-identical whatever the input order or a serialisation round trip;
// the bootstrap depends only on its seed.
func TestReduceDeterministic(t *testing.T) {
	var ws []WindowResult
	for i := 0; i < 7; i++ {
		w := WindowResult{Index: i, First: 1, Len: 6}
		for j := 0; j < 5; j++ {
			w.NLL = append(w.NLL, math.Abs(math.Sin(float64(i*5+j)))*3)
		}
		ws = append(ws, w)
	}
	a, err := Reduce(ws, ReduceOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	rev := make([]WindowResult, len(ws))
	for i := range ws {
		b, err := ws[i].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := rev[len(ws)-1-i].UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Reduce(rev, ReduceOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a.PPL != b.PPL || a.NLLMeanSE != b.NLLMeanSE || *a.PPLBootstrap != *b.PPLBootstrap {
		t.Errorf("not bit-identical: %+v vs %+v", a, b)
	}
	if !(a.PPLBootstrap.Lo < a.PPL && a.PPL < a.PPLBootstrap.Hi) {
		t.Errorf("bootstrap %+v does not contain PPL %v", a.PPLBootstrap, a.PPL)
	}
	c, _ := Reduce(ws, ReduceOptions{Seed: 4})
	if *c.PPLBootstrap == *a.PPLBootstrap {
		t.Error("bootstrap ignores the seed")
	}
}

// HF guide weighting and lm-eval metrics.
func TestReduceMethodExtras(t *testing.T) {
	ws := []WindowResult{
		{Index: 0, First: 1, Len: 4, NLL: []float64{1, 2, 3}}, // weight 3
		{Index: 1, First: 2, Len: 5, NLL: []float64{2, 4, 6}}, // masked: weight 2
	}
	r, err := Reduce(ws, ReduceOptions{Method: MethodHFStrided, Bootstrap: -1})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "hf guide", r.HFGuidePPL, math.Exp((2*3+4*2)/5.0), 1e-15)
	near(t, "pooled", r.PPL, math.Exp(18/6.0), 1e-15)
	r, err = Reduce(ws, ReduceOptions{Method: MethodLMEval, Words: 4, Bytes: 30, Bootstrap: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := r.LMEval
	near(t, "word ppl", m.WordPerplexity, math.Exp(18.0/4), 1e-15)
	near(t, "byte ppl", m.BytePerplexity, math.Exp(18.0/30), 1e-15)
	near(t, "bpb", m.BitsPerByte, 18.0/30/math.Ln2, 1e-15)
	near(t, "ll", m.LogLikelihood, -18, 0)
}

// HFGuidePPL against the Hugging Face guide's loop simulated label by label
// (target_ids[:, :-trg_len] = -100, the model's shift drops label 0,
// nll_sum += mean_loss·(num_valid - 1)), for strides that mask 0, 1 and
// several labels per window; token j's NLL is a known function of j.
func TestHFGuidePPLLoop(t *testing.T) {
	nllOf := func(j int) float64 { return 1 + float64(j%7)/8 + float64(j%3)/32 }
	const n, ctx = 53, 8
	for _, stride := range []int{8, 7, 5, 1} {
		// The guide's loop.
		var nllSum, nTok float64
		prevEnd := 0
		for begin := 0; begin < n; begin += stride {
			end := min(begin+ctx, n)
			trg := end - prevEnd
			valid := make([]bool, end-begin) // labels of the window
			numValid := 0
			for k := range valid {
				valid[k] = k >= end-begin-trg
				if valid[k] {
					numValid++
				}
			}
			var s float64
			var c int
			for k := 1; k < end-begin; k++ { // shift: label 0 is never scored
				if valid[k] {
					s += nllOf(begin + k)
					c++
				}
			}
			nllSum += s / float64(c) * float64(numValid-1)
			nTok += float64(numValid - 1)
			prevEnd = end
			if end == n {
				break
			}
		}
		want := math.Exp(nllSum / nTok)

		ws, err := Windows(seq(n), WindowOptions{Method: MethodHFStrided, Ctx: ctx, Stride: stride})
		if err != nil {
			t.Fatal(err)
		}
		wrs := make([]WindowResult, len(ws))
		for i, w := range ws {
			wrs[i] = WindowResult{Index: w.Index, First: w.First, Len: len(w.Tokens)}
			for p := w.First; p < len(w.Tokens); p++ {
				wrs[i].NLL = append(wrs[i].NLL, nllOf(int(w.Tokens[p])))
			}
		}
		r, err := Reduce(wrs, ReduceOptions{Method: MethodHFStrided, Ctx: ctx, Stride: stride, Bootstrap: -1})
		if err != nil {
			t.Fatal(err)
		}
		near(t, fmt.Sprintf("stride %d: hf guide", stride), r.HFGuidePPL, want, 1e-14)
	}
}
