// Package gpu implements device.Device on an NVIDIA GPU through the CUDA
// driver API of gorgonia.org/cu v0.9.6 and cuBLAS. It is compiled only with
// the build tag cuda: gorgonia.org/cu's init calls cuInit and exits the
// process when no GPU is present, so nothing in the default build imports
// this package.
//
// Kernels: the PTX of every backends/cuda/kernels/*.cu file, compiled by
// `make cuda` (nvcc -ptx for sm_80 and sm_90) into ptx/<file>.sm_<NN>.ptx
// and embedded with go:embed; the module matching the device's compute
// capability (sm_90 for 9.x and later, sm_80 for 8.x) is loaded with
// cu.LoadData. The PTX is a build product, not committed: a binary built
// without it reports how to build it when a device is opened.
//
// GEMM: cublasGemmEx with bf16/fp16/fp32 inputs and CUBLAS_COMPUTE_32F,
// declared through this package's own cgo prototypes (gorgonia.org/cu/blas
// has no GemmEx). Row-major C = A·Bᵀ is computed as the column-major
// Cᵀ = op_T(B)·A.
//
// Threads: a CUDA context is current per OS thread, so every call locks the
// calling goroutine to its thread and makes the device's primary context
// current for the duration of the call. Work goes to the default stream;
// copies are synchronous, so results are ready when CopyOut returns.
package gpu
