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

// kernAVX512FMA is wideKernel in AVX-512F assembly
// (kernel_avx512_amd64.s); k >= 1.
//
//go:noescape
func kernAVX512FMA(k int, a *float64, astride int, b, c *float64, ldc int, load bool)

func kernAVX512(k int, a []float64, astride int, b, c []float64, ldc int, load bool) {
	_, _ = a[(widePanels-1)*astride+k*mr-1], b[k*nr-1]
	_ = c[(widePanels*mr-1)*ldc+nr-1]
	kernAVX512FMA(k, &a[0], astride, &b[0], &c[0], ldc, load)
}

// asmKernels: AVX2+FMA, and on CPUs (and kernels: x/sys/cpu checks that
// the OS saves the zmm state) with AVX-512F the 24×8 AVX-512 kernel, with
// the AVX2 one for the edge tiles. The AVX-512 kernel is verified only if
// it reproduces the pure-Go kernel bit for bit on small products
// (wideAgrees), so a faulty kernel can never give a different number; one
// that fails is listed by Unverified, never used.
func asmKernels() []asmKernel {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return nil
	}
	ks := []asmKernel{{name: KernelAVX2, fn: kernAVX2, verified: true}}
	if cpu.X86.HasAVX512F {
		ks = append(ks, asmKernel{name: KernelAVX512, fn: kernAVX2, wide: kernAVX512, verified: wideAgrees(kernAVX512)})
	}
	return ks
}

// hasAVX512 reports whether the CPU and OS support AVX-512F (for tests).
func hasAVX512() bool { return cpu.X86.HasAVX512F }
