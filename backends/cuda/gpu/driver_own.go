//go:build cuda && cudaown

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "cudrv.h"

// The driver's entry points, resolved with dlopen so that a binary of this
// build starts (and prints --help, or falls back with a message) on a
// machine without libcuda.so.1.
#define QCU_PTR(sym, ret, params, args) static qcu_fn_##sym *p_##sym;
QCU_FUNCS(QCU_PTR)
#undef QCU_PTR

// qcu_load opens libcuda.so.1 (libcuda.so as a fallback) and resolves
// every symbol; it returns NULL or a static message naming what is missing.
static const char *qcu_load(void) {
	static char msg[512];
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(msg, sizeof msg, "the NVIDIA driver library libcuda.so.1 was not found (%s); is the NVIDIA driver installed?", dlerror());
		return msg;
	}
#define QCU_SYM(sym, ret, params, args)                                                                                \
	p_##sym = (qcu_fn_##sym *)dlsym(h, #sym);                                                                       \
	if (!p_##sym) {                                                                                                 \
		snprintf(msg, sizeof msg, "libcuda.so.1 has no symbol %s (driver too old?)", #sym);                    \
		return msg;                                                                                             \
	}
	QCU_FUNCS(QCU_SYM)
#undef QCU_SYM
	return NULL;
}

// q_<symbol> calls the resolved entry point (cgo cannot call through a
// function pointer).
#define QCU_CALL(sym, ret, params, args) static ret q_##sym params { return p_##sym args; }
QCU_FUNCS(QCU_CALL)
#undef QCU_CALL

static qcu_result q_load_module(qcu_module *m, const void *image, char *log, unsigned int logn) {
	qcu_jit_option opts[2] = {QCU_JIT_ERROR_LOG_BUFFER, QCU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(size_t)logn};
	return p_cuModuleLoadDataEx(m, image, 2, opts, vals);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
)

// ownDriver implements driver with the prototypes of cudrv.h, resolved
// from libcuda.so.1 at init (no link-time dependency on libcuda, no
// process exit without a GPU). Handles are 1-based indices into its
// tables of driver handles.
type ownDriver struct {
	mu    sync.Mutex
	ctxs  []C.qcu_context
	mods  []C.qcu_module
	funcs []C.qcu_function
}

func newDriver() driver { return &ownDriver{} }

func (*ownDriver) name() string { return "own (cudrv.h, dlopen libcuda.so.1)" }

var (
	loadOnce sync.Once
	loadErr  error
)

func (o *ownDriver) init() error {
	loadOnce.Do(func() {
		if msg := C.qcu_load(); msg != nil {
			loadErr = errors.New(C.GoString(msg))
			return
		}
		loadErr = check("cuInit", C.q_cuInit(0))
	})
	return loadErr
}

// check turns a CUresult into nil or a drvError with the driver's name
// and description of the code.
func check(call string, r C.qcu_result) error {
	if r == 0 {
		return nil
	}
	e := &drvError{call: call, code: int(r), name: fmt.Sprintf("CUresult %d", int(r))}
	var s *C.char
	if C.q_cuGetErrorName(r, &s) == 0 && s != nil {
		e.name = C.GoString(s)
	}
	if C.q_cuGetErrorString(r, &s) == 0 && s != nil {
		e.desc = C.GoString(s)
	}
	return e
}

func (o *ownDriver) version() (int, error) {
	var v C.int
	err := check("cuDriverGetVersion", C.q_cuDriverGetVersion(&v))
	return int(v), err
}

func (o *ownDriver) deviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.q_cuDeviceGetCount(&n))
	return int(n), err
}

func (o *ownDriver) deviceName(dev int) (string, error) {
	buf := make([]byte, 256)
	err := check("cuDeviceGetName", C.q_cuDeviceGetName((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.qcu_device(dev)))
	return cString(buf), err
}

func (o *ownDriver) attribute(dev int, a attr) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.q_cuDeviceGetAttribute(&v, C.qcu_attr(a), C.qcu_device(dev)))
	return int(v), err
}

func (o *ownDriver) totalMem(dev int) (int64, error) {
	var n C.size_t
	err := check("cuDeviceTotalMem_v2", C.q_cuDeviceTotalMem_v2(&n, C.qcu_device(dev)))
	return int64(n), err
}

func (o *ownDriver) primaryCtxRetain(dev int) (uintptr, error) {
	var c C.qcu_context
	if err := check("cuDevicePrimaryCtxRetain", C.q_cuDevicePrimaryCtxRetain(&c, C.qcu_device(dev))); err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ctxs = append(o.ctxs, c)
	return uintptr(len(o.ctxs)), nil
}

func (o *ownDriver) primaryCtxRelease(dev int) error {
	return check("cuDevicePrimaryCtxRelease_v2", C.q_cuDevicePrimaryCtxRelease_v2(C.qcu_device(dev)))
}

func (o *ownDriver) ctxSetCurrent(ctx uintptr) error {
	o.mu.Lock()
	c := o.ctxs[ctx-1]
	o.mu.Unlock()
	return check("cuCtxSetCurrent", C.q_cuCtxSetCurrent(c))
}

func (o *ownDriver) ctxSynchronize() error { return check("cuCtxSynchronize", C.q_cuCtxSynchronize()) }

func (o *ownDriver) moduleLoad(image []byte) (uintptr, error) {
	img := C.CBytes(image) // the driver reads the image after return only through its own copy
	defer C.free(img)
	log := (*C.char)(C.calloc(jitLogBytes, 1))
	defer C.free(unsafe.Pointer(log))
	var m C.qcu_module
	if err := check("cuModuleLoadDataEx", C.q_load_module(&m, img, log, jitLogBytes)); err != nil {
		err.(*drvError).log = C.GoString(log)
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mods = append(o.mods, m)
	return uintptr(len(o.mods)), nil
}

func (o *ownDriver) moduleFunction(mod uintptr, name string) (uintptr, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	o.mu.Lock()
	m := o.mods[mod-1]
	o.mu.Unlock()
	var f C.qcu_function
	if err := check("cuModuleGetFunction "+name, C.q_cuModuleGetFunction(&f, m, cs)); err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.funcs = append(o.funcs, f)
	return uintptr(len(o.funcs)), nil
}

func (o *ownDriver) moduleUnload(mod uintptr) error {
	o.mu.Lock()
	m := o.mods[mod-1]
	o.mu.Unlock()
	return check("cuModuleUnload", C.q_cuModuleUnload(m))
}

func (o *ownDriver) memAlloc(bytes int64) (device.Ptr, error) {
	var p C.qcu_devptr
	err := check(fmt.Sprintf("cuMemAlloc_v2(%d)", bytes), C.q_cuMemAlloc_v2(&p, C.size_t(bytes)))
	return device.Ptr(p), err
}

func (o *ownDriver) memFree(p device.Ptr) error {
	return check("cuMemFree_v2", C.q_cuMemFree_v2(C.qcu_devptr(p)))
}

func (o *ownDriver) memcpyHtoD(dst device.Ptr, src unsafe.Pointer, bytes int64) error {
	return check("cuMemcpyHtoD_v2", C.q_cuMemcpyHtoD_v2(C.qcu_devptr(dst), src, C.size_t(bytes)))
}

func (o *ownDriver) memcpyDtoH(dst unsafe.Pointer, src device.Ptr, bytes int64) error {
	return check("cuMemcpyDtoH_v2", C.q_cuMemcpyDtoH_v2(dst, C.qcu_devptr(src), C.size_t(bytes)))
}

func (o *ownDriver) memGetInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = check("cuMemGetInfo_v2", C.q_cuMemGetInfo_v2(&f, &t))
	return int64(f), int64(t), err
}

func (o *ownDriver) launch(fn uintptr, grid, block device.Dim3, sharedBytes int, args []uint64) error {
	// kernelParams is an array of pointers to the argument values; both
	// live in C memory for the duration of the call
	n := max(len(args), 1)
	mem := C.calloc(C.size_t(2*n), 8)
	defer C.free(mem)
	vals := unsafe.Slice((*uint64)(mem), n)
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(mem, 8*n)), n)
	for i, a := range args {
		vals[i] = a
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	o.mu.Lock()
	f := o.funcs[fn-1]
	o.mu.Unlock()
	return check("cuLaunchKernel", C.q_cuLaunchKernel(f,
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(sharedBytes), nil, (*unsafe.Pointer)(unsafe.Add(mem, 8*n)), nil))
}
