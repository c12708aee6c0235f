// fused.cu: the elementwise steps that follow a fused GEMM
// (backends/cuda/fuse.go): one GEMM computes q|k|v, or gate|up, side by
// side in each row, and these kernels read the concatenated rows.
#include "common.cuh"

// split_qkv: in[T][Q+2KV] = q|k|v of each token (fp32) -> q[T][Q],
// k[T][KV], v[T][KV], adding the biases bq/bk/bv when non-null, with the
// arithmetic of add_bias_rows (x + b in fp32). Grid-stride over T·(Q+2KV).
// Reference: the q_proj/k_proj/v_proj outputs of reference.attention.
EXTERN_C __global__ void split_qkv(float *q, float *k, float *v, const float *in, const float *bq, const float *bk,
				   const float *bv, int T, int Q, int KV) {
	int W = Q + 2 * KV;
	int n = T * W;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / W, c = i % W;
		float x = in[i];
		if (c < Q) {
			q[(size_t)t * Q + c] = bq ? x + bq[c] : x;
		} else if (c < Q + KV) {
			c -= Q;
			k[(size_t)t * KV + c] = bk ? x + bk[c] : x;
		} else {
			c -= Q + KV;
			v[(size_t)t * KV + c] = bv ? x + bv[c] : x;
		}
	}
}

// silu_mul_cat: out[t][i] = silu(gu[t][i]) * gu[t][I + i] for gu[T][2I] =
// gate|up of each token, with silu_mul's arithmetic (g / (1 + exp(-g)) * u).
// Grid-stride over T·I. Reference: reference.mlp.
EXTERN_C __global__ void silu_mul_cat(float *out, const float *gu, int T, int I) {
	int n = T * I;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / I, c = i % I;
		float g = gu[(size_t)t * 2 * I + c];
		out[i] = g / (1.0f + expf(-g)) * gu[(size_t)t * 2 * I + I + c];
	}
}
