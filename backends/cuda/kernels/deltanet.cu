// deltanet.cu: Qwen3.5's operations (arch/qwen3_5.go): the Gated DeltaNet
// (causal depthwise conv1d + silu, l2-normed q/k, the gated delta rule in
// its recurrent form, the gated RMSNorm), the gated attention's query/gate
// split and sigmoid gate, partial rotary embeddings and the shared
// expert's sigmoid-gated add. No kernel uses barriers.
// Reference: reference/deltanet.go, reference.selfAttention, reference.sharedExpert.
#include "common.cuh"

// conv1d_silu: out[t][c] = silu(Σ_j w[c][j]·x[t−(K−1)+j][c]) over the rows
// that exist (causal_conv1d_fn: F.conv1d with padding K−1, groups = channels,
// no bias, cut to T). x, out [T][Cd]; w [Cd][K].
EXTERN_C __global__ void conv1d_silu(float *out, const float *x, const float *w, int T, int Cd, int K) {
	int n = T * Cd;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / Cd, c = i - t * Cd;
		float s = 0.0f;
		for (int j = 0; j < K; j++) {
			int src = t - (K - 1) + j;
			if (src >= 0) s += w[c * K + j] * x[(size_t)src * Cd + c];
		}
		out[i] = s / (1.0f + expf(-s));
	}
}

// l2norm_qk normalises in place, in each of the T rows of width Cd, the
// 2·nk heads of width dk that start the row (queries then keys):
// x·rsqrt(Σx² + 1e-6) (transformers' l2norm, eps 1e-6); the query heads
// (the first nk) are also multiplied by qscale = dk^-0.5.
EXTERN_C __global__ void l2norm_qk(float *x, int T, int Cd, int nk, int dk, float qscale) {
	int n = T * 2 * nk;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int t = i / (2 * nk), h = i - t * 2 * nk;
		float *v = x + (size_t)t * Cd + (size_t)h * dk;
		float ss = 0.0f;
		for (int k = 0; k < dk; k++) ss += v[k] * v[k];
		float inv = 1.0f / sqrtf(ss + 1e-6f);
		if (h < nk) inv *= qscale;
		for (int k = 0; k < dk; k++) v[k] *= inv;
	}
}

// delta_rule runs the gated delta rule token by token: thread i = j·dv + c
// owns column c of value head j's state S[dk] (state[k·nv·dv + i], zeroed
// here: adjacent threads touch adjacent words), which evolves independently
// of the other columns:
//
//	S ← exp(g)·S;  u = β·(v_c − S·k);  S ← S + u·k;  out[t][j·dv+c] = S·q
//
// with q, k the (l2-normed) query/key head j/(nv/nk) and v_c value channel
// c of head j, all read from qkv [T][Cd] (q | k | v), β = sigmoid(b[t][j])
// and g = −exp(alog[j])·softplus(a[t][j] + dtb[j]) (softplus: x above 20).
EXTERN_C __global__ void delta_rule(float *out, float *state, const float *qkv, const float *b, const float *a, const float *alog,
				    const float *dtb, int T, int Cd, int nk, int nv, int dk, int dv) {
	int n = nv * dv;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int j = i / dv, c = i - j * dv, kh = j / (nv / nk);
		float *S = state + i;
		for (int k = 0; k < dk; k++) S[(size_t)k * n] = 0.0f;
		float A = expf(alog[j]);
		for (int t = 0; t < T; t++) {
			const float *row = qkv + (size_t)t * Cd;
			const float *q = row + kh * dk, *kk = row + nk * dk + kh * dk;
			float v = row[2 * nk * dk + j * dv + c];
			float beta = 1.0f / (1.0f + expf(-b[t * nv + j]));
			float x = a[t * nv + j] + dtb[j];
			float sp = x > 20.0f ? x : log1pf(expf(x));
			float decay = expf(-A * sp);
			float mem = 0.0f;
			for (int k = 0; k < dk; k++) {
				S[(size_t)k * n] *= decay;
				mem += S[(size_t)k * n] * kk[k];
			}
			float u = (v - mem) * beta;
			float o = 0.0f;
			for (int k = 0; k < dk; k++) {
				S[(size_t)k * n] += kk[k] * u;
				o += S[(size_t)k * n] * q[k];
			}
			out[(size_t)t * n + i] = o;
		}
	}
}

// gated_rmsnorm: for each of rows rows of width n, x ← w·x·rsqrt(mean(x²)+eps)·silu(z)
// (Qwen3_5RMSNormGated: weight without offset, gate silu).
EXTERN_C __global__ void gated_rmsnorm(float *x, const float *z, const float *w, int rows, int n, float eps) {
	for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
		float *v = x + (size_t)r * n;
		const float *g = z + (size_t)r * n;
		float ss = 0.0f;
		for (int k = 0; k < n; k++) ss += v[k] * v[k];
		float inv = 1.0f / sqrtf(ss / n + eps);
		for (int k = 0; k < n; k++) v[k] = w[k] * (v[k] * inv) * (g[k] / (1.0f + expf(-g[k])));
	}
}

// split_q_gate splits q_proj's output qg [T][H][2·D] (per head the query,
// then the gate) into q [T][H·D] and gate [T][H·D] (Qwen3_5Attention).
EXTERN_C __global__ void split_q_gate(float *q, float *gate, const float *qg, int T, int H, int D) {
	int n = T * H * D;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int d = i % D, th = i / D;
		q[i] = qg[(size_t)th * 2 * D + d];
		gate[i] = qg[(size_t)th * 2 * D + D + d];
	}
}

// sigmoid_mul: x[i] *= sigmoid(g[i]) (the attention output gate).
EXTERN_C __global__ void sigmoid_mul(float *x, const float *g, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= 1.0f / (1.0f + expf(-g[i]));
}

// rope_partial is rope over the first 2·R dimensions of each head of
// x[T][H][D] (rotate-half within them, the rest unchanged; tables
// cos/sin[T][D/2], the first R entries of each row used).
EXTERN_C __global__ void rope_partial(float *x, const float *cs, const float *sn, int T, int H, int D, int R) {
	int half = D / 2, n = T * H * R;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int j = i % R, th = i / R, t = th / H;
		float *row = x + (size_t)th * D;
		float c = cs[t * half + j], s = sn[t * half + j];
		float x1 = row[j], x2 = row[j + R];
		row[j] = x1 * c - x2 * s;
		row[j + R] = x2 * c + x1 * s;
	}
}

// sigmoid_add_rows: x[r][c] += sigmoid(s[r])·y[r][c] (the shared expert,
// scaled by sigmoid(shared_expert_gate(h))).
EXTERN_C __global__ void sigmoid_add_rows(float *x, const float *y, const float *s, int rows, int cols) {
	int n = rows * cols;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] += y[i] / (1.0f + expf(-s[i / cols]));
}
