// dq_nvfp4.cu: compressed-tensors nvfp4-pack-quantized and ModelOpt NVFP4
// weights, decoded exactly as package quant (quant/nvfp4.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_nvfp4.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_nvfp4: nvfp4-pack-quantized, formats.md 2.2. packed U8 [N][K/2], low
// nibble = even column; scale F8_E4M3 [N][K/16]; gscale the global scale (a
// divisor), or with scale2 = 1 ModelOpt's weight_scale_2 (a multiplier).
//   W = round_to(rdt, E2M1(code) * (f32(E4M3(scale[r][c/16])) / gscale))  (f32 ops;
//   rdt is the model dtype CT decompresses to); scale2: * gscale instead of / gscale
// Reference: quant's NVFP4 Linear.Dequantize.
EXTERN_C __global__ void dq_nvfp4(void *out, int gemmDT, int N, int K, const unsigned char *packed,
				  const unsigned char *scale, float gscale, int scale2, int rdt) {
	long long n = (long long)N * K;
	int sc = K / 16;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		unsigned byte = packed[(size_t)r * (K / 2) + c / 2];
		unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
		float s = e4m3_to_f32(scale[(size_t)r * sc + c / 16]);
		float eff = scale2 ? s * gscale : s / gscale;
		st_dt(out, i, round_dt(e2m1_to_f32(code) * eff, rdt), gemmDT);
	}
}
