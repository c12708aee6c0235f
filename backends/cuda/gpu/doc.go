// Package gpu implements device.Device on an NVIDIA GPU through the CUDA
// driver API and cuBLAS. It is compiled only with the build tag cuda, so
// nothing in the default build imports CUDA code.
//
// Driver binding: the ~20 driver calls go through the small driver
// interface (driver.go) with two implementations chosen by build tag:
// gorgonia.org/cu v0.9.6 (tag cuda; toolkits 11.8–12.x; its init exits the
// process without a GPU) and the project's own prototypes of versioned,
// stable entry points (cudrv.h; tags cuda cudaown; any toolkit from 11.8,
// 13.x included), resolved from libcuda.so.1 with dlopen so that a binary
// starts without a GPU and Open fails with ErrNoGPU and the reason.
// mk/cuda.mk picks the binding from `nvcc --version`; `make cuda-check`
// proves cudrv.h against the toolkit's cuda.h and the 13.x declarations in
// testdata/.
//
// Kernels: each backends/cuda/kernels/*.cu is compiled by `make cuda` into
// ptx/<file>.fatbin (SASS for sm_80, sm_90 [, sm_100, sm_120] and
// compute_90 PTX) and ptx/<file>.ptx (compute_90 PTX), both embedded. Open
// checks every kernel's PTX parameter list against device.Kernels (a stale
// build is an error naming the kernel) and loads the fatbin with
// cuModuleLoadDataEx and a JIT error-log buffer. The images are build
// products, not committed: a binary built without them says how to build
// them when a device is opened.
//
// GEMM: cublasGemmEx and cublasGemmStridedBatchedEx with bf16/fp16/fp32
// inputs and CUBLAS_COMPUTE_32F, through this package's own prototypes,
// resolved by dlopen from libcublas.so.13, .12, .11 or libcublas.so (a
// missing cuBLAS is an error naming the sonames tried). Row-major
// C = A·Bᵀ is computed as the column-major Cᵀ = op_T(B)·A.
//
// Threads: a CUDA context is current per OS thread, so every call locks the
// calling goroutine to its thread and makes the device's primary context
// current for the duration of the call. Work goes to the default stream;
// copies are synchronous, so results are ready when CopyOut returns. With
// QPPL_CUDA_SYNC=1 every launch and GEMM is followed by a synchronization,
// and a fault is reported at the launch, naming the kernel and its
// arguments. Stats counts bytes copied each way, launches and GEMMs.
package gpu
