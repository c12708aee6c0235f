// Package emu is the CPU emulator of a CUDA device: it implements
// device.Device by running the very kernel sources of backends/cuda/kernels,
// compiled as host C++ through cgo under shim.h, and a CPU GEMM with the
// GPU's input rounding and fp32 accumulation.
//
// Execution model. A launch runs its blocks one after another on the calling
// OS thread. Within a block each CUDA thread is a fiber with its own stack
// (a hand-written context switch on x86-64, ucontext elsewhere); fibers run
// in thread order until they reach __syncthreads, a warp shuffle or the end
// of the kernel, so barriers and shuffles have their CUDA meaning and the
// result is deterministic. Kernels without barriers are registered with
// sync=0 and run as a plain loop over threads (a barrier there is reported
// as an error). __shared__ variables are thread_local statics, which is
// exactly one instance per running block. Divergent barriers are reported
// as a deadlock error, not a hang. Grids and blocks are 3-D as on a GPU;
// the 8- and 16-byte vector accesses of kernels/dq.cuh are single copies,
// and a misaligned one (a fault on a GPU) is an error.
//
// Memory. Allocations come from the C heap with 256 NaN bytes (0xFF) on
// each side and are themselves filled with 0xFF, so reading memory no kernel
// wrote gives NaN. With Options.CheckGuards every Launch and Gemm verifies
// the guard bands and names the kernel that wrote out of bounds. The device
// capacity is Options.MemBytes, so the CUDA backend's memory plan and
// multi-device split can be tested with several small emulated devices.
//
// Dynamic shared memory also has NaN guard bands (even for a launch that
// asks for none): a kernel indexing past the launch's sharedBytes is an
// error. A full-mask warp shuffle in a partial warp (a block size that is
// not a multiple of 32) is an error too, being undefined on a GPU. Static
// __shared__ arrays are not reset between blocks, so a kernel that reads
// one before writing it is not caught.
//
// Devices share no state: the only thread-local data are the running
// block's fiber bookkeeping and a cache of fiber stacks.
//
// Build note: kernels.cc includes the kernel sources through the symbolic
// links k_*.h -> ../kernels/*, so that Go's build cache, which hashes the
// header files of a cgo package, rebuilds the emulator when a kernel
// changes.
package emu
