// dq_dense.cu: the unquantized F32/F16/BF16 weight converted to the GEMM dtype.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT, grid-stride over the N*K outputs with no barriers (launched
// by backends/cuda/dq_dense.go). See common.cuh for the dtype helpers.
#include "common.cuh"

// dq_dense converts a dense weight [N][K] of dtype idt to gemmDT. The element
// count N*K may exceed 2^31 (a large vocabulary's head in fp32), so it is
// indexed in 64 bits like the other dequantization kernels.
// Reference: the unquantized F32/F16/BF16 Linear.
EXTERN_C __global__ void dq_dense(void *out, int gemmDT, const void *in, int idt, int N, int K) {
	long long n = (long long)N * K;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		st_dt(out, i, ld_dt(in, i, idt), gemmDT);
}

