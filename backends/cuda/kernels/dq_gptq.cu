// dq_gptq.cu: AutoGPTQ / GPTQModel weights, decoded exactly as package quant
// (quant/gptq.go); the product is exact.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_gptq.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_gptq: GPTQ (formats.md 4). qweight I32 [K*b/32][N] packed along in,
// qzeros I32 [G][N*b/32] packed along out, scales [G][N] (sdt), g_idx [K].
//   W[o][i] = scales[g][o] * (u[i][o] - (z[g][o] + v1))   g = g_idx[i]  (exact in f32)
// v1 = 1 for checkpoint_format gptq (the off-by-one), 0 for gptq_v2. b in {2,4,8}.
// Reference: quant's GPTQ Linear.Dequantize.
EXTERN_C __global__ void dq_gptq(void *out, int gemmDT, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				 const void *scales, int sdt, const int *gidx, int b, int v1) {
	long long n = (long long)N * K;
	int per = 32 / b;
	unsigned mask = (1u << b) - 1u;
	for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n; idx += (long long)gridDim.x * blockDim.x) {
		int o = (int)(idx / K), i = (int)(idx - (long long)o * K);
		unsigned u = (qweight[(size_t)(i / per) * N + o] >> ((i % per) * b)) & mask;
		int g = gidx[i];
		unsigned z = (qzeros[(size_t)g * (N / per) + o / per] >> ((o % per) * b)) & mask;
		float s = ld_dt(scales, (size_t)g * N + o, sdt);
		st_dt(out, idx, s * (float)((int)u - ((int)z + v1)), gemmDT);
	}
}

