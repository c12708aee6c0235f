// dq_dense.cu: the unquantized F32/F16/BF16 weight converted to the GEMM dtype.
// Writes the per-Linear scratch W[N][K] (row-major [out][in]) in the GEMM
// dtype gemmDT in the row-major geometry of dq.cuh (8 values per thread,
// 16-byte loads and stores; launched by backends/cuda/dq_dense.go).
#include "dq.cuh"

// dq_dense converts a dense weight [N][K] of dtype idt to gemmDT. The
// element count N*K may exceed 2^31 (a large vocabulary's head in fp32):
// rows are on grid x and the row offset is a 64-bit product, never a
// 64-bit division.
// Reference: the unquantized F32/F16/BF16 Linear.
EXTERN_C __global__ void dq_dense(void *out, int gemmDT, const void *in, int idt, int N, int K) {
	int r, c0;
	int n = dq_row_tile(N, K, &r, &c0);
	if (n == 0) return;
	size_t i = (size_t)r * K + c0;
	bool vec = n == DQ_V && dq_vec_out(out, K) && dq_aligned(in, 16);
	float v[DQ_V];
	if (vec && idt == DT_F32) {
		uint4 a = dq_ld16((const float *)in + i), b = dq_ld16((const float *)in + i + 4);
		unsigned u[DQ_V] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
		for (int j = 0; j < DQ_V; j++) v[j] = __uint_as_float(u[j]);
	} else if (vec) {
		uint4 a = dq_ld16((const unsigned short *)in + i);
		unsigned u[4] = {a.x, a.y, a.z, a.w};
		for (int j = 0; j < DQ_V; j++) {
			unsigned short h = (unsigned short)(u[j >> 1] >> ((j & 1) * 16));
			v[j] = idt == DT_BF16 ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
		}
	} else {
		for (int j = 0; j < DQ_V; j++) if (j < n) v[j] = ld_dt(in, i + j, idt);
	}
	dq_store(out, i, v, n, gemmDT, vec);
}
