// gptoss.cu: the expert activation of gpt-oss (transformers
// models/gpt_oss/modeling_gpt_oss.py GptOssExperts.forward; see
// arch/gpt_oss.go). The attention sinks live in attention.cu's
// attn_softmax; the router bias and top-k-then-softmax routing on the host
// (backends/cuda/gptoss.go).
#include "common.cuh"

// oss_glu: out[i] = (clamp(up, -limit, limit) + 1) · g · sigmoid(alpha·g),
// g = min(gate, limit), from the interleaved gate_up rows gu[n][2]
// (gate = gu[..., ::2], up = gu[..., 1::2]), n = rows · I. Grid-stride
// over n. Reference: reference.gptOssMixture.
EXTERN_C __global__ void oss_glu(float *out, const float *gu, int n, float alpha, float limit) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float g = fminf(gu[2 * (size_t)i], limit);
		float u = fminf(fmaxf(gu[2 * (size_t)i + 1], -limit), limit);
		out[i] = (u + 1.0f) * (g / (1.0f + expf(-g * alpha)));
	}
}
