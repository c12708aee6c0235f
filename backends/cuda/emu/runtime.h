// runtime.h: the emulator's C interface to Go (emu.go).
#ifndef QPPL_EMU_RUNTIME_H
#define QPPL_EMU_RUNTIME_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef void (*emu_invoke_fn)(const uint64_t *args);

typedef struct {
	const char *name;
	const char *sig; // one letter per parameter: p pointer, i int32, u uint32, f float32
	emu_invoke_fn invoke;
	int sync; // 1: uses __syncthreads or warp shuffles (threads run as fibers)
} EmuKernel;

int emu_kernel_count(void);
const EmuKernel *emu_kernel_at(int i);

// emu_launch runs kernel k over the grid. It returns NULL or a static error
// string (barrier divergence, barrier in a kernel registered without sync).
const char *emu_launch(const EmuKernel *k, const uint64_t *args, unsigned gx, unsigned gy, unsigned gz,
		       unsigned bx, unsigned by, unsigned bz, size_t shared);

// emu_gemm: C[M][N] (+)= A[M][K] * B[N][K]^T with inputs of dtype t
// (0 f32, 1 bf16, 2 f16) converted exactly to float and fp32 accumulation
// in increasing k.
void emu_gemm(int M, int N, int K, const void *A, const void *B, int t, float *C, int accumulate);

// emu_gemm_batched: for b < batch, C_b[M][N] (+)= alpha * A_b[M][K] *
// op(B_b) with op(B) = B[N][K]^T (transB) or B[K][N]; row strides lda, ldb,
// ldc and batch strides sA, sB, sC in elements; fp32 accumulation in
// increasing k, then the product by alpha (cuBLAS's alpha*AB + beta*C).
void emu_gemm_batched(int M, int N, int K, const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
		      int transB, int t, float *C, int ldc, long long sC, int batch, float alpha, int accumulate);

#ifdef __cplusplus
}
#endif
#endif
