// logits.cu: the fused final step. Only a few bytes per scored position
// leave the device: the target's NLL (4 bytes), optionally the KL
// divergence against base log-probs (4 bytes) and the top-k ids (4 bytes
// each).
#include "common.cuh"

#define BASE_NONE 0
#define BASE_F32 1 // base[rows][V] float32 log-probs
#define BASE_U16 2 // llama.cpp records: base[rows][V] uint16 q, lp = aux[2r]*q + aux[2r+1]
                   // (aux = float32 scale, min_log_prob); lp <= -16 counts as probability 0

__device__ __forceinline__ void block_argmax(float &v, int &ix, float *rv, int *ri) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, v, o);
		int oi = __shfl_xor_sync(0xffffffffu, ix, o);
		if (ov > v || (ov == v && oi < ix)) { v = ov; ix = oi; }
	}
	__syncthreads();
	if (lane == 0) { rv[w] = v; ri[w] = ix; }
	__syncthreads();
	v = rv[0];
	ix = ri[0];
	for (int i = 1; i < nw; i++)
		if (rv[i] > v || (rv[i] == v && ri[i] < ix)) { v = rv[i]; ix = ri[i]; }
}

// logits_stats processes row r = blockIdx.x of logits[rows][V] (fp32):
//   lse = max + log Σ exp(x - max)                       (fp32, fixed order)
//   nll[r] = lse - x[targets[r]]          (targets[r] < 0: no target, NaN)
//   kl[r]  = Σ_v exp(b_v) (b_v - (x_v - lse)) over base log-probs b (if any)
//   top[r*topk + j] = j-th largest logit's id, ties to the lower id (-1 if none)
// Block: 256 threads (a multiple of 32). Reference: reference.logSoftmax,
// the NLL and KL of backends.Scores and Request.TopK.
EXTERN_C __global__ void logits_stats(const float *logits, int rows, int V, const int *targets, float *nll,
				      const void *base, int baseKind, const float *baseAux, float *kl, int topk, int *top) {
	__shared__ float red[32];
	__shared__ int redi[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	const float *x = logits + (size_t)r * V;
	float mx = -INFINITY;
	for (int c = threadIdx.x; c < V; c += blockDim.x) mx = fmaxf(mx, x[c]);
	mx = block_max(mx, red);
	float se = 0.0f;
	for (int c = threadIdx.x; c < V; c += blockDim.x) se += expf(x[c] - mx);
	se = block_sum(se, red);
	float lse = mx + logf(se);
	if (threadIdx.x == 0) {
		int t = targets[r];
		nll[r] = (t >= 0 && t < V) ? lse - x[t] : __uint_as_float(0x7fc00000u);
	}
	if (baseKind != BASE_NONE) {
		float acc = 0.0f;
		float sc = baseKind == BASE_U16 ? baseAux[2 * r] : 0.0f, mn = baseKind == BASE_U16 ? baseAux[2 * r + 1] : 0.0f;
		for (int c = threadIdx.x; c < V; c += blockDim.x) {
			float b;
			if (baseKind == BASE_F32) {
				b = ((const float *)base)[(size_t)r * V + c];
			} else {
				unsigned code = ((const unsigned short *)base)[(size_t)r * V + c];
				b = sc * (float)code + mn;
				if (b <= -16.0f) b = -INFINITY; // llama.cpp's floor
				if (b > 0.0f) b = 0.0f;
			}
			if (b > -INFINITY) acc += expf(b) * (b - (x[c] - lse));
		}
		acc = block_sum(acc, red);
		if (threadIdx.x == 0) kl[r] = acc;
	}
	float pv = INFINITY;
	int pi = -1;
	for (int kk = 0; kk < topk; kk++) {
		float bv = -INFINITY;
		int bi = 0x7fffffff;
		for (int c = threadIdx.x; c < V; c += blockDim.x) {
			float v = x[c];
			bool after = v < pv || (v == pv && c > pi);
			if (after && (v > bv || (v == bv && c < bi))) { bv = v; bi = c; }
		}
		block_argmax(bv, bi, red, redi);
		if (threadIdx.x == 0) top[(size_t)r * topk + kk] = bi == 0x7fffffff ? -1 : bi;
		pv = bv;
		pi = bi;
	}
}

// log_softmax_rows normalizes row r = blockIdx.x of logits[rows][V] (fp32)
// in place into log-probabilities, x_c - lse with the fp32 log-sum-exp of
// logits_stats (same reduction order, so the values agree with its NLL):
// the LogProbs path copies normalized rows instead of normalizing V values
// per position on the host. Block: 256 threads (a multiple of 32).
// Reference: reference.logSoftmax.
EXTERN_C __global__ void log_softmax_rows(float *logits, int rows, int V) {
	__shared__ float red[32];
	int r = blockIdx.x;
	if (r >= rows) return;
	float *x = logits + (size_t)r * V;
	float mx = -INFINITY;
	for (int c = threadIdx.x; c < V; c += blockDim.x) mx = fmaxf(mx, x[c]);
	mx = block_max(mx, red);
	float se = 0.0f;
	for (int c = threadIdx.x; c < V; c += blockDim.x) se += expf(x[c] - mx);
	se = block_sum(se, red);
	float lse = mx + logf(se);
	__syncthreads(); // every thread has read x before any writes it
	for (int c = threadIdx.x; c < V; c += blockDim.x) x[c] -= lse;
}
