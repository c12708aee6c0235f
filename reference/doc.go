// Package reference is qppl's ground-truth backend: the Hugging Face
// transformers causal-LM forward pass (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) computed in float64 with gonum.
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
// (the Linears, the lm_head, and per head q·kᵀ and P·v) is computed by gonum
// BLAS Dgemm calls; everything else (norms, RoPE, softmax, SiLU, log-softmax) is a plain float64
// loop in a fixed order. Results are deterministic: the same window gives
// bit-identical output on every run, whatever the number of threads: how
// each output element is summed depends only on the matrix shapes, never on
// scheduling (see Threads and speed).
//
// # Memory
//
// Packed or dense Linear weights stay as package quant holds them (their
// stored bytes). Each Linear is decoded to float64 into one reused scratch
// buffer (the largest Linear of a layer: out·in·8 bytes) right before its
// product and overwritten by the next one; norms and biases (a few vectors
// per layer) are decoded once at New. The embedding is never decoded whole:
// the window's rows are read from the checkpoint file for the input, and a
// tied head is applied in blocks of about 16 MB of decoded rows
// (re-read for every 64 scored positions). An untied lm_head is decoded into
// its own V·C·8-byte buffer once per call. Activations take about
// (4C + 2·H·D + 2·KV·D + 2I + T)·T·8 bytes plus 64·V·8 bytes of logits (the
// head runs 64 positions at a time). A Backend serialises its calls.
//
// # Threads and speed
//
// Linear and head products run as tiles of at most 32×128 outputs, each a
// gonum Dgemm small enough to take gonum's serial path (one full-length dot
// product per element), spread over Options.Threads goroutines; attention
// heads are spread the same way. Results are bit-identical for every thread
// count. About 85% of the time is spent in Dgemm: on the shared 2-core
// development machine a 512-token window of a SmolLM2-135M-shaped model
// (≈147 GFLOP) takes ≈18.5 CPU-seconds, ≈8 GFLOP per CPU-second
// (BenchmarkForward_SmolLM2Shaped_T512, make bench).
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
