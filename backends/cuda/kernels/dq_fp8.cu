// dq_fp8.cu: float-quantized FP8 E4M3 weights, decoded exactly as package quant
// (quant/fp8.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh (8 codes per thread read
// as one 8-byte word, one scale per thread when the block width is a
// multiple of 8, 16-byte stores; launched by backends/cuda/dq_fp8.go).
#include "dq.cuh"

// dq_fp8: float-quantized / naive-quantized FP8 E4M3 weights (formats.md 2.3)
//   W[r][c] = round_to(sdt, E4M3(w[r][c]) * scale[(r/bh)*scols + c/bw])
// tensor: bh=N, bw=K, scols=1; channel: bh=1, bw=K, scols=1; block: bh, bw, scols=ceil(K/bw).
// Reference: quant's FP8 Linear.Dequantize.
EXTERN_C __global__ void dq_fp8(void *out, int gemmDT, int N, int K, const unsigned char *w, const void *scale, int sdt,
				int bh, int bw, int scols) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	size_t srow = (size_t)(r / bh) * scols;
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(w, 8);
	unsigned char code[DQ_V];
	if (vec) {
		uint2 u = dq_ld8(w + i);
		for (int j = 0; j < 4; j++) code[j] = (unsigned char)(u.x >> (8 * j)), code[j + 4] = (unsigned char)(u.y >> (8 * j));
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) code[j] = w[i + j];
	}
	float v[DQ_V];
	if (bw % DQ_V == 0) { // the thread's columns share one scale
		float s = ld_dt(scale, srow + c0 / bw, sdt);
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = round_dt(e4m3_to_f32(code[j]) * s, sdt);
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = round_dt(e4m3_to_f32(code[j]) * ld_dt(scale, srow + (c0 + j) / bw, sdt), sdt);
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
