// Package reference is qppl's ground-truth backend: the Hugging Face
// transformers causal-LM forward pass (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) computed in float64 with package gemm
// (matrix products) and package detmath (exp, log, pow, sin/cos).
//
// # What it computes
//
// For a window of T token ids, with hidden size C, H query heads, KV key/value
// heads of width D (head_dim), intermediate size I and vocabulary V:
//
//	x        = embed_tokens[ids]                                  [T][C]
//	per layer:
//	  h      = RMSNorm(x; input_layernorm)                        [T][C]
//	  q,k,v  = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)             [T][H·D], [T][KV·D]
//	  q,k    = RMSNorm per head (qwen3 q_norm/k_norm), then rotate-half RoPE
//	  a      = softmax(q_h·k_gᵀ / sqrt(D) + causal mask) · v_g    per head h, g = h / (H/KV)
//	  x      = x + a·Woᵀ (+bo)
//	  h      = RMSNorm(x; post_attention_layernorm)
//	  x      = x + (silu(h·Wgᵀ) ⊙ (h·Wuᵀ))·Wdᵀ
//	logits   = RMSNorm(x; model.norm) · W_headᵀ                  (W_head = embed_tokens when tied)
//	logprobs = logits − max − log Σ exp(logits − max)
//
// RMSNorm is y = w ⊙ (x · 1/sqrt(mean(x²)+eps)) as transformers' LlamaRMSNorm.
// RoPE inverse frequencies follow transformers' default, linear and llama3
// rope_scaling rules; the angles pos·inv_freq and their cos/sin are computed in
// float64 (transformers computes them in float32 even for a float64 model:
// this package deliberately does not).
//
// Activation quantization (W4A4, W8A8 checkpoints): when a Linear's
// quant.Linear.InputQuantizer is non-nil, a copy of that Linear's input
// [T][in] is fake-quantized (one row per token) before its product; q, k and v
// each quantize their own copy with their own constants (formats.md §8). An
// untied lm_head stored with input_activations (a recipe that does not
// ignore lm_head) quantizes its [T][C] input the same way.
//
// # Layout and precision
//
// Every activation is a row-major [T][width] []float64. Every matrix product
// (the Linears, the lm_head, and per head q·kᵀ and P·v) is computed by
// package gemm: each element is one chain of fused multiply-adds in
// ascending k. Everything else (norms, RoPE, softmax, SiLU, log-softmax) is a
// float64 loop in a fixed order whose products are explicitly rounded (never
// fused by the compiler), with detmath's exp/log/sincos. Results are
// bit-identical on every run, for every number of threads, with the
// assembly kernels or the pure-Go fallback (QPPL_NOASM=1), on amd64 and
// arm64, and so is the KL divergence against a base (docs/reference.md).
//
// # Memory
//
// Packed or dense Linear weights stay as package quant holds them (their
// stored bytes). When a Linear runs, each goroutine of the product decodes
// the rows of its block of output columns (at most 128 rows,
// quant.RowDequantizer) straight into the product's panels; a Linear whose
// format cannot decode by rows is decoded whole into one reused scratch
// buffer (the largest such Linear of a layer: out·in·8 bytes). Norms and
// biases (a few vectors per layer) are decoded once at New. The embedding
// is never decoded whole: the window's rows are read from the checkpoint
// file for the input, and a tied head is applied in blocks of about 16 MB
// of decoded rows (re-read for every 128 scored positions). An untied
// lm_head is decoded by rows like a Linear, again for every 128 scored
// positions (or, in a format that cannot, into its own V·C·8-byte buffer
// once per call). Activations take about (4C + 2·H·D + 2·KV·D + 2I)·T·8
// bytes plus 128·V·8 bytes of logits (the head runs 128 positions at a
// time), plus gemm's packed copy of one product's input and, per thread,
// 128·in decoded weight rows, one 128×256 packed block and a [64][T] block
// of attention scores. A Backend serialises its calls.
//
// # Threads and speed
//
// Linear and head products are spread over Options.Threads goroutines by
// package gemm (packed panels, register-blocked AVX-512 / AVX2+FMA / NEON
// micro-kernels, output blocks handed out dynamically); attention is split
// into (head, 64-query block) tasks handed out the same way, each running
// on its worker's own gemm engine;
// log-softmax rows of the head run in parallel. None of this changes a bit
// of the result. `make bench` measures a whole `qppl eval` process against
// PyTorch float64 + OpenBLAS on the same window (README, Performance).
//
// # Failures
//
// New fails with an error naming the tensor when a weight is missing or has
// the wrong shape, and when the architecture or quantization is unsupported.
// Score, LogProbs and Probe fail (never panic) on an empty window, an
// out-of-range First, a token id outside [0, vocab), a base distribution of
// the wrong vocabulary, an unknown probe point, non-finite log-probabilities,
// and a cancelled context (checked between layers).
package reference
