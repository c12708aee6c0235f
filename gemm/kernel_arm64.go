package gemm

// kernNEONFMLA is kernel in NEON assembly (kernel_arm64.s); k >= 1.
//
//go:noescape
func kernNEONFMLA(k int, a, b, c *float64, ldc int, load bool)

func kernNEON(k int, a, b, c []float64, ldc int, load bool) {
	_, _ = a[k*mr-1], b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernNEONFMLA(k, &a[0], &b[0], &c[0], ldc, load)
}

// asmKernels: NEON (Advanced SIMD) is part of every arm64 CPU.
func asmKernels() []asmKernel { return []asmKernel{{name: KernelNEON, fn: kernNEON, verified: true}} }

func hasAVX512() bool { return false }
