// Package verify is the numerics diff between two backends (typically the
// float64 reference and the emulated or real CUDA kernels): it runs both on
// identical windows and reports the per-token NLL difference (max, mean,
// RMS), the KL divergence between their distributions (the first backend's
// log-probs are the Base of the second), top-1 agreement, the perplexity of
// each, and, when both are backends.Prober, the relative error of every
// per-layer hidden state, so that a wrong kernel is located (the first
// layer and site beyond tolerance), not just detected.
//
// Tolerances depend on the second backend's precision (DefaultTolerances,
// documented in docs/cuda.md); Report.Pass says whether every figure is
// within them and Report.Failures says which are not. Errors are returned
// for backend failures and mismatched vocabularies, never for numbers out of
// tolerance.
package verify
