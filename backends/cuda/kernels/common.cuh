// common.cuh: helpers shared by every kernel of backends/cuda/kernels, for
// nvcc and for the host compiler under emu/shim.h (which defines QPPL_EMU).
//
// Numbers: all accumulation is fp32. Element types are selected at run time
// by a dtype code (0 fp32, 1 bf16, 2 fp16: device.DType), so one PTX entry
// serves every precision. Reductions run in a fixed order (strided partial
// sums per thread, then a butterfly inside each warp, then the warp results
// summed in warp order by every thread), so results are deterministic.
#ifndef QPPL_COMMON_CUH
#define QPPL_COMMON_CUH

#ifndef QPPL_EMU
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#define EXTERN_C extern "C"
#define DYN_SHARED(T, name)                                                                                            \
	extern __shared__ __align__(16) unsigned char qppl_dyn_smem[];                                                  \
	T *name = (T *)qppl_dyn_smem
#else
#define DYN_SHARED(T, name) T *name = (T *)emu_dynamic_shared()
#endif

#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

// ld_dt returns element i of p (dtype dt) as float (exact).
__device__ __forceinline__ float ld_dt(const void *p, size_t i, int dt) {
	if (dt == DT_F32) return ((const float *)p)[i];
	unsigned short h = ((const unsigned short *)p)[i];
	if (dt == DT_BF16) return __bfloat162float(__ushort_as_bfloat16(h));
	return __half2float(__ushort_as_half(h));
}

// st_dt stores v into element i of p (dtype dt), rounding to nearest even.
__device__ __forceinline__ void st_dt(void *p, size_t i, float v, int dt) {
	if (dt == DT_F32) {
		((float *)p)[i] = v;
	} else if (dt == DT_BF16) {
		((unsigned short *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
	} else {
		((unsigned short *)p)[i] = __half_as_ushort(__float2half_rn(v));
	}
}

// round_dt rounds v to the precision of dtype dt (round to nearest even).
__device__ __forceinline__ float round_dt(float v, int dt) {
	if (dt == DT_BF16) return __bfloat162float(__float2bfloat16_rn(v));
	if (dt == DT_F16) return __half2float(__float2half_rn(v));
	return v;
}

// e4m3_to_f32 decodes FP8 E4M3FN (formats.md 2.2): e==0 subnormal m/8·2^-6,
// e==15 && m==7 NaN, else (1+m/8)·2^(e-7).
__device__ __forceinline__ float e4m3_to_f32(unsigned b) {
	unsigned s = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
	float v;
	if (e == 0) v = (float)m * 0.001953125f; // m/8 * 2^-6 = m * 2^-9
	else if (e == 15 && m == 7) v = __uint_as_float(0x7fc00000u);
	else v = __uint_as_float(((e + 120u) << 23) | (m << 20));
	return s ? -v : v;
}

// e2m1_to_f32 decodes an FP4 E2M1 code: bit 3 sign, bits 0-2 index
// [0, .5, 1, 1.5, 2, 3, 4, 6]; 0x8 is -0.
__device__ __forceinline__ float e2m1_to_f32(unsigned c) {
	unsigned m = c & 7;
	float v = m < 4 ? (float)m * 0.5f : (m == 4 ? 2.0f : (m == 5 ? 3.0f : (m == 6 ? 4.0f : 6.0f)));
	return (c & 8) ? -v : v;
}

// e8m0_to_f32 decodes an MX E8M0 scale: 2^(e-127), 0xff NaN.
__device__ __forceinline__ float e8m0_to_f32(unsigned e) {
	if (e == 255) return __uint_as_float(0x7fc00000u);
	if (e == 0) return __uint_as_float(0x00400000u); // 2^-127 (subnormal)
	return __uint_as_float(e << 23);
}

// e4m3_rne rounds y (|y| <= 448 after the caller's clamp) to the nearest
// E4M3FN value, ties to even (torch's cast after CT's clamp).
__device__ __forceinline__ float e4m3_rne(float y) {
	float a = fabsf(y);
	if (a == 0.0f) return y;
	int e = (int)((__float_as_uint(a) >> 23) & 255) - 127; // floor(log2 a) for normal floats
	if (e < -6) e = -6;                                     // subnormal E4M3 step is 2^-9
	float step = __uint_as_float((unsigned)(e - 3 + 127) << 23);
	float q = rintf(a / step) * step; // a/step and the product are exact (powers of two)
	if (q > 448.0f) q = 448.0f;
	return y < 0 ? -q : q;
}

// e2m1_round rounds y (clamped to [-6, 6]) to E2M1, ties to even, keeping
// the sign of y (formats.md 2.2 thresholds).
__device__ __forceinline__ float e2m1_round(float y) {
	float a = fabsf(y), q;
	if (a <= 0.25f) q = 0.0f;
	else if (a < 0.75f) q = 0.5f;
	else if (a <= 1.25f) q = 1.0f;
	else if (a < 1.75f) q = 1.5f;
	else if (a <= 2.5f) q = 2.0f;
	else if (a < 3.5f) q = 3.0f;
	else if (a <= 5.0f) q = 4.0f;
	else q = 6.0f;
	return (y < 0.0f || (y == 0.0f && __float_as_uint(y) >> 31)) ? -q : q;
}

// warp_sum / warp_max: butterfly over the 32 lanes (all lanes get the result).
__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// block_sum returns the sum of v over the block to every thread. red is a
// __shared__ float[32]; blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float *red) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) red[w] = v;
	__syncthreads();
	float r = 0.0f;
	for (int i = 0; i < nw; i++) r += red[i];
	return r;
}

__device__ __forceinline__ float block_max(float v, float *red) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) red[w] = v;
	__syncthreads();
	float r = red[0];
	for (int i = 1; i < nw; i++) r = fmaxf(r, red[i]);
	return r;
}

#endif
