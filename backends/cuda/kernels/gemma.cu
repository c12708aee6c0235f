// gemma.cu: the operations the Gemma families add to the llama graph
// (transformers models/gemma2/modeling_gemma2.py, models/gemma3/
// modeling_gemma3.py; see arch/gemma2.go and arch/gemma3.go). The (1 + w)
// RMSNorm needs no kernel: the loader uploads 1 + w in fp32, as
// Gemma2RMSNorm.forward forms it (output * (1.0 + self.weight.float())),
// and rms_norm multiplies by it.
// Every kernel is grid-stride over its elements and uses no barriers.
#include "common.cuh"

// scale_f32: x[i] *= s. The embedding scale of Gemma2Model.forward
// (hidden_states * normalizer, normalizer = sqrt(hidden_size)) and
// Gemma3TextScaledWordEmbedding (embed_scale). The host passes s as fp32:
// the activation dtype here (transformers rounds it to the activation dtype
// in gemma2, the embedding dtype in gemma3; see arch/gemma2.go).
// Reference: reference.forward (EmbedScale). Also the 1/gscale of an NVFP4
// Linear's GEMM output (forward.go linearInput).
EXTERN_C __global__ void scale_f32(float *x, int n, float s) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= s;
}

// softcap: x[i] = tanh(x[i] / cap) * cap over x[0:n) (cap > 0). Used on the
// scaled attention scores before the mask and softmax
// (eager_attention_forward: attn_weights / softcap, tanh, * softcap) and on
// the logits (Gemma2ForCausalLM.forward, final_logit_softcapping).
// Reference: reference.attention and reference's head (softcap).
EXTERN_C __global__ void softcap(float *x, int n, float cap) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = tanhf(x[i] / cap) * cap;
}

// gelu_tanh: PyTorch's gelu(approximate="tanh") (ACT2FN["gelu_pytorch_tanh"]):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in fp32.
__device__ __forceinline__ float gelu_tanh(float x) {
	const float k = 0.7978845608028654f; // sqrt(2/pi)
	return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// gelu_tanh_mul: out[i] = gelu_tanh(gate[i]) * up[i] (Gemma2MLP:
// down_proj(act_fn(gate_proj(x)) * up_proj(x))); out may be gate.
// Reference: reference.forward (GeluTanh), reference.geluTanh.
EXTERN_C __global__ void gelu_tanh_mul(float *out, const float *gate, const float *up, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = gelu_tanh(gate[i]) * up[i];
}

// gelu_tanh_mul_cat: out[t][i] = gelu_tanh(gu[t][i]) * gu[t][I + i] for the
// fused gate|up rows gu[T][2I] (silu_mul_cat's layout, fused.cu).
EXTERN_C __global__ void gelu_tanh_mul_cat(float *out, const float *gu, int T, int I) {
	int n = T * I;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / I, c = i % I;
		out[i] = gelu_tanh(gu[(size_t)t * 2 * I + c]) * gu[(size_t)t * 2 * I + I + c];
	}
}
