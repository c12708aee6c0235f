// shim.h: the CUDA C++ dialect used by backends/cuda/kernels/*.cu, for the
// host compiler. Kernels are compiled unchanged; this header supplies
// threadIdx/blockIdx/blockDim/gridDim, __shared__ (one instance per block:
// blocks run one at a time on an OS thread, so a thread_local static is
// exactly per block), __syncthreads as a real barrier between the fibers
// that emulate a block's threads, warp shuffles with the lanes of the
// emulated warp, atomics, and the bf16/fp16 conversion intrinsics with
// round-to-nearest-even. The fiber scheduler is in runtime.cc.
#ifndef QPPL_EMU_SHIM_H
#define QPPL_EMU_SHIM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define QPPL_EMU 1

struct dim3 {
	unsigned int x, y, z;
};
typedef dim3 uint3;

struct EmuBlock;

// One emulated CUDA thread.
struct EmuFiber {
	void *sp;        // saved stack pointer while suspended
	int state;       // EMU_RUNNABLE, EMU_WAIT_BLOCK, EMU_WAIT_WARP, EMU_DONE
	unsigned linear; // linear thread index in the block
	uint3 tid;
	EmuBlock *blk;
	void *stack;     // fiber stack (fibered mode)
	void *uctx;      // ucontext_t* on hosts without emu_switch
};

// The block being executed and its scheduler state.
struct EmuBlock {
	uint3 bid;
	dim3 bdim, gdim;
	unsigned nthreads;
	int fibered;             // 0: threads run as a loop (kernel has no barriers)
	unsigned char *dyn_shared;
	// barrier state
	unsigned arrived_block, done;
	unsigned arrived_warp[32];
	unsigned warp_gen[32];
	uint64_t xchg[32][2][32]; // warp shuffle exchange, double buffered
	void *sched_sp;
	void *sched_uctx;
	EmuFiber *fibers;
	const char *error; // first error raised by the kernel (barrier misuse)
};

extern thread_local EmuFiber *emu_cur;

void emu_block_barrier(void);
void emu_warp_barrier(void);
void emu_raise(const char *msg);

#define threadIdx (emu_cur->tid)
#define blockIdx (emu_cur->blk->bid)
#define blockDim (emu_cur->blk->bdim)
#define gridDim (emu_cur->blk->gdim)
#define warpSize 32

#define __global__
#define __device__ static inline
#define __host__
#define __forceinline__
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define EXTERN_C extern "C"

static inline void __syncthreads(void) { emu_block_barrier(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
	(void)mask;
	emu_warp_barrier();
}
static inline unsigned char *emu_dynamic_shared(void) { return emu_cur->blk->dyn_shared; }

// Warp shuffles: every lane of the warp publishes its value, the warp
// synchronizes, and each lane reads its source lane's value. The exchange
// buffer alternates between two halves so that one barrier per shuffle
// suffices.
// A full mask names 32 lanes; in a partial warp (a block size that is not a
// multiple of 32) the missing lanes make the shuffle undefined on a GPU, so
// the emulator reports it instead of reading stale exchange slots.
template <typename T> static inline T emu_shfl(unsigned mask, T v, int src_of_lane_fn_kind, int arg, int width) {
	EmuFiber *f = emu_cur;
	EmuBlock *b = f->blk;
	unsigned lane = f->linear % 32, warp = f->linear / 32;
	if (mask == 0xffffffffu && (warp + 1) * 32 > b->nthreads) emu_raise("full-mask warp shuffle in a partial warp (block size not a multiple of 32)");
	unsigned half = b->warp_gen[warp] & 1;
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof(T));
	b->xchg[warp][half][lane] = bits;
	emu_warp_barrier(); // increments warp_gen when the warp is complete
	int w = width <= 0 || width > 32 ? 32 : width;
	int base = (int)(lane / w) * w, li = (int)lane - base, src;
	switch (src_of_lane_fn_kind) {
	case 0: src = li ^ arg; break;          // xor
	case 1: src = li + arg; if (src >= w) src = li; break; // down
	case 2: src = li - arg; if (src < 0) src = li; break;  // up
	default: src = arg % w; break;          // indexed
	}
	if (src >= w) src = li;
	T out;
	uint64_t got = b->xchg[warp][half][base + src];
	memcpy(&out, &got, sizeof(T));
	return out;
}
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int lm, int w = 32) { return emu_shfl(m, v, 0, lm, w); }
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return emu_shfl(m, v, 1, (int)d, w); }
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return emu_shfl(m, v, 2, (int)d, w); }
template <typename T> static inline T __shfl_sync(unsigned m, T v, int s, int w = 32) { return emu_shfl(m, v, 3, s, w); }

// Atomics: blocks run one at a time and a block's fibers never interleave
// inside an expression, so plain read-modify-write is atomic here.
template <typename T> static inline T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; }
static inline int atomicMax(int *p, int v) { int old = *p; if (v > old) *p = v; return old; }

// Vector types of vector_types.h used by the kernels' 8- and 16-byte
// accesses (kernels/dq.cuh), with CUDA's alignment.
struct alignas(8) uint2 {
	unsigned int x, y;
};
struct alignas(16) uint4 {
	unsigned int x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

// Bit casts and math.
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }

// bf16 / fp16 storage types and conversions (round to nearest even, NaN kept
// quiet), bit-identical to cuda_bf16.h / cuda_fp16.h.
struct __nv_bfloat16 { unsigned short x; };
struct __half { unsigned short x; };

static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
	unsigned u = __float_as_uint(f);
	__nv_bfloat16 r;
	if ((u & 0x7fffffffu) > 0x7f800000u) { r.x = (unsigned short)((u >> 16) | 0x40); return r; }
	u += 0x7fffu + ((u >> 16) & 1u);
	r.x = (unsigned short)(u >> 16);
	return r;
}
static inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.x << 16); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { __nv_bfloat16 h; h.x = x; return h; }

static inline __half __float2half_rn(float f) {
	unsigned u = __float_as_uint(f);
	unsigned sign = (u >> 16) & 0x8000u;
	unsigned a = u & 0x7fffffffu;
	__half r;
	if (a > 0x7f800000u) { r.x = (unsigned short)(sign | 0x7e00u); return r; } // NaN
	if (a >= 0x477ff000u) { r.x = (unsigned short)(sign | 0x7c00u); return r; } // rounds to >= 65520: inf
	if (a >= 0x38800000u) { // normal half
		unsigned m = a - 0x38000000u; // rebias exponent 127 -> 15
		m += 0xfffu + ((m >> 13) & 1u);
		r.x = (unsigned short)(sign | (m >> 13));
		return r;
	}
	// subnormal half (or zero): value = a * 2^24 units of 2^-24
	if (a < 0x33000000u) { r.x = (unsigned short)sign; return r; } // < 2^-25: rounds to 0
	unsigned e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
	unsigned shift = 126 - e; // so that the result is in units of 2^-24
	// value = mant * 2^(e-150); units of 2^-24 -> mant >> (126-e)
	unsigned q = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
	if (rem > halfway || (rem == halfway && (q & 1u))) q++;
	r.x = (unsigned short)(sign | q);
	return r;
}
static inline float __half2float(__half h) {
	unsigned sign = ((unsigned)h.x & 0x8000u) << 16, e = (h.x >> 10) & 0x1f, m = h.x & 0x3ff;
	if (e == 0) {
		float v = (float)m * 5.9604644775390625e-8f; // 2^-24
		return sign ? -v : v;
	}
	if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
	return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
}
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline __half __ushort_as_half(unsigned short x) { __half h; h.x = x; return h; }

#endif
