// llmint8.cu: bitsandbytes' LLM.int8 input decomposition (MatMul8bitLt),
// in fp32, writing the quantized-dequantized Linear input in the GEMM dtype
// gemmDT (launched by backends/cuda/forward.go through
// device.LaunchLLMInt8Cols / LaunchLLMInt8Quant). Reference: quant's
// ActQuant.llmInt8 (quant/bnb.go), which follows the float64 rule.
#include "common.cuh"

// llmint8_cols: flags[c] = 1 when some row of x[rows][cols] (fp32) has
// |x| >= thr (thr > 0), else 0: bitsandbytes' outlier columns.
// Launch: grid-stride over cols.
EXTERN_C __global__ void llmint8_cols(float *flags, const float *x, int rows, int cols, float thr) {
	for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
		float f = 0.0f;
		if (thr > 0.0f) {
			for (int r = 0; r < rows; r++) {
				if (fabsf(x[(size_t)r * cols + c]) >= thr) {
					f = 1.0f;
					break;
				}
			}
		}
		flags[c] = f;
	}
}

// llmint8_quant: one block per row of x[rows][cols]: outlier columns
// (flags[c] != 0) pass through; the others become rint(x / s) * s with
// s = amax / 127, amax over the row's non-outlier columns (0 when amax is 0).
// Launch: grid rows, block 128.
EXTERN_C __global__ void llmint8_quant(void *out, int gemmDT, const float *x, const float *flags, int rows, int cols) {
	__shared__ float red[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	const float *xr = x + (size_t)r * cols;
	size_t base = (size_t)r * cols;
	float amax = 0.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		if (flags[c] == 0.0f) amax = fmaxf(amax, fabsf(xr[c]));
	amax = block_max(amax, red);
	float s = amax / 127.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		if (flags[c] == 0.0f) v = s == 0.0f ? 0.0f : rintf(v / s) * s;
		st_dt(out, base + c, v, gemmDT);
	}
}
