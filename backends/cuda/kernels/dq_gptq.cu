// dq_gptq.cu: AutoGPTQ / GPTQModel weights, decoded exactly as package quant
// (quant/gptq.go); the product is exact.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the column-packed geometry of dq.cuh: qweight is stored
// [K*b/32][N], so adjacent threads take adjacent output rows o and a warp
// reads 32 adjacent words of one qweight row; each thread writes 16
// consecutive inputs i of its row (two 16-byte stores of bf16), and reads
// the scale and zero point once per group (launched by
// backends/cuda/dq_gptq.go).
#include "dq.cuh"

// dq_gptq: GPTQ (formats.md 4). qweight I32 [K*b/32][N] packed along in,
// qzeros I32 [G][N*b/32] packed along out, scales [G][N] (sdt), g_idx [K].
//   W[o][i] = scales[g][o] * (u[i][o] - (z[g][o] + v1))   g = g_idx[i]  (exact in f32)
// v1 = 1 for checkpoint_format gptq (the off-by-one), 0 for gptq_v2. b in {2,4,8}.
// Reference: quant's GPTQ Linear.Dequantize.
EXTERN_C __global__ void dq_gptq(void *out, int gemmDT, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				 const void *scales, int sdt, const int *gidx, int b, int v1) {
	int o = blockIdx.x * DQ_TX + threadIdx.x;
	int i0 = (blockIdx.y * DQ_TY + threadIdx.y) * DQ_CV;
	if (o >= N || i0 >= K) return;
	int n = imin(DQ_CV, K - i0);
	int per = 32 / b; // 16, 8 or 4: i0 is a multiple of per
	unsigned mask = (1u << b) - 1u;
	float v[DQ_CV];
	int gc = -1;
	float s = 0.0f;
	int zv = 0;
	unsigned word = 0;
	for (int m = 0; m < DQ_CV; m++) { // constant trip count: v stays in registers
		if (m >= n) break;
		int k = m & (per - 1);
		if (k == 0) word = qweight[(size_t)((i0 + m) / per) * N + o]; // warp: 32 adjacent words
		int g = gidx[i0 + m]; // the same for the whole warp (a broadcast)
		if (g != gc) {
			gc = g;
			unsigned z = (qzeros[(size_t)g * (N / per) + o / per] >> ((o % per) * b)) & mask;
			zv = (int)z + v1;
			s = ld_dt(scales, (size_t)g * N + o, sdt);
		}
		unsigned u = (word >> (k * b)) & mask;
		v[m] = s * (float)((int)u - zv);
	}
	size_t at = (size_t)o * K + i0;
	bool vec = dq_vec_out(out, K);
	dq_store(out, at, v, imin(n, DQ_V), gemmDT, vec);
	if (n > DQ_V) dq_store(out, at + DQ_V, v + DQ_V, n - DQ_V, gemmDT, vec);
}
