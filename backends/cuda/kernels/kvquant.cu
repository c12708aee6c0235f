// kvquant.cu: the FP8 E4M3 KV cache (docs/formats/kv-cache.md). Keys after
// RoPE and values are stored as e4m3(x / s) and read back times s, in fp32
// as vLLM's cache kernels compute it (reshape_and_cache_flash's
// scaled_convert: x / scale saturated to +-448, RNE; the read multiplies
// by the scale).
#include "common.cuh"

// kv_quant rounds x[T][H][D] (fp32, in place) through an FP8 E4M3 cache
// with scale s: every head when head < 0, else only head `head` (per-head
// scales launch once per head). Grid-stride, no barriers.
// Reference: quant.FakeQuantKV.
EXTERN_C __global__ void kv_quant(float *x, int T, int H, int D, int head, float s) {
	int per = head < 0 ? H * D : D; // elements per token touched
	int n = T * per;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / per, j = i - t * per;
		size_t at = (size_t)t * H * D + (head < 0 ? j : head * D + j);
		float y = x[at] / s;
		if (y != y) continue; // NaN stays NaN
		y = fminf(fmaxf(y, -448.0f), 448.0f);
		x[at] = e4m3_rne(y) * s;
	}
}
