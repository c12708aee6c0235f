// dq_nvfp4.cu: compressed-tensors nvfp4-pack-quantized and ModelOpt NVFP4
// weights, decoded exactly as package quant (quant/nvfp4.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh (8 codes per thread read
// as one 4-byte word, one block scale per thread, 16-byte stores; launched
// by backends/cuda/dq_nvfp4.go).
#include "dq.cuh"

// dq_nvfp4: nvfp4-pack-quantized, formats.md 2.2. packed U8 [N][K/2], low
// nibble = even column; scale F8_E4M3 [N][K/16]; gscale the global scale (a
// divisor), or with scale2 = 1 ModelOpt's weight_scale_2 (a multiplier).
//   W = round_to(rdt, E2M1(code) * (f32(E4M3(scale[r][c/16])) / gscale))  (f32 ops;
//   rdt is the model dtype CT decompresses to); scale2: * gscale instead of / gscale
// Reference: quant's NVFP4 Linear.Dequantize.
EXTERN_C __global__ void dq_nvfp4(void *out, int gemmDT, int N, int K, const unsigned char *packed,
				  const unsigned char *scale, float gscale, int scale2, int rdt) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	const unsigned char *row = packed + (size_t)r * (K / 2);
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(packed, 4);
	float v[DQ_V];
	if (vec) { // 8 codes = one word; the 8 columns share a 16-column block scale
		unsigned u = dq_ld4(row + c0 / 2);
		float s = e4m3_to_f32(scale[(size_t)r * (K / 16) + c0 / 16]);
		float eff = scale2 ? s * gscale : s / gscale;
		for (int j = 0; j < DQ_V; j++) v[j] = round_dt(e2m1_to_f32((u >> (4 * j)) & 15u) * eff, rdt);
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) {
			int c = c0 + j;
			unsigned byte = row[c / 2];
			unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
			float s = e4m3_to_f32(scale[(size_t)r * (K / 16) + c / 16]);
			float eff = scale2 ? s * gscale : s / gscale;
			v[j] = round_dt(e2m1_to_f32(code) * eff, rdt);
		}
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
