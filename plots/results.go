package plots

import "github.com/qppl/qppl/compare"

// FromResult converts one compare result into a chart point. isBase marks
// the KL reference of its run.
func FromResult(r compare.Result, isBase bool) Model {
	label := r.Label
	if label == "" {
		label = r.Model
	}
	m := Model{Label: label, BPW: r.BPWLayer, VRAMGB: r.VRAMGB, PPL: r.PPL, IsBase: isBase}
	if isBase {
		m.HasKLD = true // KL(P‖P) = 0, as compare_q reports for its reference
	}
	if r.KLD != nil {
		m.HasKLD = true
		m.KLD = r.KLD.Mean
		p := r.KLD.Percentiles
		m.KLDQuantiles = []Quantile{
			{0, p.Min}, {0.1, p.P01}, {1, p.P1}, {5, p.P5}, {10, p.P10}, {25, p.P25}, {50, p.P50},
			{75, p.P75}, {90, p.P90}, {95, p.P95}, {99, p.P99}, {99.9, p.P999}, {100, p.Max},
		}
	}
	return m
}
