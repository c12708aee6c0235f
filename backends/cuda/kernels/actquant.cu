// actquant.cu: run-time fake quantization of a Linear's input (formats.md
// section 8.2), in fp32 instead of float64, writing the quantized-dequantized
// activation in the GEMM dtype gemmDT.
#include "common.cuh"

#define AQ_INT8 0
#define AQ_FP8 1
#define AQ_NVFP4 2
#define AQ_MXFP4 3
#define AQ_NVFP4_BLOCK 5

// mx_scale is compressed-tensors' MXFP4 group scale for amax > 0
// (generate_mxfp4_scales): amax rounded to a power of two, up when its
// significand is >= 1.75, then 2^(e - 2), e clamped to [-127, 128].
// Reference: quant.MXScale.
__device__ __forceinline__ float mx_scale(float amax) {
	int k;
	float frac = frexpf(amax, &k);
	int e = k - 1 + (frac >= 0.875f ? 1 : 0);
	e = e - 2;
	if (e < -127) e = -127;
	if (e > 128) e = 128;
	return ldexpf(1.0f, e);
}

// aq_one quantizes one value x with effective scale eff and zero point zp.
__device__ __forceinline__ float aq_one(float x, float amax, float eff, float zp, int kind, int pin) {
	if (kind == AQ_INT8) {
		float y = x / eff;
		if (pin && amax > 0.0f && fabsf(x) == amax) y = x < 0 ? -127.5f : 127.5f; // the tie rule (8.2)
		y = y + zp;
		y = fminf(fmaxf(y, -128.0f), 127.0f);
		return (rintf(y) - zp) * eff;
	}
	if (kind == AQ_FP8) {
		float y = fminf(fmaxf(x / eff, -448.0f), 448.0f);
		return e4m3_rne(y) * eff;
	}
	float y = fminf(fmaxf(x / eff, -6.0f), 6.0f);
	return e2m1_round(y) * eff;
}

// act_quant: one block per token row of x[rows][cols] (fp32).
//   kind 0 INT8 (qmin -128, qmax 127, D 127.5, RHE), 1 FP8 E4M3 (D 448),
//   2 NVFP4 (E2M1, D 6, E4M3 group scales, global scale gscale, group 16).
//   dynamic 1: scales from the data, per row (gsize 0) or per gsize columns;
//     symmetric: s = amax / D (int8 pins ±amax to ±127.5);
//     asymmetric int8: s = (mx - mn)/255, zp = RHE(clamp(-128 - mn/s)).
//     NVFP4: s = E4M3(clamp(gscale*(amax/6), ±448)), 0 -> 0.125, eff = s / gscale.
//     MXFP4 (kind 3, group 32): eff = mx_scale(amax), E2M1 codes.
//     NVFP4_BLOCK (kind 5): NVFP4 with eff = s, the E4M3 block scale alone:
//       writes e2m1 · s, exact in bf16 and fp16 (at most 6 significant bits,
//       |value| in [2^-10, 2688]); the caller multiplies the GEMM output by
//       1/gscale, as an FP4 tensor-core GEMM applies the global scales in
//       its epilogue (backends/cuda/forward.go linearInput). Writing
//       e2m1 · s / gscale in bf16 would round every input by up to 2^-9.
//   dynamic 0: static s (scale) and zp.
//   A zero scale (all-zero group) gives zeros.
// Launch: grid rows, block 128. Reference: quant's ActQuantizer.Quantize.
EXTERN_C __global__ void act_quant(void *out, int gemmDT, const float *x, int rows, int cols, int kind, int gsize,
				   int dynamic, int sym, float scale, float zp, float gscale) {
	__shared__ float red[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	const float *xr = x + (size_t)r * cols;
	size_t base = (size_t)r * cols;
	const float D = kind == AQ_INT8 ? 127.5f : (kind == AQ_FP8 ? 448.0f : 6.0f);
	if (!dynamic) {
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			st_dt(out, base + c, scale == 0.0f ? 0.0f : aq_one(xr[c], 0.0f, scale, zp, kind, 0), gemmDT);
		return;
	}
	if (gsize > 0) { // groups of gsize consecutive columns: one thread per group
		int ng = cols / gsize;
		for (int g = threadIdx.x; g < ng; g += blockDim.x) {
			const float *xg = xr + g * gsize;
			float amax = 0.0f;
			for (int c = 0; c < gsize; c++) amax = fmaxf(amax, fabsf(xg[c]));
			float eff, outs = 0.0f;
			if (kind == AQ_NVFP4 || kind == AQ_NVFP4_BLOCK) {
				float s = e4m3_rne(fminf(fmaxf(gscale * (amax / 6.0f), -448.0f), 448.0f));
				if (s == 0.0f) s = 0.125f;
				eff = s / gscale;
				if (kind == AQ_NVFP4_BLOCK) outs = s; // the same codes, written times s
			} else if (kind == AQ_MXFP4) {
				eff = amax > 0.0f ? mx_scale(amax) : 0.0f;
			} else {
				eff = amax / D;
			}
			for (int c = 0; c < gsize; c++) {
				float v;
				if (outs != 0.0f) v = e2m1_round(fminf(fmaxf(xg[c] / eff, -6.0f), 6.0f)) * outs;
				else v = (eff == 0.0f) ? 0.0f : aq_one(xg[c], amax, eff, 0.0f, kind, 0);
				st_dt(out, base + g * gsize + c, v, gemmDT);
			}
		}
		return;
	}
	// per token (whole row)
	float mn = 0.0f, mx = 0.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		mn = fminf(mn, xr[c]);
		mx = fmaxf(mx, xr[c]);
	}
	mx = block_max(mx, red);
	mn = -block_max(-mn, red);
	float eff, z = 0.0f, amax = fmaxf(-mn, mx);
	int pin = 0;
	if (sym || kind != AQ_INT8) {
		eff = amax / D;
		pin = kind == AQ_INT8;
	} else {
		eff = (mx - mn) / 255.0f;
		if (eff != 0.0f) z = rintf(fminf(fmaxf(-128.0f - mn / eff, -128.0f), 127.0f));
	}
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		st_dt(out, base + c, eff == 0.0f ? 0.0f : aq_one(xr[c], amax, eff, z, kind, pin), gemmDT);
}

// act_amax raises *amax to the largest |x[i]| of x[0:n] (fp32): each block
// reduces its grid-stride share and its thread 0 takes atomicMax on the
// int bits (non-negative floats order as their bits), so the result is the
// same in every launch order. The caller zeroes *amax first (fill_f32).
// Launch: grid up to 1024 blocks, block 256. Reference: the amax of
// quant.ActQuant's strategy "tensor".
EXTERN_C __global__ void act_amax(float *amax, const float *x, int n) {
	__shared__ float red[32];
	float m = 0.0f;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
		m = fmaxf(m, fabsf(x[i]));
	m = block_max(m, red);
	if (threadIdx.x == 0) atomicMax((int *)amax, __float_as_int(m));
}

// act_quant_tensor: act_quant's dynamic symmetric per-tensor case (one
// scale for the whole x[rows][cols]): eff = *amax / D with the amax that
// act_amax wrote to device memory, kind AQ_INT8 (D 127.5, ±amax pinned to
// ±127.5) or AQ_FP8 (D 448). A zero amax gives zeros.
// Launch: grid rows, block 128. Reference: quant.ActQuant, strategy "tensor".
EXTERN_C __global__ void act_quant_tensor(void *out, int gemmDT, const float *x, int rows, int cols, int kind,
					  const float *amax) {
	int r = blockIdx.x;
	if (r >= rows) return;
	const float *xr = x + (size_t)r * cols;
	size_t base = (size_t)r * cols;
	float m = *amax;
	float eff = m / (kind == AQ_INT8 ? 127.5f : 448.0f);
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		st_dt(out, base + c, eff == 0.0f ? 0.0f : aq_one(xr[c], m, eff, 0.0f, kind, kind == AQ_INT8), gemmDT);
}
