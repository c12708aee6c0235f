// Package gemm owns qppl's float64 matrix products: register-blocked
// micro-kernels (Go assembly: 6×8 for AVX2+FMA on amd64 and NEON on arm64,
// 24×8 for AVX-512F; a pure-Go math.FMA fallback everywhere), the packing of
// both operands into panels, L1/L2 blocking and the spreading of output
// blocks over goroutines.
//
// # Determinism
//
// Every element of every product is one chain of fused multiply-adds in
// ascending k, starting from +0:
//
//	c[i][j] = fma(a[i][K-1], b[K-1][j], … fma(a[i][1], b[1][j], fma(a[i][0], b[0][j], 0)) …)
//
// An FMA rounds once, so the instructions (VFMADD231PD, FMLA) and Go's
// math.FMA give the same bits. Blocking over k stores the running sum in C
// and reloads it unchanged, so neither the block sizes, the tile a thread
// happens to compute, the number of threads nor the kernel (assembly or
// fallback) can change a single bit of the result: it depends only on the
// operands. Tests assert this for many shapes, thread counts and every
// kernel (make arm64-check runs them on arm64 under qemu); QPPL_NOASM=1
// forces the fallback at run time and QPPL_GEMM_KERNEL names a kernel
// (e.g. avx2 on an AVX-512 machine). The AVX-512 kernel is offered only
// after it reproduced the Go kernel bit for bit on small products;
// Unverified names a kernel that failed (tests fail then). It is the
// default where offered: on AMD Zen 4, whose 512-bit FMAs take two passes
// through 256-bit pipes, it runs the forward as fast as AVX2 (×1.02 in
// CPU time, docs/reference.md), and on a 512-bit datapath it has twice the
// FMA width.
//
// # Layout
//
// Operands are row-major float64 slices with a leading dimension, as in
// BLAS. MulNT computes C = A·Bᵀ (B stored [n][k], e.g. a Linear's weight
// [out][in]); MulNN computes C = A·B (B stored [k][n]). C is overwritten
// (no alpha, no beta). MulNTRows takes B as a function that decodes any
// range of its rows (a packed weight), so that B is never held whole.
//
// # Speed
//
// A is packed once per call into panels of mr rows (shared by all
// goroutines); each goroutine packs kc×nc blocks of B into its own buffer
// and runs the mr×nr micro-kernel over them while the A panels stream from
// L2. The depth k is cut into equal blocks of at most 768 (no short last
// block: each block reloads and stores the C tiles). An Engine reuses its buffers across
// calls and is not safe for concurrent use; a Worker is a single-goroutine
// engine for callers that already run in parallel (attention heads).
package gemm
