//go:build !amd64 && !arm64

package gemm

func asmKernels() []asmKernel { return nil }

func hasAVX512() bool { return false }
