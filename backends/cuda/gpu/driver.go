//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
)

// driver is the CUDA driver API as this package uses it: the ~20 calls of
// a primary-context, default-stream, synchronous-copy backend. Two
// implementations exist, chosen by build tag (the Makefile picks one from
// `nvcc --version`):
//
//	cuda && !cudaown  driver_gorgonia.go: gorgonia.org/cu v0.9.6 (toolkits 11.8–12.x)
//	cuda && cudaown   driver_own.go: the project's own prototypes of the
//	                  versioned driver entry points, resolved from
//	                  libcuda.so.1 with dlopen (toolkits 11.8 and later,
//	                  13.x included)
//
// Handles (contexts, modules, functions) are opaque uintptr values owned
// by the implementation. Every call expects the device's context to be
// current on the calling (locked) OS thread, except init, version,
// deviceCount, deviceName, attribute and the primary-context calls.
type driver interface {
	// name says which binding this is (gpu-check prints it).
	name() string
	// init loads the driver and calls cuInit(0); its error says what is
	// missing (library, driver, device) so the caller can fall back.
	init() error
	version() (int, error)
	deviceCount() (int, error)
	deviceName(dev int) (string, error)
	attribute(dev int, a attr) (int, error)
	totalMem(dev int) (int64, error)
	primaryCtxRetain(dev int) (uintptr, error)
	primaryCtxRelease(dev int) error
	ctxSetCurrent(ctx uintptr) error
	ctxSynchronize() error
	// moduleLoad calls cuModuleLoadDataEx with a JIT error-log buffer; a
	// failure's error carries the log.
	moduleLoad(image []byte) (uintptr, error)
	moduleFunction(mod uintptr, name string) (uintptr, error)
	moduleUnload(mod uintptr) error
	memAlloc(bytes int64) (device.Ptr, error)
	memFree(p device.Ptr) error
	memcpyHtoD(dst device.Ptr, src unsafe.Pointer, bytes int64) error
	memcpyDtoH(dst unsafe.Pointer, src device.Ptr, bytes int64) error
	memGetInfo() (free, total int64, err error)
	// launch runs fn with its arguments given as 8-byte little-endian
	// slots (a 4-byte scalar in the low bytes).
	launch(fn uintptr, grid, block device.Dim3, sharedBytes int, args []uint64) error
}

// attr is a CUdevice_attribute (values from cuda.h, stable since CUDA 2.x–5.x).
type attr int

const (
	attrMaxThreadsPerBlock   attr = 1
	attrMultiprocessorCount  attr = 16
	attrCCMajor              attr = 75
	attrCCMinor              attr = 76
	attrMaxThreadsPerSM      attr = 39
	attrMemoryClockRate      attr = 36 // kHz
	attrGlobalMemoryBusWidth attr = 37 // bits
)

// cuOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY.
const cuOutOfMemory = 2

// drvError is a failed driver call: the call, its CUresult and the
// driver's name and description of it.
type drvError struct {
	call string
	code int
	name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	desc string
	log  string // JIT error log of a failed module load
}

func (e *drvError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.call, e.name, e.code)
	if e.desc != "" {
		s += ": " + e.desc
	}
	if e.log != "" {
		s += "; JIT log: " + e.log
	}
	return s
}

// Is makes errors.Is(err, device.ErrOutOfMemory) true for an out-of-memory result.
func (e *drvError) Is(target error) bool {
	return target == device.ErrOutOfMemory && e.code == cuOutOfMemory
}

// jitLogBytes is the size of the JIT error-log buffer of a module load.
const jitLogBytes = 16 << 10
