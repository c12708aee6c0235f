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
// Launch: grid (ceil(T/64), H), block 64, dynamic shared 2*BK*D*4 bytes
// with BK = 32 for D <= 128, else 16 (device.AttnTileK); D <= 256. Reference: reference.attention (scaled_dot_product_attention
// with is_causal, repeat_kv for GQA).
EXTERN_C __global__ void attention(float *out, const float *q, const float *k, const float *v, int T, int H, int KVH,
				   int D, float scale, int dt) {
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
	for (int k0 = 0; k0 < kend; k0 += BK) {
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
		for (int j = k0; j < jmax; j++) {
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
