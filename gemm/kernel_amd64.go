package gemm

import "golang.org/x/sys/cpu"

// kernAVX2FMA is kernel in AVX2+FMA assembly (kernel_amd64.s); k >= 1.
//
//go:noescape
func kernAVX2FMA(k int, a, b, c *float64, ldc int, load bool)

func kernAVX2(k int, a, b, c []float64, ldc int, load bool) {
	_, _ = a[k*mr-1], b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernAVX2FMA(k, &a[0], &b[0], &c[0], ldc, load)
}

func asmKernels() []asmKernel {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []asmKernel{{KernelAVX2, kernAVX2}}
	}
	return nil
}
