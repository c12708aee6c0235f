package device

// Typed launch wrappers, one per kernel of backends/cuda/kernels (the
// dequantization kernels' wrappers live in backends/cuda/dq_*.go). Each
// takes the kernel's parameters under the names the .cu prototype gives
// them, in its order, and owns the launch geometry the kernel expects;
// TestKernelTableMatchesSources checks names, order and kinds against the
// prototypes, so a wrapper cannot drift from its kernel.

// GridStride is the geometry of the grid-stride kernels over n elements:
// 256 threads per block, at most 4096 blocks (each thread then loops).
func GridStride(n int) (grid, block Dim3) {
	blocks := (n + 255) / 256
	if blocks > 4096 {
		blocks = 4096
	}
	if blocks < 1 {
		blocks = 1
	}
	return D1(blocks), D1(256)
}

// LaunchFill sets p[0:n] to v (fill_f32, elementwise.cu).
func LaunchFill(d Device, p Ptr, n int, v float32) error {
	g, b := GridStride(n)
	return d.Launch(KFill, g, b, 0, p, int32(n), v)
}

// LaunchCastAct writes x[0:n] (fp32) rounded to dtype dt into out
// (cast_act, elementwise.cu).
func LaunchCastAct(d Device, out, x Ptr, n int, dt DType) error {
	g, b := GridStride(n)
	return d.Launch(KCastAct, g, b, 0, out, x, int32(n), int32(dt))
}

// LaunchEmbedGather writes out[t][c] = table[ids[t]][c] (table of dtype
// tdt, [vocab][C]) for T tokens (embed_gather, elementwise.cu).
func LaunchEmbedGather(d Device, out, table Ptr, tdt DType, ids Ptr, T, C, vocab int) error {
	g, b := GridStride(T * C)
	return d.Launch(KEmbedGather, g, b, 0, out, table, int32(tdt), ids, int32(T), int32(C), int32(vocab))
}

// LaunchAddInplace adds y[0:n] to x (add_inplace, elementwise.cu).
func LaunchAddInplace(d Device, x, y Ptr, n int) error {
	g, b := GridStride(n)
	return d.Launch(KAddInplace, g, b, 0, x, y, int32(n))
}

// LaunchAddBiasRows adds bias[cols] to every row of x[rows][cols]
// (add_bias_rows, elementwise.cu).
func LaunchAddBiasRows(d Device, x, bias Ptr, rows, cols int) error {
	g, b := GridStride(rows * cols)
	return d.Launch(KAddBiasRows, g, b, 0, x, bias, int32(rows), int32(cols))
}

// LaunchSiluMul writes out = silu(gate) ⊙ up over n elements (silu_mul,
// elementwise.cu); out may be gate.
func LaunchSiluMul(d Device, out, gate, up Ptr, n int) error {
	g, b := GridStride(n)
	return d.Launch(KSiluMul, g, b, 0, out, gate, up, int32(n))
}

// LaunchRope rotates x[T][H][D] in place with the cos (cs) and sin (sn)
// tables of [T][D/2] (rope, elementwise.cu).
func LaunchRope(d Device, x, cs, sn Ptr, T, H, D int) error {
	g, b := GridStride(T * H * D / 2)
	return d.Launch(KRope, g, b, 0, x, cs, sn, int32(T), int32(H), int32(D))
}

// LaunchRMSNorm writes out[r] = x[r]/rms(x[r])·w for rows rows of cols
// (rms_norm, norm.cu: one 128-thread block per row).
func LaunchRMSNorm(d Device, out, x, w Ptr, rows, cols int, eps float32) error {
	return d.Launch(KRMSNorm, D1(rows), D1(128), 0, out, x, w, int32(rows), int32(cols), eps)
}

// LaunchAttention computes causal attention out[T][H][D] from q[T][H][D]
// and k, v [T][KVH][D] with the softmax scale, rounding the probabilities
// and values to the GEMM dtype dt (attention, attention.cu: blocks of
// AttnBlockQ queries per head, AttnTileK keys per shared-memory tile).
func LaunchAttention(d Device, out, q, k, v Ptr, T, H, KVH, D int, scale float32, dt DType, W int) error {
	grid := Dim3{X: (T + AttnBlockQ - 1) / AttnBlockQ, Y: H, Z: 1}
	return d.Launch(KAttention, grid, D1(AttnBlockQ), 2*AttnTileK(D)*D*4,
		out, q, k, v, int32(T), int32(H), int32(KVH), int32(D), scale, int32(dt), int32(W))
}

// LaunchLogitsStats reduces logits[rows][V]: the target's negative
// log-probability into nll, the KL divergence to a base distribution
// (baseKind BaseNone/BaseF32/BaseU16, base and baseAux its data) into kl,
// and the topk token ids into top (logits_stats, logits.cu: one 256-thread
// block per row).
func LaunchLogitsStats(d Device, logits Ptr, rows, V int, targets, nll, base Ptr, baseKind int32, baseAux, kl Ptr, topk int, top Ptr) error {
	return d.Launch(KLogitsStats, D1(rows), D1(256), 0, logits, int32(rows), int32(V), targets, nll,
		base, baseKind, baseAux, kl, int32(topk), top)
}

// LaunchActQuant fake-quantizes x[rows][cols] (fp32) into out (dtype gemmDT)
// with the activation quantizer kind (AQInt8, AQFP8, AQNVFP4), group size
// gsize (0: per row), dynamic or static scale/zp, symmetric or not, and the
// NVFP4 global scale gscale (act_quant, actquant.cu: one 128-thread block
// per row).
func LaunchActQuant(d Device, out Ptr, gemmDT DType, x Ptr, rows, cols int, kind, gsize, dynamic, sym int32, scale, zp, gscale float32) error {
	return d.Launch(KActQuant, D1(rows), D1(128), 0, out, int32(gemmDT), x, int32(rows), int32(cols),
		kind, gsize, dynamic, sym, scale, zp, gscale)
}

// LaunchActAmax sets *amax (one fp32 of device memory) to max |x[i]| over
// x[0:n] (fp32): it zeroes amax (fill_f32), then act_amax (actquant.cu: up
// to 1024 blocks of 256) raises it with atomicMax on the bits, in any order
// to the same value.
func LaunchActAmax(d Device, amax, x Ptr, n int) error {
	if err := LaunchFill(d, amax, 1, 0); err != nil {
		return err
	}
	blocks := min(max((n+255)/256, 1), 1024)
	return d.Launch(KActAmax, D1(blocks), D1(256), 0, amax, x, int32(n))
}

// LaunchActQuantTensor fake-quantizes x[rows][cols] (fp32) into out (dtype
// gemmDT) with one dynamic symmetric scale for the whole matrix, *amax / D
// (kind AQInt8 or AQFP8; amax as LaunchActAmax left it over the same x)
// (act_quant_tensor, actquant.cu: one 128-thread block per row).
func LaunchActQuantTensor(d Device, out Ptr, gemmDT DType, x Ptr, rows, cols int, kind int32, amax Ptr) error {
	return d.Launch(KActQuantT, D1(rows), D1(128), 0, out, int32(gemmDT), x, int32(rows), int32(cols), kind, amax)
}

// LaunchLLMInt8Cols sets flags[c] (fp32) to 1 where column c of
// x[rows][cols] has some |x| >= thr (llmint8_cols, llmint8.cu).
func LaunchLLMInt8Cols(d Device, flags, x Ptr, rows, cols int, thr float32) error {
	g, b := GridStride(cols)
	return d.Launch(KLLMInt8Cols, g, b, 0, flags, x, int32(rows), int32(cols), thr)
}

// LaunchLLMInt8Quant writes LLM.int8's quantized input of x[rows][cols]
// (fp32) into out (gemmDT): flagged columns as they are, the rest int8 per
// row over amax/127 (llmint8_quant, llmint8.cu: one 128-thread block per
// row).
func LaunchLLMInt8Quant(d Device, out Ptr, gemmDT DType, x, flags Ptr, rows, cols int) error {
	return d.Launch(KLLMInt8, D1(rows), D1(128), 0, out, int32(gemmDT), x, flags, int32(rows), int32(cols))
}

// LaunchAttnPrep writes the attention operands qa, ka, va ([H][T][D] in
// dtype dt; each query head's K and V group expanded) from q, k, v
// ([T][heads][D] fp32, after RoPE) for the batched-GEMM attention
// (attn_prep, attention.cu).
func LaunchAttnPrep(d Device, qa, ka, va, q, k, v Ptr, T, H, KVH, D int, dt DType) error {
	g, b := GridStride(H * T * D)
	return d.Launch(KAttnPrep, g, b, 0, qa, ka, va, q, k, v, int32(T), int32(H), int32(KVH), int32(D), int32(dt))
}

// LaunchAttnSoftmax turns the scaled scores s[rows][N] of R query rows
// starting at r0 (per head) into causal softmax weights p, written as
// nparts dtype-dt parts whose sum keeps fp32 precision (attn_softmax,
// attention.cu: one warp per row).
func LaunchAttnSoftmax(d Device, p Ptr, nparts int, s Ptr, rows, N, R, r0 int, dt DType, W int, sinks Ptr) error {
	return d.Launch(KAttnSoftmax, D1(rows), D1(32), 0, p, int32(nparts), s, int32(rows), int32(N), int32(R), int32(r0), int32(dt), int32(W), sinks)
}

// LaunchOssGlu writes gpt-oss's clamped SwiGLU out[n] from the interleaved
// gate/up rows gu[n][2] (oss_glu, gptoss.cu).
func LaunchOssGlu(d Device, out, gu Ptr, n int, alpha, limit float32) error {
	g, b := GridStride(n)
	return d.Launch(KOssGlu, g, b, 0, out, gu, int32(n), alpha, limit)
}

// LaunchSplitQKV splits the fused projection in[T][Q+2·KV] into q, k, v,
// adding the biases bq, bk, bv where non-null (split_qkv, fused.cu).
func LaunchSplitQKV(d Device, q, k, v, in, bq, bk, bv Ptr, T, Q, KV int) error {
	g, b := GridStride(T * (Q + 2*KV))
	return d.Launch(KSplitQKV, g, b, 0, q, k, v, in, bq, bk, bv, int32(T), int32(Q), int32(KV))
}

// LaunchSiluMulCat writes out[T][I] = silu(gate)·up from the fused rows
// gu[T][2I] = [gate | up] (silu_mul_cat, fused.cu).
func LaunchSiluMulCat(d Device, out, gu Ptr, T, I int) error {
	g, b := GridStride(T * I)
	return d.Launch(KSiluMulCat, g, b, 0, out, gu, int32(T), int32(I))
}

// LaunchLogSoftmaxRows replaces each of rows rows of logits[rows][V] by its
// log-softmax (log_softmax_rows, logits.cu: one 256-thread block per row).
func LaunchLogSoftmaxRows(d Device, logits Ptr, rows, V int) error {
	return d.Launch(KLogSoftmax, D1(rows), D1(256), 0, logits, int32(rows), int32(V))
}

// LaunchScale multiplies x[0:n] by s (scale_f32, gemma.cu).
func LaunchScale(d Device, x Ptr, n int, s float32) error {
	g, b := GridStride(n)
	return d.Launch(KScale, g, b, 0, x, int32(n), s)
}

// LaunchSoftcap replaces x[0:n] by tanh(x/cap)·cap (softcap, gemma.cu).
func LaunchSoftcap(d Device, x Ptr, n int, cap float32) error {
	g, b := GridStride(n)
	return d.Launch(KSoftcap, g, b, 0, x, int32(n), cap)
}

// LaunchGeluTanhMul writes out = gelu_tanh(gate) ⊙ up over n elements
// (gelu_tanh_mul, gemma.cu); out may be gate.
func LaunchGeluTanhMul(d Device, out, gate, up Ptr, n int) error {
	g, b := GridStride(n)
	return d.Launch(KGeluTanhMul, g, b, 0, out, gate, up, int32(n))
}

// LaunchGeluTanhMulCat writes out[T][I] = gelu_tanh(gate)·up from the fused
// rows gu[T][2I] = [gate | up] (gelu_tanh_mul_cat, gemma.cu).
func LaunchGeluTanhMulCat(d Device, out, gu Ptr, T, I int) error {
	g, b := GridStride(T * I)
	return d.Launch(KGeluTanhMulCat, g, b, 0, out, gu, int32(T), int32(I))
}

// LaunchKVQuant rounds x[T][H][D] (fp32, in place) through an FP8 E4M3 KV
// cache with scale s: all heads when head < 0, else head `head` only
// (kv_quant, kvquant.cu).
func LaunchKVQuant(d Device, x Ptr, T, H, D, head int, s float32) error {
	n := T * D
	if head < 0 {
		n *= H
	}
	g, b := GridStride(n)
	return d.Launch(KKVQuant, g, b, 0, x, int32(T), int32(H), int32(D), int32(head), s)
}
