//go:build !amd64

package gemm

func asmKernels() []asmKernel { return nil }
