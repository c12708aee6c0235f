package plots

import (
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/compare"
)

// ResultLabel is a result's name on a chart: its label, else (no label,
// or the label a result set loader defaulted to the model path: an eval
// JSON written without --label) the last element of its model path, never
// a full path.
func ResultLabel(r compare.Result) string {
	if (r.Label != "" && r.Label != r.Model) || r.Model == "" {
		return r.Label
	}
	return filepath.Base(filepath.Clean(r.Model))
}

// formatAct returns the activation part of a result's format: what follows
// "+a-" (e.g. "fp8-token" in "fp8-channel+a-fp8-token"), "" for weight-only
// formats.
func formatAct(format string) string {
	if _, act, ok := strings.Cut(format, "+a-"); ok {
		return act
	}
	return ""
}

// FromResult converts one compare result into a chart point labelled
// r.Label (r.Model when empty; callers that plot files give ResultLabel).
// isBase marks the KL reference of its run.
func FromResult(r compare.Result, isBase bool) Model {
	label := r.Label
	if label == "" {
		label = r.Model
	}
	m := Model{Label: label, BPW: r.BPWLayer, VRAMGB: r.VRAMGB, PPL: r.PPL, IsBase: isBase, Act: formatAct(r.Format)}
	// PPL interval: the window bootstrap when present (overlapping windows
	// make the per-token SE optimistic), else ±1.96 SE.
	if b := r.PPLBootstrap; b != nil && b.Lo <= r.PPL && r.PPL <= b.Hi {
		m.PPLLo, m.PPLHi = b.Lo, b.Hi
	} else if r.PPLSE > 0 {
		m.PPLLo, m.PPLHi = r.PPL-1.96*r.PPLSE, r.PPL+1.96*r.PPLSE
	}
	if isBase {
		m.HasKLD = true // KL(P‖P) = 0, as compare_q reports for its reference
	}
	if r.KLD != nil {
		m.HasKLD = true
		m.KLD = r.KLD.Mean
		if r.KLD.MeanSE > 0 {
			m.KLDLo, m.KLDHi = r.KLD.Mean-1.96*r.KLD.MeanSE, r.KLD.Mean+1.96*r.KLD.MeanSE
		}
		p := r.KLD.Percentiles
		m.KLDQuantiles = []Quantile{
			{0, p.Min}, {0.1, p.P01}, {1, p.P1}, {5, p.P5}, {10, p.P10}, {25, p.P25}, {50, p.P50},
			{75, p.P75}, {90, p.P90}, {95, p.P95}, {99, p.P99}, {99.9, p.P999}, {100, p.Max},
		}
	}
	return m
}
