// dq_mxfp4.cu: compressed-tensors mxfp4-pack-quantized weights, decoded
// exactly as package quant (quant/mxfp4.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_mxfp4.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_mxfp4: mxfp4-pack-quantized. packed U8 [N][K/2], low nibble = even
// column (as NVFP4); scale U8 [N][K/32] E8M0 exponents.
//   W = E2M1(code) * 2^(scale[r][c/32] - 127)   (exact in f32)
// Reference: quant's MXFP4 Linear.Dequantize.
EXTERN_C __global__ void dq_mxfp4(void *out, int gemmDT, int N, int K, const unsigned char *packed,
				  const unsigned char *scale) {
	long long n = (long long)N * K;
	int sc = K / 32;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		unsigned byte = packed[(size_t)r * (K / 2) + c / 2];
		unsigned code = (c & 1) ? byte >> 4 : byte & 15u;
		float eff = e8m0_to_f32(scale[(size_t)r * sc + c / 32]);
		st_dt(out, i, round_dt(e2m1_to_f32(code) * eff, DT_F32), gemmDT);
	}
}
