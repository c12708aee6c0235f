// gemma4.cu: the one operation of the Gemma 4 text decoder (arch/gemma4.go)
// that the other kernels do not compute: combining the per-layer inputs
// (Gemma4TextModel.project_per_layer_inputs, transformers
// models/gemma4/modeling_gemma4.py). Everything else of Gemma 4 runs on
// existing kernels (backends/cuda/gemma4.go): the weightless v_norm is
// rms_norm with a weight of ones, k = v is rms_norm(v ← k) before k's own
// norm, the proportional RoPE's zero frequencies are cos 1 / sin 0 rows of
// the rope tables, KV sharing reuses another layer's buffers.
#include "common.cuh"

// g4_mul is a product rounded to fp32 that no compiler may fuse with the
// add consuming it (nvcc: __fmul_rn; the emulator launders it through
// memory, as host compilers may contract a*b+c), so the kernel is
// bit-identical on both and to its Go rule (TestGemma4PLECombine).
#ifdef QPPL_EMU
static inline float g4_mul(float a, float b) {
	float r = a * b;
	__asm__ volatile("" : "+m"(r));
	return r;
}
#else
#define g4_mul(a, b) __fmul_rn((a), (b))
#endif

// ple_combine: out[l][t][p] = (proj[t][l·P + p] + g4_mul(tab[t][l·P + p], ts)) · s
// for T tokens, L layers, P = hidden_size_per_layer_input: proj is
// per_layer_projection_norm(per_layer_model_projection(e)·hidden^-½) and tab
// the gathered embed_tokens_per_layer rows, both [T][L·P]; ts is
// embed_tokens_per_layer's scale sqrt(P) and s per_layer_input_scale 2^-½
// ((per_layer_projection + per_layer_inputs) * per_layer_input_scale). The
// output is layer-major so that layer l's per_layer_inputs[:, :, l, :] is
// the contiguous [T][P] block out + l·T·P.
EXTERN_C __global__ void ple_combine(float *out, const float *proj, const float *tab, int T, int L, int P, float ts, float s) {
	int n = T * L * P;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int p = i % P, tl = i / P, l = tl % L, t = tl / L;
		out[((size_t)l * T + t) * P + p] = g4_mul(proj[i] + g4_mul(tab[i], ts), s);
	}
}
