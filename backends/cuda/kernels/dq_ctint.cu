// dq_ctint.cu: compressed-tensors int-quantized I8 weights (W8A8), decoded exactly
// as package quant (quant/ctint.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh (8 codes per thread read
// as one 8-byte word, scale and zero point once per thread when the group
// width is a multiple of 8, 16-byte stores; launched by
// backends/cuda/dq_ctint.go).
#include "dq.cuh"

// dq_int8: int-quantized (W8A8 and unpacked low-bit) I8 weights, formats.md 2.4
//   W[r][c] = round_to(sdt, f32(q - zp) * scale[(r/bh)*scols + c/bw]), zp I8 with
// the scale's indexing (nil: symmetric).
// Reference: quant's INT8 Linear.Dequantize.
EXTERN_C __global__ void dq_int8(void *out, int gemmDT, int N, int K, const signed char *w, const void *scale, int sdt,
				 int bh, int bw, int scols, const signed char *zp) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	size_t srow = (size_t)(r / bh) * scols;
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(w, 8);
	int q[DQ_V];
	if (vec) {
		uint2 u = dq_ld8(w + i);
		for (int j = 0; j < 4; j++) q[j] = (signed char)(u.x >> (8 * j)), q[j + 4] = (signed char)(u.y >> (8 * j));
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) q[j] = w[i + j];
	}
	float v[DQ_V];
	if (bw % DQ_V == 0) { // the thread's columns share one scale and zero point
		size_t si = srow + c0 / bw;
		int z = zp ? zp[si] : 0;
		float s = ld_dt(scale, si, sdt);
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = round_dt((float)(q[j] - z) * s, sdt);
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			size_t si = srow + (c0 + j) / bw;
			int z = zp ? zp[si] : 0;
			v[j] = round_dt((float)(q[j] - z) * ld_dt(scale, si, sdt), sdt);
		}
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
