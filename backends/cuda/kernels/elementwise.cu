// elementwise.cu: gathers, casts, residual adds, biases and the SiLU gate.
// Every kernel is grid-stride over its elements and uses no barriers.
#include "common.cuh"

// fill_f32 sets p[0:n) = v.
EXTERN_C __global__ void fill_f32(float *p, int n, float v) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

// cast_act converts fp32 x[0:n) to dtype dt (RNE): the input of a GEMM.
// Reference: the activation that reference.linear multiplies, rounded to
// the chosen precision.
EXTERN_C __global__ void cast_act(void *out, const float *x, int n, int dt) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) st_dt(out, i, x[i], dt);
}

// embed_gather writes out[t][:] = table[ids[t]][:] as fp32 (table dtype tdt).
// Reference: reference.embed (model.embed_tokens). Ids outside [0, vocab)
// give NaN rows (the host validates ids before launching).
EXTERN_C __global__ void embed_gather(float *out, const void *table, int tdt, const int *ids, int T, int C, int vocab) {
	int n = T * C;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / C, c = i - t * C, id = ids[t];
		out[i] = (id >= 0 && id < vocab) ? ld_dt(table, (size_t)id * C + c, tdt) : __uint_as_float(0x7fc00000u);
	}
}

// add_inplace: x[i] += y[i] (the residual adds of the decoder layer).
EXTERN_C __global__ void add_inplace(float *x, const float *y, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += y[i];
}

// add_bias_rows: x[r][c] += bias[c] (q/k/v biases of qwen2, attention_bias).
EXTERN_C __global__ void add_bias_rows(float *x, const float *bias, int rows, int cols) {
	int n = rows * cols;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += bias[i % cols];
}

// silu_mul: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
// Reference: the act_fn(gate_proj(x)) * up_proj(x) of reference.mlp.
EXTERN_C __global__ void silu_mul(float *out, const float *gate, const float *up, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float g = gate[i];
		out[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

// rope applies rotate-half rotary embeddings in place to x[T][H][D] with
// precomputed tables cos/sin[T][D/2] (computed on the host in float64 from
// arch's inv_freq for the default, linear and llama3 scalings).
// Reference: apply_rotary_pos_emb: out = x*cos + rotate_half(x)*sin.
EXTERN_C __global__ void rope(float *x, const float *cs, const float *sn, int T, int H, int D) {
	int half = D / 2, n = T * H * half;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int j = i % half, th = i / half, t = th / H;
		float *row = x + (size_t)th * D;
		float c = cs[t * half + j], s = sn[t * half + j];
		float x1 = row[j], x2 = row[j + half];
		row[j] = x1 * c - x2 * s;
		row[j + half] = x2 * c + x1 * s;
	}
}
