// dq_awq.cu: AutoAWQ GEMM weights, decoded exactly as package quant
// (quant/awq.go); the product is exact.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the column-packed geometry of dq.cuh: a qweight word holds
// 8 output rows of one input, so adjacent threads take adjacent words j
// (output rows 8j..8j+7) and a warp reads 32 adjacent words of one qweight
// row; each thread reads 16 words (inputs i0..i0+15) and writes 16
// consecutive values of each of its 8 rows (two 16-byte stores of bf16
// per row), with scale and zero point read once per group and row
// (launched by backends/cuda/dq_awq.go).
#include "dq.cuh"

// dq_awq: AutoAWQ GEMM (formats.md 4). qweight I32 [K][N/8], qzeros I32
// [K/gs][N/8], scales [K/gs][N]; column 8j+c sits in nibble REV[c] of word j.
//   W[o][i] = (u[i][o] - z[i/gs][o]) * s[i/gs][o]   (exact in f32)
// Reference: quant's AWQ Linear.Dequantize.
EXTERN_C __global__ void dq_awq(void *out, int gemmDT, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				const void *scales, int sdt, int gs) {
	int j = blockIdx.x * DQ_TX + threadIdx.x, W = N / 8;
	int i0 = (blockIdx.y * DQ_TY + threadIdx.y) * DQ_CV;
	if (j >= W || i0 >= K) return;
	int n = imin(DQ_CV, K - i0);
	unsigned word[DQ_CV];
	for (int m = 0; m < DQ_CV; m++) if (m < n) word[m] = qweight[(size_t)(i0 + m) * W + j]; // warp: 32 adjacent words
	int g0 = i0 / gs, next0 = (g0 + 1) * gs;
	bool vec = dq_vec_out(out, K);
	for (int c = 0; c < 8; c++) {
		int o = 8 * j + c, nib = (c >> 1) + ((c & 1) << 2); // REV = [0,4,1,5,2,6,3,7]
		int g = g0, next = next0;
		unsigned z = (qzeros[(size_t)g * W + j] >> (nib * 4)) & 15u;
		float s = ld_dt(scales, (size_t)g * N + o, sdt);
		float v[DQ_CV];
		for (int m = 0; m < DQ_CV; m++) if (m < n) {
			if (i0 + m == next) { // the next group starts inside the thread's 16 inputs
				g++, next += gs;
				z = (qzeros[(size_t)g * W + j] >> (nib * 4)) & 15u;
				s = ld_dt(scales, (size_t)g * N + o, sdt);
			}
			unsigned u = (word[m] >> (nib * 4)) & 15u;
			v[m] = (float)((int)u - (int)z) * s;
		}
		size_t at = (size_t)o * K + i0;
		dq_store(out, at, v, imin(n, DQ_V), gemmDT, vec);
		if (n > DQ_V) dq_store(out, at + DQ_V, v + DQ_V, n - DQ_V, gemmDT, vec);
	}
}
