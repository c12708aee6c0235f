// dq_awq.cu: AutoAWQ GEMM weights, decoded exactly as package quant
// (quant/awq.go); the product is exact.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_awq.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_awq: AutoAWQ GEMM (formats.md 4). qweight I32 [K][N/8], qzeros I32
// [K/gs][N/8], scales [K/gs][N]; column 8j+c sits in nibble REV[c] of word j.
//   W[o][i] = (u[i][o] - z[i/gs][o]) * s[i/gs][o]   (exact in f32)
// Reference: quant's AWQ Linear.Dequantize.
EXTERN_C __global__ void dq_awq(void *out, int gemmDT, int N, int K, const unsigned *qweight, const unsigned *qzeros,
				const void *scales, int sdt, int gs) {
	long long n = (long long)N * K;
	for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n; idx += (long long)gridDim.x * blockDim.x) {
		int o = (int)(idx / K), i = (int)(idx - (long long)o * K);
		int c = o & 7, nib = (c >> 1) + ((c & 1) << 2); // REV = [0,4,1,5,2,6,3,7]
		unsigned u = (qweight[(size_t)i * (N / 8) + o / 8] >> (nib * 4)) & 15u;
		int g = i / gs;
		unsigned z = (qzeros[(size_t)g * (N / 8) + o / 8] >> (nib * 4)) & 15u;
		float s = ld_dt(scales, (size_t)g * N + o, sdt);
		st_dt(out, idx, (float)((int)u - (int)z) * s, gemmDT);
	}
}
