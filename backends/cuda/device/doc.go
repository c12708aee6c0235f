// Package device is the small interface between the CUDA backend's
// orchestration (package backends/cuda) and the two things that can run its
// kernels: the real GPU (package backends/cuda/gpu, build tag cuda) and the
// CPU emulator (package backends/cuda/emu, default build).
//
// It is deliberately not a tensor algebra: a Device allocates and copies
// bytes, launches a kernel of backends/cuda/kernels by name with a grid, a
// block and scalar or pointer arguments, and multiplies matrices (the only
// operation delegated to a library, cuBLAS on the GPU). Kernel argument
// kinds are checked against the kernel's signature (see Kernels), and the
// launch geometry against the CUDA limits (CheckGeometry), by both
// implementations, so an argument-list or geometry mistake fails in the
// emulator's tests before it can reach a GPU. Callers never launch by name:
// each kernel has one typed wrapper (LaunchRope, ...; launch.go, and the
// dequantization kernels' in backends/cuda/dq_*.go) taking the kernel's
// parameters under the prototype's names and owning its launch geometry,
// and a test checks table, wrappers and .cu prototypes against each other. A device that needs memory for
// itself (a GPU) says so through the optional Reserver interface.
//
// Errors: every method returns an error instead of panicking; out of memory
// is reported as ErrOutOfMemory wrapped with the device name and the size.
package device
