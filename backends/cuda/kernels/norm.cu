// norm.cu: RMSNorm.
#include "common.cuh"

// rms_norm: out[r][:] = x[r][:] / sqrt(mean(x[r]^2) + eps) * w[:], one block
// per row (blockDim.x a multiple of 32). Used for input_layernorm,
// post_attention_layernorm, model.norm and, with rows = T*heads and
// cols = head_dim, for qwen3's per-head q_norm/k_norm.
// Reference: reference.rmsnorm (HF LlamaRMSNorm), in fp32 instead of float64.
EXTERN_C __global__ void rms_norm(float *out, const float *x, const float *w, int rows, int cols, float eps) {
	__shared__ float red[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	const float *xr = x + (size_t)r * cols;
	float ss = 0.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
	ss = block_sum(ss, red);
	float inv = 1.0f / sqrtf(ss / (float)cols + eps);
	float *o = out + (size_t)r * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = xr[c] * inv * w[c];
}
