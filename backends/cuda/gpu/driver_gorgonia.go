//go:build cuda && !cudaown

package gpu

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
	"gorgonia.org/cu"
)

// gorgoniaDriver implements driver with gorgonia.org/cu v0.9.6, which
// compiles against cuda.h of toolkits 11.x and 12.x (not 13.x: it calls
// cuCtxCreate, cuMemAdvise and cuMemPrefetchAsync with their pre-13
// signatures). Its package init calls cuInit and exits the process when
// that fails, so a binary of this build cannot start on a machine without
// a GPU; build with -tags cudaown (make cuda CUDA_BINDING=own) for one
// that falls back with a message instead.
type gorgoniaDriver struct {
	mu    sync.Mutex
	ctxs  []cu.CUContext
	mods  []cu.Module
	funcs []cu.Function
}

func newDriver() driver { return &gorgoniaDriver{} }

func (*gorgoniaDriver) name() string { return "gorgonia.org/cu v0.9.6" }

// init: gorgonia.org/cu's own init has already called cuInit(0) (and
// exited on failure).
func (*gorgoniaDriver) init() error { return nil }

// gerr converts a gorgonia error to a drvError carrying its CUresult.
func gerr(call string, err error) error {
	if err == nil {
		return nil
	}
	e := &drvError{call: call, code: -1, name: err.Error()}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Int {
		e.code = int(v.Int())
	}
	return e
}

func (*gorgoniaDriver) version() (int, error) {
	v := cu.Version()
	if v < 0 {
		return 0, &drvError{call: "cuDriverGetVersion", code: -1, name: "failed"}
	}
	return v, nil
}

func (*gorgoniaDriver) deviceCount() (int, error) {
	n, err := cu.NumDevices()
	return n, gerr("cuDeviceGetCount", err)
}

func (*gorgoniaDriver) deviceName(dev int) (string, error) {
	s, err := cu.Device(dev).Name()
	return s, gerr("cuDeviceGetName", err)
}

func (*gorgoniaDriver) attribute(dev int, a attr) (int, error) {
	v, err := cu.Device(dev).Attribute(cu.DeviceAttribute(a))
	return v, gerr("cuDeviceGetAttribute", err)
}

func (*gorgoniaDriver) totalMem(dev int) (int64, error) {
	v, err := cu.Device(dev).TotalMem()
	return v, gerr("cuDeviceTotalMem", err)
}

func (g *gorgoniaDriver) primaryCtxRetain(dev int) (uintptr, error) {
	c, err := cu.Device(dev).RetainPrimaryCtx()
	if err != nil {
		return 0, gerr("cuDevicePrimaryCtxRetain", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctxs = append(g.ctxs, c)
	return uintptr(len(g.ctxs)), nil
}

func (*gorgoniaDriver) primaryCtxRelease(dev int) error {
	return gerr("cuDevicePrimaryCtxRelease", cu.Device(dev).ReleasePrimaryCtx())
}

func (g *gorgoniaDriver) ctxSetCurrent(ctx uintptr) error {
	g.mu.Lock()
	c := g.ctxs[ctx-1]
	g.mu.Unlock()
	return gerr("cuCtxSetCurrent", cu.SetCurrentContext(c))
}

func (*gorgoniaDriver) ctxSynchronize() error { return gerr("cuCtxSynchronize", cu.Synchronize()) }

func (g *gorgoniaDriver) moduleLoad(image []byte) (uintptr, error) {
	log := &cu.JITErrorLogBuffer{Buffer: make([]byte, jitLogBytes)}
	m, err := cu.LoadDataEx(string(image), log)
	if err != nil {
		e := gerr("cuModuleLoadDataEx", err).(*drvError)
		e.log = cString(log.Buffer)
		return 0, e
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mods = append(g.mods, m)
	return uintptr(len(g.mods)), nil
}

func (g *gorgoniaDriver) moduleFunction(mod uintptr, name string) (uintptr, error) {
	g.mu.Lock()
	m := g.mods[mod-1]
	g.mu.Unlock()
	f, err := m.Function(name)
	if err != nil {
		return 0, gerr("cuModuleGetFunction "+name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.funcs = append(g.funcs, f)
	return uintptr(len(g.funcs)), nil
}

func (g *gorgoniaDriver) moduleUnload(mod uintptr) error {
	g.mu.Lock()
	m := g.mods[mod-1]
	g.mu.Unlock()
	return gerr("cuModuleUnload", m.Unload())
}

func (*gorgoniaDriver) memAlloc(bytes int64) (device.Ptr, error) {
	p, err := cu.MemAlloc(bytes)
	return device.Ptr(p), gerr(fmt.Sprintf("cuMemAlloc(%d)", bytes), err)
}

func (*gorgoniaDriver) memFree(p device.Ptr) error {
	return gerr("cuMemFree", cu.MemFree(cu.DevicePtr(p)))
}

func (*gorgoniaDriver) memcpyHtoD(dst device.Ptr, src unsafe.Pointer, bytes int64) error {
	return gerr("cuMemcpyHtoD", cu.MemcpyHtoD(cu.DevicePtr(dst), src, bytes))
}

func (*gorgoniaDriver) memcpyDtoH(dst unsafe.Pointer, src device.Ptr, bytes int64) error {
	return gerr("cuMemcpyDtoH", cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes))
}

func (*gorgoniaDriver) memGetInfo() (free, total int64, err error) {
	free, total, err = cu.MemInfo()
	return free, total, gerr("cuMemGetInfo", err)
}

func (g *gorgoniaDriver) launch(fn uintptr, grid, block device.Dim3, sharedBytes int, args []uint64) error {
	g.mu.Lock()
	f := g.funcs[fn-1]
	g.mu.Unlock()
	slots := append([]uint64(nil), args...)
	params := make([]unsafe.Pointer, len(slots))
	for i := range slots {
		params[i] = unsafe.Pointer(&slots[i])
	}
	return gerr("cuLaunchKernel", f.Launch(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, sharedBytes, cu.NoStream, params))
}
