package plots

import "math"

// sampleModels is a dense, realistic set of points (the KL divergences read
// off ExLlamaV3's published Llama-3.1-8B plot, methodology.md §1.8) used to
// exercise label placement. Percentiles are synthesised from the mean.
func sampleModels() []Model {
	type pt struct {
		label string
		bpw   float64
		kld   float64
	}
	pts := []pt{
		{"EXL3 1.8 H3", 1.8, 0.764}, {"EXL3 1.9 H3", 1.9, 0.543}, {"EXL3 2.0", 2.0, 0.312}, {"EXL3 2.25", 2.25, 0.215},
		{"EXL3 2.5", 2.5, 0.151}, {"EXL3 3.0", 3.0, 0.053}, {"EXL3 3.5", 3.5, 0.030}, {"EXL3 4.0", 4.0, 0.013},
		{"EXL3 5.0", 5.0, 0.003}, {"EXL3 6.0", 6.0, 0.001},
		{"EXL2 3.0", 3.13, 0.245}, {"EXL2 3.5", 3.63, 0.110}, {"EXL2 4.0", 4.13, 0.054}, {"EXL2 4.5", 4.63, 0.023},
		{"EXL2 5.0", 5.13, 0.015}, {"EXL2 6.0", 6.13, 0.005},
		{"GGUF IQ2_XXS", 2.2, 0.649}, {"GGUF IQ2_XS", 2.43, 0.418}, {"GGUF IQ2_S", 2.6, 0.318}, {"GGUF IQ2_M", 2.8, 0.245},
		{"GGUF IQ3_XS", 3.4, 0.092}, {"GGUF IQ3_S", 3.6, 0.074}, {"GGUF IQ3_M", 3.7, 0.070}, {"GGUF IQ4_XS", 4.28, 0.023},
		{"GGUF Q4_K_M", 4.8, 0.018}, {"GGUF Q5_K_M", 5.65, 0.007}, {"GGUF Q6_K", 6.56, 0.003},
		{"AQLM 2x8-g8-pv [olive]", 2.05, 0.308}, {"AQLM 1x16-g8", 2.02, 0.330}, {"AQLM 1x16-g8-pv", 2.1, 0.243},
		{"VPTQ v12-4096", 2.3, 0.357}, {"VPTQ v8-256", 3.1, 0.112}, {"VPTQ v8-4096", 3.2, 0.052}, {"VPTQ v8-65536", 4.1, 0.024},
	}
	out := make([]Model, len(pts))
	for i, p := range pts {
		m := Model{Label: p.label, BPW: p.bpw, VRAMGB: p.bpw * 0.95, PPL: 7.6 * math.Exp(p.kld), KLD: p.kld, HasKLD: true}
		for _, q := range []struct{ p, f float64 }{{0, 0}, {0.1, 1e-4}, {1, 4e-4}, {10, 0.02}, {50, 0.35}, {90, 2.1}, {99, 8}, {99.9, 19}, {100, 40}} {
			m.KLDQuantiles = append(m.KLDQuantiles, Quantile{P: q.p, Value: p.kld * q.f})
		}
		out[i] = m
	}
	return out
}
