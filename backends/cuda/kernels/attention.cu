// attention.cu: causal grouped-query attention over a whole window.
#include "common.cuh"

#define ATT_BQ 64   // queries per block (one per thread)
#define ATT_BK 32   // keys per shared-memory tile (16 when head_dim > 128: 32 KB of shared memory at most)
#define ATT_MAXD 256

// attention computes, for every query row i and head h,
//   out[i][h][:] = Σ_{j<=i} softmax_j(q_i·k_j · scale) v_j
// with q[T][H][D], k,v[T][KVH][D] (fp32, kv head = h / (H/KVH)), each
// q/k/v element first rounded to the activation dtype dt (what a bf16 or
// fp16 attention reads). Keys are streamed in tiles through shared memory
// and the softmax is online (running max m and sum l in fp32, rescaling
// the accumulator when m grows), so no T×T matrix is formed.
// With W > 0 (a sliding window) query i sees only keys j > i-W
// (transformers' sliding_window_overlay); W = 0, or W >= T, is full causal
// attention and takes exactly the same steps.
// Launch: grid (ceil(T/64), H), block 64, dynamic shared 2*BK*D*4 bytes
// with BK = 32 for D <= 128, else 16 (device.AttnTileK); D <= 256. Reference: reference.attention (scaled_dot_product_attention
// with is_causal, repeat_kv for GQA).
EXTERN_C __global__ void attention(float *out, const float *q, const float *k, const float *v, int T, int H, int KVH,
				   int D, float scale, int dt, int W) {
	DYN_SHARED(float, sm);
	const int BK = D > 128 ? ATT_BK / 2 : ATT_BK;
	float *ks = sm, *vs = sm + BK * D;
	int h = blockIdx.y, kvh = h / (H / KVH);
	int q0 = blockIdx.x * ATT_BQ, i = q0 + threadIdx.x;
	bool active = i < T;
	int qstride = H * D, kstride = KVH * D;
	float qv[ATT_MAXD], acc[ATT_MAXD];
	for (int d = 0; d < D; d++) {
		qv[d] = active ? round_dt(q[(size_t)i * qstride + h * D + d], dt) : 0.0f;
		acc[d] = 0.0f;
	}
	float m = -INFINITY, l = 0.0f;
	int kend = imin(T, q0 + ATT_BQ);
	// First key any query of the block sees, and this query's first key.
	int kbeg = W > 0 && q0 - W + 1 > 0 ? q0 - W + 1 : 0;
	int jmin = W > 0 && i - W + 1 > 0 ? i - W + 1 : 0;
	for (int k0 = kbeg; k0 < kend; k0 += BK) {
		__syncthreads();
		for (int idx = threadIdx.x; idx < BK * D; idx += blockDim.x) {
			int j = k0 + idx / D, d = idx % D;
			bool ok = j < T;
			ks[idx] = ok ? round_dt(k[(size_t)j * kstride + kvh * D + d], dt) : 0.0f;
			vs[idx] = ok ? round_dt(v[(size_t)j * kstride + kvh * D + d], dt) : 0.0f;
		}
		__syncthreads();
		if (!active) continue;
		int jmax = imin(k0 + BK, i + 1);
		for (int j = k0 > jmin ? k0 : jmin; j < jmax; j++) {
			const float *kj = ks + (j - k0) * D, *vj = vs + (j - k0) * D;
			float s = 0.0f;
			for (int d = 0; d < D; d++) s += qv[d] * kj[d];
			s *= scale;
			if (s > m) {
				float c = expf(m - s);
				l *= c;
				for (int d = 0; d < D; d++) acc[d] *= c;
				m = s;
			}
			float p = expf(s - m);
			l += p;
			for (int d = 0; d < D; d++) acc[d] += p * vj[d];
		}
	}
	if (active)
		for (int d = 0; d < D; d++) out[(size_t)i * qstride + h * D + d] = acc[d] / l;
}

// Tensor-core attention (backends/cuda/attention.go): the QKᵀ and PV
// products are strided batched GEMMs (cuBLAS on a GPU) around the two
// kernels below. Semantics are those of `attention` above: q, k, v rounded
// to the activation dtype dt, scores and softmax in fp32, fp32
// accumulation; the softmax weights are handed to the PV GEMM as a sum of
// dt-parts (bf16: three, fp16: two, fp32: one) so that the weights keep
// fp32 precision (≤ 2⁻²⁴ relative for bf16, 2⁻²² for fp16) on tensor cores.

// attn_prep writes the GEMM operands in head-major layout, each element
// rounded to dt: qa[h][t][d] = q[t][h][d], ka[h][t][d] = k[t][h/(H/KVH)][d],
// va likewise (the KV heads are expanded to the H query heads, so every
// batch of the GEMMs has the same strides).
// Launch: grid-stride over H·T·D elements (any grid). Reference:
// reference.attention (repeat_kv).
EXTERN_C __global__ void attn_prep(void *qa, void *ka, void *va, const float *q, const float *k, const float *v, int T,
				   int H, int KVH, int D, int dt) {
	int n = H * T * D, G = H / KVH;
	for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += gridDim.x * blockDim.x) {
		int d = idx % D, t = (idx / D) % T, h = idx / (D * T);
		size_t qi = ((size_t)t * H + h) * D + d, ki = ((size_t)t * KVH + h / G) * D + d;
		st_dt(qa, idx, q[qi], dt);
		st_dt(ka, idx, k[ki], dt);
		st_dt(va, idx, v[ki], dt);
	}
}

// attn_softmax turns row r = blockIdx.x of the scores s[rows][N] (fp32,
// already multiplied by the softmax scale; rows = heads × R query rows of
// one chunk, query t = r0 + r % R) into causal softmax weights:
//   w_j = exp(s_j - m) / Σ_{j'<=t} exp(s_j' - m),  m = max_{j<=t} s_j,  j <= t
//   w_j = 0                                                             j > t
// written as parts[0..nparts) of p (each [rows][N] in dtype dt) with
// part_0 = dt(w), part_i = dt(w - Σ_{i'<i} part_i') (exact residuals).
// Block: a multiple of 32 threads; the backend launches one warp per row
// (rows are many: heads × query rows; a warp streams a 2,048-key row in 64
// coalesced steps). Reference: reference.attention.
// With W > 0 (a sliding window) only keys j > t - W count (w_j = 0 below);
// W = 0 or W > t changes nothing. sinks, when not null, are gpt-oss's
// per-head attention sinks of the chunk's heads (sinks[r / R]): one more
// logit in the max and the denominator, weighting no value
// (modeling_gpt_oss.py eager_attention_forward).
EXTERN_C __global__ void attn_softmax(void *p, int nparts, const float *s, int rows, int N, int R, int r0, int dt, int W,
				      const float *sinks) {
	__shared__ float red[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	int t = r0 + r % R, n = imin(t + 1, N);
	int lo = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0;
	const float *x = s + (size_t)r * N;
	float mx = -INFINITY;
	for (int j = lo + threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, x[j]);
	mx = block_max(mx, red);
	if (sinks) mx = fmaxf(mx, sinks[r / R]);
	float se = 0.0f;
	for (int j = lo + threadIdx.x; j < n; j += blockDim.x) se += expf(x[j] - mx);
	se = block_sum(se, red);
	if (sinks) se += expf(sinks[r / R] - mx);
	float inv = 1.0f / se;
	size_t part = (size_t)rows * N;
	for (int j = threadIdx.x; j < N; j += blockDim.x) {
		float w = j >= lo && j < n ? expf(x[j] - mx) * inv : 0.0f;
		for (int i = 0; i < nparts; i++) {
			float c = round_dt(w, dt);
			st_dt(p, part * i + (size_t)r * N + j, c, dt);
			w -= c;
		}
	}
}
