// dq.cuh: launch geometry, vector loads and stores shared by the
// dequantization kernels (kernels/dq_*.cu), for nvcc and for the emulator.
//
// Every dequantization kernel writes the per-Linear scratch W[N][K]
// (row-major [out][in]) in the GEMM dtype. The grid is two-dimensional and
// no thread divides a 64-bit index:
//
//   row-major formats (dense, compressed-tensors pack/int, FP8, NVFP4,
//   MXFP4): block DQ_TX × DQ_TY threads, thread (x, y) of block (bx, by)
//   writes the DQ_V consecutive values of row r = bx·DQ_TY + y from column
//   c0 = (by·DQ_TX + x)·DQ_V. A warp covers DQ_TX·DQ_V = 256 consecutive
//   columns of one row: it reads adjacent packed words and writes 512
//   contiguous bytes of bf16 with one 16-byte store per thread. Rows go on
//   grid x (up to 2^31-1, a vocabulary-sized head fits), column tiles on y.
//   Grid (ceil(N/DQ_TY), ceil(K/(DQ_TX·DQ_V))).
//
//   formats packed across the output dimension (GPTQ's qweight packs along
//   in but is stored [K·b/32][N]; AWQ's qweight is [K][N/8]): adjacent
//   threads take adjacent output rows (GPTQ) or adjacent words of 8 output
//   rows (AWQ), so a warp reads one contiguous run of words; each thread
//   writes DQ_CV = 16 consecutive values (32 bytes of bf16: one full
//   sector) of each of its rows. Grid (ceil(N/DQ_TX) [GPTQ] or
//   ceil(N/8/DQ_TX) [AWQ], ceil(K/(DQ_TY·DQ_CV))).
//
// backends/cuda/dq_geometry.go mirrors these numbers (checked by
// TestDqGeometryMatchesHeader). Vector paths need K % 8 == 0 and 16-byte
// aligned operands (the arenas align every tensor to 256 bytes); otherwise
// (odd shapes) the same per-element formula runs with scalar accesses, so
// the values are the same either way. Loops over a thread's values run to
// the constant DQ_V or DQ_CV with `if (j < n)` inside, so that nvcc unrolls
// them and keeps the per-thread arrays in registers, not local memory.
#ifndef QPPL_DQ_CUH
#define QPPL_DQ_CUH

#include "common.cuh"

#define DQ_V 8   // values per thread, row-major formats
#define DQ_CV 16 // values per thread and row, GPTQ and AWQ
#define DQ_TX 32 // threads per block along x (one warp)
#define DQ_TY 8  // threads per block along y

// dq_aligned reports whether p is a multiple of a bytes.
__device__ __forceinline__ bool dq_aligned(const void *p, unsigned a) { return ((uintptr_t)p & (a - 1)) == 0; }

// Vector memory accesses. A misaligned vector access faults on a GPU; the
// emulator reports it as an error instead of performing it.
__device__ __forceinline__ void dq_st16(void *p, uint4 v) {
#ifdef QPPL_EMU
	if (!dq_aligned(p, 16)) emu_raise("misaligned 16-byte vector store");
	memcpy(p, &v, 16);
#else
	*(uint4 *)p = v;
#endif
}
__device__ __forceinline__ uint4 dq_ld16(const void *p) {
#ifdef QPPL_EMU
	uint4 v = {0, 0, 0, 0};
	if (!dq_aligned(p, 16)) emu_raise("misaligned 16-byte vector load");
	else memcpy(&v, p, 16);
	return v;
#else
	return *(const uint4 *)p;
#endif
}
__device__ __forceinline__ uint2 dq_ld8(const void *p) {
#ifdef QPPL_EMU
	uint2 v = {0, 0};
	if (!dq_aligned(p, 8)) emu_raise("misaligned 8-byte vector load");
	else memcpy(&v, p, 8);
	return v;
#else
	return *(const uint2 *)p;
#endif
}
__device__ __forceinline__ unsigned dq_ld4(const void *p) {
#ifdef QPPL_EMU
	unsigned v = 0;
	if (!dq_aligned(p, 4)) emu_raise("misaligned 4-byte load");
	else memcpy(&v, p, 4);
	return v;
#else
	return *(const unsigned *)p;
#endif
}

// dq_bits16 returns v rounded to bf16 (dt DT_BF16) or fp16, as st_dt stores it.
__device__ __forceinline__ unsigned dq_bits16(float v, int dt) {
	if (dt == DT_BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
	return __half_as_ushort(__float2half_rn(v));
}

// dq_store writes v[0:n) to out[i:i+n) in dtype dt. With vec (n == DQ_V,
// i a multiple of 8, out 16-byte aligned) bf16/fp16 go out as one 16-byte
// store, fp32 as two; otherwise element by element. The values are st_dt's.
__device__ __forceinline__ void dq_store(void *out, size_t i, const float *v, int n, int dt, bool vec) {
	if (vec && n == DQ_V) {
		if (dt == DT_F32) {
			float *o = (float *)out + i;
			dq_st16(o, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
			dq_st16(o + 4, make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7])));
		} else {
			unsigned w[4];
			for (int j = 0; j < 4; j++) w[j] = dq_bits16(v[2 * j], dt) | dq_bits16(v[2 * j + 1], dt) << 16;
			dq_st16((unsigned short *)out + i, make_uint4(w[0], w[1], w[2], w[3]));
		}
		return;
	}
	for (int j = 0; j < DQ_V; j++) if (j < n) st_dt(out, i + j, v[j], dt);
}

// dq_vec_out reports whether rows of K values of dtype dt starting at out
// can take 16-byte stores of DQ_V values.
__device__ __forceinline__ bool dq_vec_out(const void *out, int K) { return (K & 7) == 0 && dq_aligned(out, 16); }

// dq_row_tile locates the calling thread in the row-major geometry: row r,
// first column c0 and the number of columns n it writes (0: none).
__device__ __forceinline__ int dq_row_tile(int N, int K, int *r, int *c0) {
	*r = blockIdx.x * DQ_TY + threadIdx.y;
	*c0 = (blockIdx.y * DQ_TX + threadIdx.x) * DQ_V;
	if (*r >= N || *c0 >= K) return 0;
	return imin(DQ_V, K - *c0);
}

#endif
