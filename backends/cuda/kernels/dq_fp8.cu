// dq_fp8.cu: float-quantized FP8 E4M3 weights, decoded exactly as package quant
// (quant/fp8.go).
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_fp8.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_fp8: float-quantized / naive-quantized FP8 E4M3 weights (formats.md 2.3)
//   W[r][c] = round_to(sdt, E4M3(w[r][c]) * scale[(r/bh)*scols + c/bw])
// tensor: bh=N, bw=K, scols=1; channel: bh=1, bw=K, scols=1; block: bh, bw, scols=ceil(K/bw).
// Reference: quant's FP8 Linear.Dequantize.
EXTERN_C __global__ void dq_fp8(void *out, int gemmDT, int N, int K, const unsigned char *w, const void *scale, int sdt,
				int bh, int bw, int scols) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		int r = (int)(i / K), c = (int)(i - (long long)r * K);
		float s = ld_dt(scale, (size_t)(r / bh) * scols + c / bw, sdt);
		st_dt(out, i, round_dt(e4m3_to_f32(w[i]) * s, sdt), gemmDT);
	}
}

