// selftest.cc: small kernels that exercise the emulator's runtime itself
// (shuffle semantics, barrier misuse, deadlock detection, vector accesses). They are not
// CUDA kernels of qppl and are reachable only from emu's tests.
#include "shim.h"
#include "runtime.h"
#include "k_dq.h"

static void st_shuffles(const uint64_t *a) {
	float *out;
	memcpy(&out, &a[0], sizeof out);
	unsigned t = threadIdx.x;
	float v = (float)(t * 10 + blockIdx.x);
	out[(blockIdx.x * blockDim.x + t) * 4 + 0] = __shfl_xor_sync(0xffffffffu, v, 5);
	out[(blockIdx.x * blockDim.x + t) * 4 + 1] = __shfl_down_sync(0xffffffffu, v, 3);
	out[(blockIdx.x * blockDim.x + t) * 4 + 2] = __shfl_up_sync(0xffffffffu, v, 2);
	__shared__ float s[64];
	s[t] = v;
	__syncthreads();
	out[(blockIdx.x * blockDim.x + t) * 4 + 3] = s[blockDim.x - 1 - t]; // visible only after the barrier
}

static void st_deadlock(const uint64_t *) {
	if (threadIdx.x < 16) {
		(void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
	} else {
		__syncthreads();
	}
}

static void st_barrier(const uint64_t *) { __syncthreads(); }

// st_vec16 stores one uint4 at out + blockIdx.x floats (16-byte aligned
// only when blockIdx.x is a multiple of 4: out comes from malloc).
static void st_vec16(const uint64_t *a) {
	float *out;
	memcpy(&out, &a[0], sizeof out);
	if (threadIdx.x == 0) dq_st16(out + blockIdx.x, make_uint4(0x3f800000u, 0x40000000u, 0x40400000u, 0x40800000u));
}

static const EmuKernel st_table[] = {
    {"st_shuffles", "p", st_shuffles, 1},
    {"st_deadlock", "", st_deadlock, 1},
    {"st_barrier_nosync", "", st_barrier, 0},
    {"st_vec16", "p", st_vec16, 0},
};

extern "C" const char *emu_selftest(int which, float *out, unsigned grid, unsigned block) {
	uint64_t a[1] = {(uint64_t)(uintptr_t)out};
	return emu_launch(&st_table[which], a, grid, 1, 1, block, 1, 1, 0);
}
