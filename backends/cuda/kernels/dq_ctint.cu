// dq_ctint.cu: compressed-tensors int-quantized I8 weights (W8A8), decoded exactly
// as package quant (quant/ctint.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_ctint.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_int8: int-quantized (W8A8 and unpacked low-bit) I8 weights, formats.md 2.4
//   W[r][c] = round_to(sdt, f32(q - zp) * scale[(r/bh)*scols + c/bw]), zp I8 with
// the scale's indexing (nil: symmetric).
// Reference: quant's INT8 Linear.Dequantize.
EXTERN_C __global__ void dq_int8(void *out, int gemmDT, int N, int K, const signed char *w, const void *scale, int sdt,
				 int bh, int bw, int scols, const signed char *zp) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		size_t si = (size_t)(r / bh) * scols + c / bw;
		int z = zp ? zp[si] : 0;
		st_dt(out, i, round_dt((float)(w[i] - z) * ld_dt(scale, si, sdt), sdt), gemmDT);
	}
}

