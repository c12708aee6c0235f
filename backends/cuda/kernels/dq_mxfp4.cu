// dq_mxfp4.cu: compressed-tensors mxfp4-pack-quantized weights, decoded
// exactly as package quant (quant/mxfp4.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh (8 codes per thread read
// as one 4-byte word, one E8M0 scale per thread, 16-byte stores; launched
// by backends/cuda/dq_mxfp4.go).
#include "dq.cuh"

// dq_mxfp4: mxfp4-pack-quantized. packed U8 [N][K/2], low nibble = even
// column (as NVFP4); scale U8 [N][K/32] E8M0 exponents.
//   W = E2M1(code) * 2^(scale[r][c/32] - 127)   (exact in f32)
// Reference: quant's MXFP4 Linear.Dequantize.
EXTERN_C __global__ void dq_mxfp4(void *out, int gemmDT, int N, int K, const unsigned char *packed,
				  const unsigned char *scale) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	const unsigned char *row = packed + (size_t)r * (K / 2);
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(packed, 4);
	float v[DQ_V];
	if (vec) { // 8 codes = one word; the 8 columns share a 32-column scale
		unsigned u = dq_ld4(row + c0 / 2);
		float eff = e8m0_to_f32(scale[(size_t)r * (K / 32) + c0 / 32]);
		for (int j = 0; j < DQ_V; j++) v[j] = round_dt(e2m1_to_f32((u >> (4 * j)) & 15u) * eff, DT_F32);
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			int c = c0 + j;
			unsigned byte = row[c / 2];
			unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
			v[j] = round_dt(e2m1_to_f32(code) * e8m0_to_f32(scale[(size_t)r * (K / 32) + c / 32]), DT_F32);
		}
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
