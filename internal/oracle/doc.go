// Package oracle is a deliberately naive float64 implementation of the
// Hugging Face causal-LM forward pass (llama, mistral, qwen2, qwen3), kept
// apart from package reference so that the two can check each other. It is
// test infrastructure for qppl's backends: reference, quant and cuda tests
// compare their log-probabilities against it.
//
// # How it differs from package reference
//
// Everything is written separately and plainly: no gonum, no BLAS, no shared
// helpers, [][]float64 rows instead of strided buffers, its own RoPE
// inverse-frequency code (default, linear, llama3) and its own RMSNorm. Each
// position p is recomputed from scratch: the whole decoder runs over the
// prefix tokens[0..p] and only the last position's logits are kept, so no
// state is carried between positions (a masking or caching bug in a fast
// implementation shows up as a disagreement). Cost is O(T²) layer passes: use
// it on tiny models and short windows.
//
// # Numerics
//
// float64 throughout, including RoPE angles (transformers computes those in
// float32). Summation orders differ from package reference, so the two agree
// to rounding (about 1e-13 relative on fixtures), not bit for bit.
//
// # Quantized checkpoints
//
// The oracle knows nothing about packed formats: the caller's Getter returns
// dequantized float64 weights (for example through package quant), and
// Options.InputQuant, when set, fake-quantizes a copy of every Linear's input
// before its product, exactly where package reference applies
// quant.Linear.InputQuantizer. Because each prefix is recomputed, a dynamic
// per-tensor activation scheme sees the prefix rows [0..p] rather than the
// whole window; per-token, per-group and static schemes are unaffected.
// Options.KVCacheFP8 rounds every layer's keys (after RoPE) and values
// through an FP8 E4M3 cache with the checkpoint's k/v scales, read through
// the Getter by the oracle's own name list and rounded by its own E4M3
// code (docs/formats/kv-cache.md).
//
// # Failures
//
// LogProbs returns an error (never panics) for an unsupported model_type, a
// missing tensor, a tensor of the wrong shape, a token id outside the
// vocabulary, or an error from the Getter or InputQuant.
package oracle
