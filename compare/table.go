package compare

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteSummary prints the short human summary of a result: PPL, mean NLL,
// windows and scored tokens (and tokens/s when timed).
func WriteSummary(w io.Writer, r *Result) error {
	name := r.Model
	if r.Label != "" {
		name = r.Label + " (" + r.Model + ")"
	}
	fmt.Fprintf(w, "model     %s  [%s %s]\n", name, r.Backend, r.Precision)
	fmt.Fprintf(w, "data      %s, %d tokens, method %s, ctx %d", r.Data.Source, r.Data.NumTokens, r.Method, r.Ctx)
	if Method(r.Method).UsesStride() {
		fmt.Fprintf(w, ", stride %d", r.Stride)
	}
	fmt.Fprintf(w, "\nscored    %d windows, %d tokens\n", r.Windows, r.TokensScored)
	fmt.Fprintf(w, "PPL       %.6f ± %.6f", r.PPL, r.PPLSE)
	if b := r.PPLBootstrap; b != nil {
		fmt.Fprintf(w, "   (window bootstrap %.0f%%: %.6f … %.6f)", 100*b.Level, b.Lo, b.Hi)
	}
	fmt.Fprintf(w, "\nmean NLL  %.6f ± %.6f\n", r.NLLMean, r.NLLMeanSE)
	if r.HFGuidePPL != 0 {
		fmt.Fprintf(w, "HF guide  %.6f (its loop's weighting)\n", r.HFGuidePPL)
	}
	if m := r.LMEval; m != nil {
		fmt.Fprintf(w, "lm-eval   word_perplexity %.6f  byte_perplexity %.6f  bits_per_byte %.6f\n", m.WordPerplexity, m.BytePerplexity, m.BitsPerByte)
	}
	if r.BPWLayer != 0 {
		fmt.Fprintf(w, "bpw       %.3f decoder, %.3f head, %.3f GB VRAM, %s\n", r.BPWLayer, r.BPWHead, r.VRAMGB, r.Format)
	}
	if t := r.Timing; t != nil {
		fmt.Fprintf(w, "speed     %.1f tokens/s forwarded (every window position, scored or not; %.1f s)\n", t.TokensPerSec, t.Seconds)
	}
	if r.KLD != nil {
		return WriteKLDTable(w, r.KLD)
	}
	return nil
}

// WriteKLDTable prints the base-model statistics as llama.cpp lays them
// out, plus the percentiles of both KLD and Δp side by side.
func WriteKLDTable(w io.Writer, s *KLDStats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nKL divergence vs base (%s mode, %d windows, %d positions, %s base log-probs)\n", s.Mode, s.Rows, s.Positions, s.BaseFormat)
	fmt.Fprintf(tw, "Mean PPL(Q)\t%.6f ± %.6f\n", s.PPL, s.PPLSE)
	fmt.Fprintf(tw, "Mean PPL(base)\t%.6f ± %.6f\n", s.BasePPL, s.BasePPLSE)
	fmt.Fprintf(tw, "Cor(ln PPL(Q), ln PPL(base))\t%.2f%%\n", 100*s.NLLCorrelation)
	fmt.Fprintf(tw, "Mean ln(PPL(Q)/PPL(base))\t%.6f ± %.6f\n", s.LnPPLRatio, s.LnPPLRatioSE)
	fmt.Fprintf(tw, "Mean PPL(Q)/PPL(base)\t%.6f ± %.6f\n", s.PPLRatio, s.PPLRatioSE)
	fmt.Fprintf(tw, "Mean PPL(Q)-PPL(base)\t%.6f ± %.6f\n", s.PPLDiff, s.PPLDiffSE)
	fmt.Fprintf(tw, "Mean KLD\t%.6f ± %.6f\n", s.Mean, s.MeanSE)
	fmt.Fprintf(tw, "Mean Δp\t%.3f%% ± %.3f%%\n", 100*s.DeltaP.Mean, 100*s.DeltaP.MeanSE)
	fmt.Fprintf(tw, "RMS Δp\t%.3f%% ± %.3f%%\n", 100*s.DeltaP.RMS, 100*s.DeltaP.RMSSE)
	fmt.Fprintf(tw, "Same top p\t%.3f%% ± %.3f%%\n", 100*s.SameTop, 100*s.SameTopSE)
	for _, k := range s.TopK {
		fmt.Fprintf(tw, "Top-%d overlap\t%.3f%% ± %.3f%%\n", k.K, 100*k.Rate, 100*k.SE)
	}
	fmt.Fprintf(tw, "\n\tKLD\tΔp\n")
	k, d := s.Percentiles, s.DeltaP.Percentiles
	rows := []struct {
		name string
		a, b float64
	}{
		{"Maximum", k.Max, d.Max}, {"99.9%", k.P999, d.P999}, {"99.0%", k.P99, d.P99}, {"95.0%", k.P95, d.P95},
		{"90.0%", k.P90, d.P90}, {"75.0%", k.P75, d.P75}, {"Median", k.P50, d.P50}, {"25.0%", k.P25, d.P25},
		{"10.0%", k.P10, d.P10}, {"5.0%", k.P5, d.P5}, {"1.0%", k.P1, d.P1}, {"0.1%", k.P01, d.P01}, {"Minimum", k.Min, d.Min},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.6f\t%.3f%%\n", r.name, r.a, 100*r.b)
	}
	return tw.Flush()
}
