//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Own prototypes of the few cuBLAS entry points used (cublas_v2.h names,
// unchanged from CUDA 11 to 13; enums are int-sized), resolved with dlopen
// from the first cuBLAS soname present, so one binary runs with the
// cuBLAS of toolkit 13, 12 or 11.
typedef struct cublasContext *qppl_cublasHandle_t;
typedef int qppl_cublasCreate_fn(qppl_cublasHandle_t *handle);
typedef int qppl_cublasDestroy_fn(qppl_cublasHandle_t handle);
typedef int qppl_cublasGemmEx_fn(qppl_cublasHandle_t handle, int transa, int transb, int m, int n, int k,
				 const void *alpha, const void *A, int Atype, int lda, const void *B, int Btype, int ldb,
				 const void *beta, void *C, int Ctype, int ldc, int computeType, int algo);
typedef int qppl_cublasGemmStridedBatchedEx_fn(qppl_cublasHandle_t handle, int transa, int transb, int m, int n, int k,
				 const void *alpha, const void *A, int Atype, int lda, long long strideA,
				 const void *B, int Btype, int ldb, long long strideB,
				 const void *beta, void *C, int Ctype, int ldc, long long strideC, int batch, int computeType, int algo);

static qppl_cublasCreate_fn *p_cublasCreate;
static qppl_cublasDestroy_fn *p_cublasDestroy;
static qppl_cublasGemmEx_fn *p_cublasGemmEx;
static qppl_cublasGemmStridedBatchedEx_fn *p_cublasGemmStridedBatchedEx;
static const char *qppl_cublas_soname;

// qppl_cublas_load returns NULL or a message naming the sonames tried.
static const char *qppl_cublas_load(void) {
	static char msg[768];
	static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
	void *h = NULL;
	char tried[512] = "";
	for (int i = 0; i < 4 && !h; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
		if (h) qppl_cublas_soname = names[i];
		else snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", i ? ", " : "", names[i]);
	}
	if (!h) {
		snprintf(msg, sizeof msg, "cuBLAS not found (tried %s; last error: %s): install the CUDA toolkit's cuBLAS or add its lib64 directory to LD_LIBRARY_PATH", tried, dlerror());
		return msg;
	}
	p_cublasCreate = (qppl_cublasCreate_fn *)dlsym(h, "cublasCreate_v2");
	p_cublasDestroy = (qppl_cublasDestroy_fn *)dlsym(h, "cublasDestroy_v2");
	p_cublasGemmEx = (qppl_cublasGemmEx_fn *)dlsym(h, "cublasGemmEx");
	p_cublasGemmStridedBatchedEx = (qppl_cublasGemmStridedBatchedEx_fn *)dlsym(h, "cublasGemmStridedBatchedEx");
	if (!p_cublasCreate || !p_cublasDestroy || !p_cublasGemmEx || !p_cublasGemmStridedBatchedEx) {
		snprintf(msg, sizeof msg, "%s lacks cublasCreate_v2, cublasDestroy_v2, cublasGemmEx or cublasGemmStridedBatchedEx", qppl_cublas_soname);
		return msg;
	}
	return NULL;
}

static const char *qppl_cublas_name(void) { return qppl_cublas_soname; }
static int qppl_cublas_create(qppl_cublasHandle_t *h) { return p_cublasCreate(h); }
static int qppl_cublas_destroy(qppl_cublasHandle_t h) { return p_cublasDestroy(h); }

static int qppl_dt(int t) {
	// device.DType -> cudaDataType: CUDA_R_32F 0, CUDA_R_16BF 14, CUDA_R_16F 2
	return t == 0 ? 0 : (t == 1 ? 14 : 2);
}

// qppl_gemm: row-major C[M][N] (+)= A[M][K]·B[N][K]ᵀ as the column-major
// Cᵀ = op_T(B)·A (CUBLAS_OP_T 1, CUBLAS_OP_N 0, CUBLAS_COMPUTE_32F 68,
// CUBLAS_GEMM_DEFAULT -1).
static int qppl_gemm(qppl_cublasHandle_t h, int M, int N, int K, uint64_t A, uint64_t B, int t, uint64_t C, int acc) {
	int dt = qppl_dt(t);
	float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
	return p_cublasGemmEx(h, 1, 0, N, M, K, &alpha, (const void *)(uintptr_t)B, dt, K, (const void *)(uintptr_t)A, dt, K,
			      &beta, (void *)(uintptr_t)C, 0, N, 68, -1);
}

// qppl_gemm_batched: for b < batch, row-major
//   C_b[M][N] (+)= alpha · A_b[M][K] · op(B_b)
// with op(B) = B[N][K]ᵀ (transB) or B[K][N] (!transB), lda/ldb/ldc the
// row strides and sA/sB/sC the batch strides in elements. C is fp32; acc
// adds to it (beta 1) instead of overwriting it (beta 0).
static int qppl_gemm_batched(qppl_cublasHandle_t h, int M, int N, int K, int transB, float alpha,
			     uint64_t A, int at, int lda, long long sA, uint64_t B, int bt, int ldb, long long sB,
			     uint64_t C, int ldc, long long sC, int batch, int acc) {
	float beta = acc ? 1.0f : 0.0f;
	// column-major: Cᵀ[N][M] = op(B)ᵀ·Aᵀ; Bᵀ of a row-major [N][K] is op_T
	return p_cublasGemmStridedBatchedEx(h, transB ? 1 : 0, 0, N, M, K, &alpha, (const void *)(uintptr_t)B, qppl_dt(bt), ldb, sB,
					    (const void *)(uintptr_t)A, qppl_dt(at), lda, sA, &beta, (void *)(uintptr_t)C, 0, ldc, sC,
					    batch, 68, -1);
}
*/
import "C"

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
)

// Kernel images built by `make cuda` (mk/cuda.mk) from ../kernels/*.cu:
// kernels/<src>.fatbin (SASS for sm_80, sm_90 [, sm_100, sm_120] and
// compute_90 PTX) and kernels/<src>.ptx (the compute_90 PTX alone, read
// at Open to check the kernels' parameter lists against device.Kernels).
//
//go:embed all:ptx
var kernelFS embed.FS

// Toolkit is the CUDA toolkit version the kernels were compiled with
// (set by mk/cuda.mk through -ldflags -X; "unknown" otherwise).
var Toolkit = "unknown"

// Stats counts a device's traffic since Open (or the last ResetStats).
type Stats struct {
	HtoDBytes, DtoHBytes int64
	Launches, Gemms      int64
	Allocs               int64
	AllocBytes           int64
}

// Info describes an opened device (printed by make gpu-check).
type Info struct {
	Name          string
	Ordinal       int
	CC            string // compute capability, e.g. "9.0"
	SMs           int
	TotalMem      int64
	DriverVersion int // cuDriverGetVersion, e.g. 12040
	Binding       string
	Toolkit       string
	CuBLAS        string // the soname loaded
	MemClockKHz   int
	MemBusBits    int
}

// Device is one GPU.
type Device struct {
	mu      sync.Mutex
	drv     driver
	ordinal int
	name    string
	info    Info
	ctx     uintptr
	blas    C.qppl_cublasHandle_t
	mods    []uintptr
	fns     map[string]uintptr
	sigs    map[string]device.KernelInfo
	sync    bool // QPPL_CUDA_SYNC=1: synchronize and check after every launch
	closed  bool
	stats   struct{ htod, dtoh, launches, gemms, allocs, allocBytes atomic.Int64 }
}

var (
	_ device.Device   = (*Device)(nil)
	_ device.Reserver = (*Device)(nil)
)

// ErrNoGPU wraps every error that means "this machine cannot run the CUDA
// backend" (no driver library, no device, cuInit failed), so callers can
// fall back to --backend emu or reference with a clear message.
var ErrNoGPU = errors.New("no usable NVIDIA GPU (use --backend reference, or emu for the CPU emulator of the same kernels)")

var (
	initOnce sync.Once
	theDrv   driver
	initErr  error
)

// load initializes the driver binding and cuBLAS once.
func load() (driver, error) {
	initOnce.Do(func() {
		d := newDriver()
		if err := d.init(); err != nil {
			initErr = fmt.Errorf("cuda: %w: %v", ErrNoGPU, err)
			return
		}
		if msg := C.qppl_cublas_load(); msg != nil {
			initErr = fmt.Errorf("cuda: %s", C.GoString(msg))
			return
		}
		theDrv = d
	})
	return theDrv, initErr
}

// Count returns the number of CUDA devices.
func Count() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	return d.deviceCount()
}

// SyncFromEnv reports whether QPPL_CUDA_SYNC=1 asks for a synchronization
// and error check after every kernel launch and GEMM.
func SyncFromEnv() bool { return os.Getenv("QPPL_CUDA_SYNC") == "1" }

// Open opens GPU ordinal: retains its primary context, loads the kernel
// fatbins (cuModuleLoadDataEx with a JIT error log), checks every kernel's
// PTX parameter list against device.Kernels and creates a cuBLAS handle.
func Open(ordinal int) (*Device, error) {
	drv, err := load()
	if err != nil {
		return nil, err
	}
	n, err := drv.deviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: counting devices: %v", ErrNoGPU, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: %w: the driver reports no devices", ErrNoGPU)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", ordinal, n)
	}
	major, err1 := drv.attribute(ordinal, attrCCMajor)
	minor, err2 := drv.attribute(ordinal, attrCCMinor)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if major < 8 {
		return nil, fmt.Errorf("cuda: device %d has compute capability %d.%d; the kernels need 8.0 or later (bf16)", ordinal, major, minor)
	}
	label, _ := drv.deviceName(ordinal)
	d := &Device{drv: drv, ordinal: ordinal, name: fmt.Sprintf("cuda:%d", ordinal), fns: map[string]uintptr{}, sigs: device.Kernels(), sync: SyncFromEnv()}
	if label != "" {
		d.name += " (" + label + ")"
	}
	d.info = Info{Name: label, Ordinal: ordinal, CC: fmt.Sprintf("%d.%d", major, minor), Binding: drv.name(), Toolkit: Toolkit}
	d.info.SMs, _ = drv.attribute(ordinal, attrMultiprocessorCount)
	d.info.TotalMem, _ = drv.totalMem(ordinal)
	d.info.DriverVersion, _ = drv.version()
	d.info.MemClockKHz, _ = drv.attribute(ordinal, attrMemoryClockRate)
	d.info.MemBusBits, _ = drv.attribute(ordinal, attrGlobalMemoryBusWidth)
	if s := C.qppl_cublas_name(); s != nil {
		d.info.CuBLAS = C.GoString(s)
	}
	if d.ctx, err = drv.primaryCtxRetain(ordinal); err != nil {
		return nil, fmt.Errorf("%s: primary context: %w", d.name, err)
	}
	err = d.do(func() error {
		for _, src := range device.Sources() {
			if err := d.loadSource(src); err != nil {
				return err
			}
		}
		if st := C.qppl_cublas_create(&d.blas); st != 0 {
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

// loadSource checks src's PTX against the Go launch table, loads its
// fatbin and resolves its kernels.
func (d *Device) loadSource(src string) error {
	ptxFile, fatFile := "ptx/"+src+".ptx", "ptx/"+src+".fatbin"
	ptx, err1 := kernelFS.ReadFile(ptxFile)
	fat, err2 := kernelFS.ReadFile(fatFile)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("kernel module %s is not in this binary: build it with `make cuda` (nvcc -fatbin for sm_80, sm_90 and compute_90 PTX)", src)
	}
	if err := device.CheckPTX(src, ptx, d.sigs); err != nil {
		return fmt.Errorf("%w (the embedded kernels are stale: run `make cuda` after editing a .cu file)", err)
	}
	mod, err := d.drv.moduleLoad(fat)
	if err != nil {
		return fmt.Errorf("loading %s (device compute capability %s; it holds SASS for %s and compute_90 PTX): %w", fatFile, d.info.CC, fatbinArchs(fat), err)
	}
	d.mods = append(d.mods, mod)
	for name, info := range d.sigs {
		if info.Source != src {
			continue
		}
		fn, err := d.drv.moduleFunction(mod, name)
		if err != nil {
			return fmt.Errorf("%s: kernel %s: %w", fatFile, name, err)
		}
		d.fns[name] = fn
	}
	return nil
}

// fatbinArchs lists the sm_NN names found in a fatbin (for error messages).
func fatbinArchs(fat []byte) string {
	var out []string
	for _, a := range []string{"sm_80", "sm_90", "sm_100", "sm_120"} {
		if bytes.Contains(fat, []byte(a)) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return "no recognised sm_NN"
	}
	return strings.Join(out, ", ")
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
	if err := d.drv.ctxSetCurrent(d.ctx); err != nil {
		return err
	}
	return f()
}

// Name implements device.Device.
func (d *Device) Name() string { return d.name }

// Info returns what the device and its software stack are.
func (d *Device) Info() Info { return d.info }

// Stats returns the traffic counters.
func (d *Device) Stats() Stats {
	return Stats{HtoDBytes: d.stats.htod.Load(), DtoHBytes: d.stats.dtoh.Load(), Launches: d.stats.launches.Load(),
		Gemms: d.stats.gemms.Load(), Allocs: d.stats.allocs.Load(), AllocBytes: d.stats.allocBytes.Load()}
}

// Alloc implements device.Device.
func (d *Device) Alloc(bytes int64) (device.Ptr, error) {
	var p device.Ptr
	err := d.do(func() error {
		var err error
		p, err = d.drv.memAlloc(bytes)
		return err
	})
	if errors.Is(err, device.ErrOutOfMemory) {
		return 0, fmt.Errorf("%s: alloc %d bytes: %w", d.name, bytes, err)
	}
	if err != nil { // not every failure is a full device (closed device, bad context, zero size)
		return 0, fmt.Errorf("%s: alloc %d bytes: %w", d.name, bytes, err)
	}
	d.stats.allocs.Add(1)
	d.stats.allocBytes.Add(bytes)
	return p, nil
}

// Free implements device.Device.
func (d *Device) Free(p device.Ptr) error {
	return d.wrap("free", d.do(func() error { return d.drv.memFree(p) }))
}

// CopyIn implements device.Device.
func (d *Device) CopyIn(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	d.stats.htod.Add(int64(len(src)))
	return d.wrap("copy in", d.do(func() error {
		return d.drv.memcpyHtoD(dst, unsafe.Pointer(&src[0]), int64(len(src)))
	}))
}

// CopyOut implements device.Device.
func (d *Device) CopyOut(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	d.stats.dtoh.Add(int64(len(dst)))
	return d.wrap("copy out", d.do(func() error {
		return d.drv.memcpyDtoH(unsafe.Pointer(&dst[0]), src, int64(len(dst)))
	}))
}

// Launch implements device.Device. With QPPL_CUDA_SYNC=1 it synchronizes
// after the launch, so a fault is reported here, naming the kernel, its
// geometry and its arguments, instead of at the next copy.
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
	slots := device.ArgSlots(args)
	d.stats.launches.Add(1)
	err := d.do(func() error {
		if err := d.drv.launch(d.fns[kernel], grid, block, sharedBytes, slots); err != nil {
			return err
		}
		if d.sync {
			if err := d.drv.ctxSynchronize(); err != nil {
				return fmt.Errorf("after the launch (QPPL_CUDA_SYNC=1): %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: launch %s grid %v block %v shared %d args %s: %w", d.name, kernel, grid, block, sharedBytes, device.FormatArgs(args), err)
	}
	return nil
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
	d.stats.gemms.Add(1)
	return d.do(func() error {
		st := C.qppl_gemm(d.blas, C.int(g.M), C.int(g.N), C.int(g.K), C.uint64_t(g.A), C.uint64_t(g.B), C.int(g.AType), C.uint64_t(g.C), acc)
		if st != 0 {
			return fmt.Errorf("%s: cublasGemmEx M=%d N=%d K=%d %v: status %d", d.name, g.M, g.N, g.K, g.AType, int(st))
		}
		return d.syncCheck("cublasGemmEx")
	})
}

// BatchedGemm implements device.BatchedGemmer with
// cublasGemmStridedBatchedEx (fp32 accumulation).
func (d *Device) BatchedGemm(g device.BatchedGemm) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	tb, acc := C.int(0), C.int(0)
	if g.TransB {
		tb = 1
	}
	if g.Accumulate { // attention's p·v sums its bf16/fp16 weight parts
		acc = 1
	}
	d.stats.gemms.Add(1)
	return d.do(func() error {
		st := C.qppl_gemm_batched(d.blas, C.int(g.M), C.int(g.N), C.int(g.K), tb, C.float(g.Alpha),
			C.uint64_t(g.A), C.int(g.AType), C.int(g.LDA), C.longlong(g.StrideA),
			C.uint64_t(g.B), C.int(g.BType), C.int(g.LDB), C.longlong(g.StrideB),
			C.uint64_t(g.C), C.int(g.LDC), C.longlong(g.StrideC), C.int(g.Batch), acc)
		if st != 0 {
			return fmt.Errorf("%s: cublasGemmStridedBatchedEx %+v: status %d", d.name, g, int(st))
		}
		return d.syncCheck("cublasGemmStridedBatchedEx")
	})
}

func (d *Device) syncCheck(what string) error {
	if !d.sync {
		return nil
	}
	if err := d.drv.ctxSynchronize(); err != nil {
		return fmt.Errorf("%s: after %s (QPPL_CUDA_SYNC=1): %w", d.name, what, err)
	}
	return nil
}

// Reserve implements device.Reserver: cuBLAS allocates its workspace on
// first use, kernels' local memory is reserved by the driver for every
// resident thread, and allocations are rounded to the driver's
// granularity. The kernels use no local-memory arrays since the attention
// kernel became GEMM + softmax, so 512 MiB covers all three.
func (d *Device) Reserve() int64 { return 512 << 20 }

// Sync implements device.Device.
func (d *Device) Sync() error { return d.wrap("synchronize", d.do(d.drv.ctxSynchronize)) }

// MemInfo implements device.Device.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.do(func() error {
		var e error
		free, total, e = d.drv.memGetInfo()
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
			C.qppl_cublas_destroy(d.blas)
			d.blas = nil
		}
		for _, m := range d.mods {
			d.drv.moduleUnload(m)
		}
		d.mods = nil
		return nil
	})
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	if d.ctx != 0 {
		if e := d.drv.primaryCtxRelease(d.ordinal); e != nil && err == nil {
			err = e
		}
	}
	return d.wrap("close", err)
}

func (d *Device) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", d.name, what, err)
}

// cString returns the NUL-terminated prefix of b.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}
