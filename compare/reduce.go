package compare

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// WindowResult is everything the statistics need from one scored window.
// It is the unit of resumable and sharded runs: the Runner produces one per
// window (Runner.OnWindow receives it as soon as the window is done, so a
// journal can append its MarshalBinary form), and Reduce turns any set of
// them, from one process or merged from many, into a Result. Because Reduce
// only reads these values and combines them in window order, a run that is
// interrupted and resumed, or split into shards and merged, gives a
// bit-identical Result.
type WindowResult struct {
	Index int // backends.Window.Index
	First int // backends.Window.First
	Len   int // len(backends.Window.Tokens)

	// NLL is −log q(target) per target position First … Len-1.
	NLL []float64
	// Top1 is Q's most probable token per target (lowest id on ties); nil
	// when not requested.
	Top1 []int32

	// The fields below are set only for windows scored against a base.

	// KL is KL(P_base ‖ Q) per KL position: one per target in mode
	// "scored" (logits position p-1 for target p), every logits position
	// 0 … Len-1 in mode "compare_q".
	KL []float64
	// BaseNLL is −log p_base(target) per target, from the base store.
	BaseNLL []float64
	// BaseTop1 is the base's most probable token per target (lowest id on
	// ties, as llama.cpp).
	BaseTop1 []int32
	// TopKOverlap is |top-K(Q) ∩ top-K(base)| per target, K =
	// ReduceOptions.TopK; nil when TopK < 2.
	TopKOverlap []int32
}

// Targets returns the number of target positions.
func (w *WindowResult) Targets() int { return w.Len - w.First }

// HasBase reports whether the window was scored against a base.
func (w *WindowResult) HasBase() bool { return w.KL != nil }

// validate checks the internal consistency of w.
func (w *WindowResult) validate() error {
	t := w.Len - w.First
	if w.Index < 0 || w.First < 1 || t < 0 {
		return fmt.Errorf("window %d: bad shape First=%d Len=%d", w.Index, w.First, w.Len)
	}
	if len(w.NLL) != t {
		return fmt.Errorf("window %d: %d NLL values for %d targets", w.Index, len(w.NLL), t)
	}
	if w.Top1 != nil && len(w.Top1) != t {
		return fmt.Errorf("window %d: %d top-1 ids for %d targets", w.Index, len(w.Top1), t)
	}
	if i, v, bad := firstNonFinite(w.NLL); bad {
		return fmt.Errorf("window %d position %d: NLL %v is not finite", w.Index, w.First+i, v)
	}
	if w.KL == nil {
		if w.BaseNLL != nil || w.BaseTop1 != nil || w.TopKOverlap != nil {
			return fmt.Errorf("window %d: base statistics without KL values", w.Index)
		}
		return nil
	}
	if len(w.KL) != t && len(w.KL) != w.Len {
		return fmt.Errorf("window %d: %d KL values for %d targets / %d positions", w.Index, len(w.KL), t, w.Len)
	}
	if i, v, bad := firstNonFinite(w.KL); bad {
		return fmt.Errorf("window %d KL position %d: KL %v is not finite", w.Index, i, v)
	}
	if len(w.BaseNLL) != t || len(w.BaseTop1) != t || w.Top1 == nil {
		return fmt.Errorf("window %d: base statistics need base NLL, base top-1 and top-1 for each of %d targets", w.Index, t)
	}
	if w.TopKOverlap != nil && len(w.TopKOverlap) != t {
		return fmt.Errorf("window %d: %d top-k overlaps for %d targets", w.Index, len(w.TopKOverlap), t)
	}
	if i, v, bad := firstNonFinite(w.BaseNLL); bad {
		return fmt.Errorf("window %d position %d: base NLL %v is not finite", w.Index, w.First+i, v)
	}
	return nil
}

// firstNonFinite returns the index and value of the first NaN or ±Inf in v.
func firstNonFinite(v []float64) (int, float64, bool) {
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return i, x, true
		}
	}
	return 0, 0, false
}

// ReduceOptions are the parameters of Reduce that are not in the windows.
type ReduceOptions struct {
	// Method selects method-specific extras (hf-strided: HFGuidePPL;
	// lm-eval: LMEval metrics from Words and Bytes).
	Method Method
	// Words and Bytes are lm-eval's denominators (Σ over the documents).
	Words, Bytes int64
	// Ctx and Stride are the hf-strided window options: every window after
	// the first has its first Ctx-Stride labels masked, which sets its
	// weight in HFGuidePPL. 0 = unknown: a window is taken as masked when
	// First > 1, which misses the one masked label of Stride = Ctx-1.
	Ctx, Stride int
	// KLMode is "scored" or "compare_q", copied into KLDStats.Mode.
	KLMode string
	// TopK is the K of WindowResult.TopKOverlap (0 or 1: none).
	TopK int
	// Bootstrap is the number of window resamples for the PPL interval
	// (0: DefaultBootstrap; < 0: none; the commands accept only
	// CheckBootstrap's counts); Seed seeds it; Level is its coverage (0:
	// 0.95).
	Bootstrap int
	Seed      uint64
	Level     float64
}

// Bootstrap resample counts. An interval from fewer than MinBootstrap
// resamples has percentiles that are a handful of draws (1 resample gives
// lo = hi); MaxBootstrap bounds the time and memory (8 bytes per resample,
// one draw per window per resample) far above any useful precision.
const (
	DefaultBootstrap = 1000
	MinBootstrap     = 100
	MaxBootstrap     = 100_000
)

// CheckBootstrap validates a resample count given by a user, where 0 (or,
// as before, a negative count) means no interval: n must be ≤ 0 or in
// [MinBootstrap, MaxBootstrap].
func CheckBootstrap(n int) error {
	if n <= 0 || (n >= MinBootstrap && n <= MaxBootstrap) {
		return nil
	}
	return fmt.Errorf("--bootstrap %d: want 0 (no interval) or %d to %d resamples", n, MinBootstrap, MaxBootstrap)
}

// Reduce computes the statistics of a set of windows. The windows are
// processed in ascending Index order whatever their order in ws (duplicate
// indices are an error). Every sum is formed per window, in position order,
// and the window sums are then added in window order, so the result depends
// only on the set of WindowResults.
//
// Reduce fills Windows, TokensScored, PPL, PPLSE, PPLBootstrap, NLLMean,
// NLLMeanSE, HFGuidePPL, LMEval and KLD (when any window has a base); the
// descriptive fields are the caller's.
func Reduce(ws []WindowResult, o ReduceOptions) (Result, error) {
	var r Result
	if len(ws) == 0 {
		return r, fmt.Errorf("no windows to reduce")
	}
	order := make([]*WindowResult, len(ws))
	for i := range ws {
		order[i] = &ws[i]
	}
	slices.SortStableFunc(order, func(a, b *WindowResult) int { return cmp.Compare(a.Index, b.Index) })
	for i, w := range order {
		if i > 0 && w.Index == order[i-1].Index {
			return r, fmt.Errorf("window %d appears twice", w.Index)
		}
		if err := w.validate(); err != nil {
			return r, err
		}
	}

	// Pooled NLL: per-window sums, then windows in order.
	winSum := make([]float64, len(order))
	winN := make([]int64, len(order))
	var sum, sum2 float64
	var count int64
	for i, w := range order {
		var s, s2 float64
		for _, v := range w.NLL {
			s += v
			s2 += v * v
		}
		winSum[i], winN[i] = s, int64(len(w.NLL))
		sum += s
		sum2 += s2
		count += int64(len(w.NLL))
	}
	if count == 0 {
		return r, fmt.Errorf("no scored tokens in %d windows", len(order))
	}
	r.Windows = len(order)
	r.TokensScored = count
	r.NLLMean, r.NLLMeanSE = pplMeanSE(sum, sum2, count)
	r.PPL = math.Exp(r.NLLMean)
	r.PPLSE = r.PPL * r.NLLMeanSE
	r.PPLBootstrap = bootstrapPPL(winSum, winN, o)

	switch o.Method {
	case MethodHFStrided:
		// nll_sum += loss * (num_valid - batch_size): the loss is the window
		// mean over its targets; num_valid counts the labels that are not
		// -100. Without masked labels (the first window; every window when
		// Stride == Ctx) the shift drops label 0, so num_valid - 1 equals the
		// targets; with m >= 1 masked labels (m = Ctx-Stride) the dropped
		// label 0 is a masked one, so num_valid - 1 is targets-1.
		var num, den float64
		for i, w := range order {
			if winN[i] == 0 {
				continue
			}
			masked := w.First > 1
			if o.Ctx > 0 && o.Stride > 0 {
				masked = w.Index > 0 && o.Ctx > o.Stride
			}
			weight := float64(winN[i])
			if masked {
				weight--
			}
			num += winSum[i] / float64(winN[i]) * weight
			den += weight
		}
		if den > 0 {
			r.HFGuidePPL = math.Exp(num / den)
		}
	case MethodLMEval:
		if o.Words <= 0 || o.Bytes <= 0 {
			return r, fmt.Errorf("lm-eval metrics need positive word and byte counts (got %d words, %d bytes)", o.Words, o.Bytes)
		}
		ll := -sum
		r.LMEval = &LMEvalMetrics{
			WordPerplexity: math.Exp(-ll / float64(o.Words)),
			BytePerplexity: math.Exp(-ll / float64(o.Bytes)),
			BitsPerByte:    -ll / float64(o.Bytes) / math.Ln2,
			Words:          o.Words,
			Bytes:          o.Bytes,
			LogLikelihood:  ll,
		}
	}

	kld, err := reduceKLD(order, o)
	if err != nil {
		return r, err
	}
	r.KLD = kld
	return r, nil
}

// pplMeanSE is llama-perplexity's final estimate: mean NLL and its standard
// error sqrt((E[x²]-E[x]²)/(n-1)), 0 when that variance is not positive.
func pplMeanSE(sum, sum2 float64, n int64) (mean, se float64) {
	mean = sum / float64(n)
	v := sum2/float64(n) - mean*mean
	if v > 0 && n > 1 {
		se = math.Sqrt(v / float64(n-1))
	}
	return mean, se
}

// meanSE is llama.cpp's mean_and_uncertainty of its KL-divergence mode:
// the standard error is 0 unless count > 10 and the variance is positive.
func meanSE(sum, sum2 float64, n int64) (mean, se float64) {
	if n < 1 {
		return 0, 0
	}
	mean = sum / float64(n)
	v := sum2/float64(n) - mean*mean
	if v > 0 && n > 10 {
		se = math.Sqrt(v / float64(n-1))
	}
	return mean, se
}

// covariance is llama.cpp's covariance of the means (0 when n < 10).
func covariance(sa, sb, sab float64, n int64) float64 {
	if n < 10 {
		return 0
	}
	c := sab/float64(n) - (sa/float64(n))*(sb/float64(n))
	return c / float64(n-1)
}

// percentile returns the fraction-quantile of sorted values, linearly
// interpolated at index fraction·(n-1) as llama.cpp does.
func percentile(sorted []float64, fraction float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if fraction <= 0 {
		return sorted[0]
	}
	if fraction >= 1 {
		return sorted[n-1]
	}
	p := fraction * float64(n-1)
	ip := int(p)
	p -= float64(ip)
	return (1-p)*sorted[ip] + p*sorted[min(ip+1, n-1)]
}

// percentiles sorts v in place and returns its summary.
func percentiles(v []float64) Percentiles {
	slices.Sort(v)
	return Percentiles{
		Max:  v[len(v)-1],
		P999: percentile(v, 0.999),
		P99:  percentile(v, 0.99),
		P95:  percentile(v, 0.95),
		P90:  percentile(v, 0.90),
		P75:  percentile(v, 0.75),
		P50:  percentile(v, 0.50),
		P25:  percentile(v, 0.25),
		P10:  percentile(v, 0.10),
		P5:   percentile(v, 0.05),
		P1:   percentile(v, 0.01),
		P01:  percentile(v, 0.001),
		Min:  v[0],
	}
}

// bootstrapPPL resamples whole windows with replacement: each resample
// draws len(windows) window indices from a PCG seeded with (Seed,
// len(windows)), and its PPL is exp(Σ drawn sums / Σ drawn counts). The
// interval is the (1-level)/2 and (1+level)/2 percentiles of the resampled
// PPLs.
func bootstrapPPL(sums []float64, counts []int64, o ReduceOptions) *Interval {
	b := o.Bootstrap
	if b == 0 {
		b = DefaultBootstrap
	}
	level := o.Level
	if level == 0 {
		level = 0.95
	}
	if b < 0 || len(sums) < 2 {
		return nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, uint64(len(sums))))
	ppl := make([]float64, b)
	for i := range ppl {
		var s float64
		var n int64
		for range sums {
			j := rng.IntN(len(sums))
			s += sums[j]
			n += counts[j]
		}
		if n == 0 {
			ppl[i] = math.NaN()
			continue
		}
		ppl[i] = math.Exp(s / float64(n))
	}
	slices.Sort(ppl)
	return &Interval{
		Lo:      percentile(ppl, (1-level)/2),
		Hi:      percentile(ppl, (1+level)/2),
		Level:   level,
		Samples: b,
		Seed:    o.Seed,
	}
}

// reduceKLD computes the base-model statistics over the windows with a base.
func reduceKLD(order []*WindowResult, o ReduceOptions) (*KLDStats, error) {
	var kl, dp []float64
	var rows int
	var sKL, sKL2 float64
	var sQ, sQ2, sB, sB2, sQB float64
	var sDP, sDP2, sDP4 float64
	var sOv, sOv2 float64
	var same, paired int64
	for _, w := range order {
		if !w.HasBase() {
			continue
		}
		rows++
		var a, a2 float64
		for _, v := range w.KL {
			a += v
			a2 += v * v
		}
		sKL += a
		sKL2 += a2
		kl = append(kl, w.KL...)

		var q, q2, b, b2, qb, d, d2, d4, ov, ov2 float64
		for i, nq := range w.NLL {
			nb := w.BaseNLL[i]
			q += nq
			q2 += nq * nq
			b += nb
			b2 += nb * nb
			qb += nq * nb
			diff := math.Exp(-nq) - math.Exp(-nb)
			d += diff
			dd := diff * diff
			d2 += dd
			d4 += dd * dd
			dp = append(dp, diff)
			if w.Top1[i] == w.BaseTop1[i] {
				same++
			}
			if w.TopKOverlap != nil && o.TopK > 1 {
				f := float64(w.TopKOverlap[i]) / float64(o.TopK)
				ov += f
				ov2 += f * f
			}
		}
		sQ += q
		sQ2 += q2
		sB += b
		sB2 += b2
		sQB += qb
		sDP += d
		sDP2 += d2
		sDP4 += d4
		sOv += ov
		sOv2 += ov2
		paired += int64(len(w.NLL))
	}
	if rows == 0 {
		return nil, nil
	}
	if len(kl) == 0 {
		return nil, fmt.Errorf("windows with a base hold no KL positions")
	}
	s := &KLDStats{Mode: o.KLMode, Rows: rows, Positions: int64(len(kl))}
	s.Mean, s.MeanSE = meanSE(sKL, sKL2, int64(len(kl)))
	s.Percentiles = percentiles(kl)
	s.Median = s.Percentiles.P50

	s.PairedTokens = paired
	if paired == 0 {
		return s, nil
	}
	lq, lqSE := meanSE(sQ, sQ2, paired)
	lb, lbSE := meanSE(sB, sB2, paired)
	cov := covariance(sQ, sB, sQB, paired)
	s.PPL = math.Exp(lq)
	s.PPLSE = s.PPL * lqSE
	s.BasePPL = math.Exp(lb)
	s.BasePPLSE = s.BasePPL * lbSE
	if lqSE > 0 && lbSE > 0 {
		s.NLLCorrelation = cov / (lqSE * lbSE)
	}
	s.LnPPLRatio = lq - lb
	s.LnPPLRatioSE = sqrtPos(lqSE*lqSE + lbSE*lbSE - 2*cov)
	s.PPLRatio = math.Exp(s.LnPPLRatio)
	s.PPLRatioSE = s.PPLRatio * s.LnPPLRatioSE
	s.PPLDiff = s.PPL - s.BasePPL
	s.PPLDiffSE = sqrtPos(s.PPLSE*s.PPLSE + s.BasePPLSE*s.BasePPLSE - 2*s.PPL*s.BasePPL*cov)

	s.DeltaP.Mean, s.DeltaP.MeanSE = meanSE(sDP, sDP2, paired)
	ms, msSE := meanSE(sDP2, sDP4, paired)
	s.DeltaP.RMS = math.Sqrt(ms)
	if s.DeltaP.RMS > 0 {
		s.DeltaP.RMSSE = 0.5 / s.DeltaP.RMS * msSE
	}
	s.DeltaP.Percentiles = percentiles(dp)

	s.SameTop = float64(same) / float64(paired)
	if paired > 1 {
		s.SameTopSE = math.Sqrt(s.SameTop * (1 - s.SameTop) / float64(paired-1))
	}
	if o.TopK > 1 {
		rate, se := meanSE(sOv, sOv2, paired)
		s.TopK = []TopKAgreement{{K: o.TopK, Rate: rate, SE: se}}
	}
	return s, nil
}

// sqrtPos is sqrt(x) for x > 0 and 0 otherwise (rounding can make a
// variance of identical inputs slightly negative).
func sqrtPos(x float64) float64 {
	if x > 0 {
		return math.Sqrt(x)
	}
	return 0
}
