//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcublas -lcuda
#include <stdint.h>
#include <stdlib.h>

// Own prototypes of the few cuBLAS entry points used (cublas_v2.h names;
// enums are int-sized).
typedef struct cublasContext *qppl_cublasHandle_t;
int cublasCreate_v2(qppl_cublasHandle_t *handle);
int cublasDestroy_v2(qppl_cublasHandle_t handle);
int cublasGemmEx(qppl_cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                 const void *alpha, const void *A, int Atype, int lda, const void *B, int Btype, int ldb,
                 const void *beta, void *C, int Ctype, int ldc, int computeType, int algo);

static int qppl_gemm(qppl_cublasHandle_t h, int M, int N, int K, uint64_t A, uint64_t B, int t, uint64_t C, int acc) {
	// cudaDataType: CUDA_R_32F 0, CUDA_R_16F 2, CUDA_R_16BF 14; CUBLAS_OP_N 0, CUBLAS_OP_T 1;
	// CUBLAS_COMPUTE_32F 68; CUBLAS_GEMM_DEFAULT -1.
	int dt = t == 0 ? 0 : (t == 1 ? 14 : 2);
	float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
	return cublasGemmEx(h, 1, 0, N, M, K, &alpha, (const void *)(uintptr_t)B, dt, K, (const void *)(uintptr_t)A, dt, K,
			    &beta, (void *)(uintptr_t)C, 0, N, 68, -1);
}
*/
import "C"

import (
	"embed"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
	"gorgonia.org/cu"
)

//go:embed all:ptx
var ptxFS embed.FS

// Device is one GPU.
type Device struct {
	mu      sync.Mutex
	ordinal int
	name    string
	dev     cu.Device
	ctx     cu.CUContext
	blas    C.qppl_cublasHandle_t
	mods    []cu.Module
	fns     map[string]cu.Function
	sigs    map[string]device.KernelInfo
	closed  bool
}

var (
	_ device.Device   = (*Device)(nil)
	_ device.Reserver = (*Device)(nil)
)

// Count returns the number of CUDA devices.
func Count() (int, error) { return cu.NumDevices() }

// Open opens GPU ordinal: retains its primary context, loads the PTX
// modules for its compute capability and creates a cuBLAS handle.
func Open(ordinal int) (*Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	sm := "sm_80"
	switch {
	case major >= 9:
		sm = "sm_90"
	case major < 8:
		return nil, fmt.Errorf("cuda: device %d has compute capability %d.%d; the kernels need 8.0 or later (bf16)", ordinal, major, minor)
	}
	label, _ := dev.Name()
	d := &Device{ordinal: ordinal, dev: dev, name: fmt.Sprintf("cuda:%d", ordinal), fns: map[string]cu.Function{}, sigs: device.Kernels()}
	if label != "" {
		d.name += " (" + label + ")"
	}
	if d.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("%s: primary context: %w", d.name, err)
	}
	err = d.do(func() error {
		for _, src := range device.Sources() {
			file := "ptx/" + src + "." + sm + ".ptx"
			ptx, err := ptxFS.ReadFile(file)
			if err != nil {
				return fmt.Errorf("kernel module %s is not in this binary: build it with `make cuda` (nvcc -ptx for sm_80 and sm_90)", file)
			}
			mod, err := cu.LoadData(string(ptx))
			if err != nil {
				return fmt.Errorf("loading %s: %w", file, err)
			}
			d.mods = append(d.mods, mod)
			for name, info := range d.sigs {
				if info.Source != src {
					continue
				}
				fn, err := mod.Function(name)
				if err != nil {
					return fmt.Errorf("%s: kernel %s: %w", file, name, err)
				}
				d.fns[name] = fn
			}
		}
		if st := C.cublasCreate_v2(&d.blas); st != 0 {
			return fmt.Errorf("cublasCreate failed with status %d", int(st))
		}
		return nil
	})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	return d, nil
}

// do runs f with the device's context current on a locked OS thread.
func (d *Device) do(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("%s: device is closed", d.name)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return err
	}
	return f()
}

// Name implements device.Device.
func (d *Device) Name() string { return d.name }

// Alloc implements device.Device.
func (d *Device) Alloc(bytes int64) (device.Ptr, error) {
	var p cu.DevicePtr
	err := d.do(func() error {
		var err error
		p, err = cu.MemAlloc(bytes)
		return err
	})
	if errors.Is(err, cu.OutOfMemory) {
		return 0, fmt.Errorf("%s: alloc %d bytes: %w: %w", d.name, bytes, err, device.ErrOutOfMemory)
	}
	if err != nil { // not every failure is a full device (closed device, bad context, zero size)
		return 0, fmt.Errorf("%s: alloc %d bytes: %w", d.name, bytes, err)
	}
	return device.Ptr(p), nil
}

// Free implements device.Device.
func (d *Device) Free(p device.Ptr) error {
	return d.wrap("free", d.do(func() error { return cu.MemFree(cu.DevicePtr(p)) }))
}

// CopyIn implements device.Device.
func (d *Device) CopyIn(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.wrap("copy in", d.do(func() error {
		return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
	}))
}

// CopyOut implements device.Device.
func (d *Device) CopyOut(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.wrap("copy out", d.do(func() error {
		return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)))
	}))
}

// Launch implements device.Device.
func (d *Device) Launch(kernel string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	info, ok := d.sigs[kernel]
	if !ok {
		return fmt.Errorf("%s: unknown kernel %q", d.name, kernel)
	}
	if err := device.CheckArgs(kernel, info.Sig, args); err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	if err := device.CheckGeometry(kernel, grid, block, sharedBytes); err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	slots := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case device.Ptr:
			slots[i] = uint64(v)
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case float32:
			slots[i] = uint64(*(*uint32)(unsafe.Pointer(&v)))
		}
		params[i] = unsafe.Pointer(&slots[i])
	}
	return d.wrap("launch "+kernel, d.do(func() error {
		fn := d.fns[kernel]
		return fn.Launch(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, sharedBytes, cu.NoStream, params)
	}))
}

// Gemm implements device.Device with cublasGemmEx (fp32 accumulation).
func (d *Device) Gemm(g device.Gemm) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	acc := C.int(0)
	if g.Accumulate {
		acc = 1
	}
	return d.do(func() error {
		st := C.qppl_gemm(d.blas, C.int(g.M), C.int(g.N), C.int(g.K), C.uint64_t(g.A), C.uint64_t(g.B), C.int(g.AType), C.uint64_t(g.C), acc)
		if st != 0 {
			return fmt.Errorf("%s: cublasGemmEx M=%d N=%d K=%d %v: status %d", d.name, g.M, g.N, g.K, g.AType, int(st))
		}
		return nil
	})
}

// attnStackBytes is the attention kernel's stack frame per thread (its
// q and accumulator rows of AttnMaxHead fp32 values; `ptxas -v` reports
// 2048 bytes for sm_80 and sm_90).
const attnStackBytes = 2 * device.AttnMaxHead * 4

// Reserve implements device.Reserver. At the attention kernel's first
// launch the driver reserves its stack frame for every thread the device
// can hold resident (2 KB × 2048 threads × 132 SMs ≈ 550 MB on an H100),
// outside any cuMemAlloc; cuBLAS allocates its workspace on first use, and
// allocations are rounded to the driver's granularity. 512 MiB covers the
// latter two.
func (d *Device) Reserve() int64 {
	sms, err1 := d.dev.Attribute(cu.MultiprocessorCount)
	thr, err2 := d.dev.Attribute(cu.MaxThreadsPerMultiprocessor)
	if err1 != nil || err2 != nil {
		sms, thr = 144, 2048 // the largest of sm_80/sm_90 parts
	}
	return int64(sms)*int64(thr)*attnStackBytes + 512<<20
}

// Sync implements device.Device.
func (d *Device) Sync() error { return d.wrap("synchronize", d.do(cu.Synchronize)) }

// MemInfo implements device.Device.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.do(func() error {
		var e error
		free, total, e = cu.MemInfo()
		return e
	})
	return free, total, d.wrap("memory info", err)
}

// Close releases the cuBLAS handle, the modules and the primary context.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	err := d.do(func() error {
		if d.blas != nil {
			C.cublasDestroy_v2(d.blas)
			d.blas = nil
		}
		for _, m := range d.mods {
			m.Unload()
		}
		d.mods = nil
		return nil
	})
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	if e := d.dev.ReleasePrimaryCtx(); e != nil && err == nil {
		err = e
	}
	return d.wrap("close", err)
}

func (d *Device) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", d.name, what, err)
}
