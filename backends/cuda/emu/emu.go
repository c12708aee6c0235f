package emu

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fno-strict-aliasing -I${SRCDIR} -I${SRCDIR}/../kernels
#cgo LDFLAGS: -lstdc++
#include <stdlib.h>
#include <string.h>
#include "runtime.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/qppl/qppl/backends/cuda/device"
)

// ErrNoCgo is what New returns in binaries built without cgo (see
// nocgo.go); with cgo it is never returned.
var ErrNoCgo = errors.New("emu: this binary was built without cgo (CGO_ENABLED=0); the kernel emulator needs a C++ compiler and cgo")

// guard is the number of NaN-filled bytes on each side of an allocation.
const guard = 256

// Options configures an emulated device.
type Options struct {
	Name     string // e.g. "emu:0"
	MemBytes int64  // emulated device memory; 0 = 4 GiB
	// CheckGuards verifies the NaN guard bands of every allocation after
	// every Launch and Gemm (tests), naming the kernel that wrote out of
	// bounds.
	CheckGuards bool
}

type alloc struct {
	base unsafe.Pointer // start of the guarded block
	size int64
}

// Device is one emulated CUDA device. Devices share nothing; several may be
// used concurrently from different goroutines (each method is serialized
// per device).
type Device struct {
	mu      sync.Mutex
	opt     Options
	kernels map[string]*C.EmuKernel
	allocs  map[device.Ptr]alloc
	used    int64
	closed  bool
}

var _ device.Device = (*Device)(nil)

// New returns an emulated device.
func New(opt Options) (*Device, error) {
	if opt.MemBytes == 0 {
		opt.MemBytes = 4 << 30
	}
	if opt.Name == "" {
		opt.Name = "emu"
	}
	d := &Device{opt: opt, kernels: map[string]*C.EmuKernel{}, allocs: map[device.Ptr]alloc{}}
	want := device.Kernels()
	for i := 0; i < int(C.emu_kernel_count()); i++ {
		k := C.emu_kernel_at(C.int(i))
		name, sig := C.GoString(k.name), C.GoString(k.sig)
		info, ok := want[name]
		if !ok {
			return nil, fmt.Errorf("emu: kernel %s is not in device.Kernels", name)
		}
		if info.Sig != sig {
			return nil, fmt.Errorf("emu: kernel %s has signature %s, device.Kernels says %s", name, sig, info.Sig)
		}
		d.kernels[name] = k
	}
	for name := range want {
		if d.kernels[name] == nil {
			return nil, fmt.Errorf("emu: kernel %s of device.Kernels is not compiled into the emulator", name)
		}
	}
	return d, nil
}

// Name implements device.Device.
func (d *Device) Name() string { return d.opt.Name }

// Alloc implements device.Device. New memory reads as NaN (0xFF bytes).
func (d *Device) Alloc(bytes int64) (device.Ptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes <= 0 {
		return 0, fmt.Errorf("%s: alloc of %d bytes", d.opt.Name, bytes)
	}
	if d.used+bytes > d.opt.MemBytes {
		return 0, fmt.Errorf("%s: alloc %d bytes with %d of %d in use: %w", d.opt.Name, bytes, d.used, d.opt.MemBytes, device.ErrOutOfMemory)
	}
	base := C.malloc(C.size_t(bytes + 2*guard))
	if base == nil {
		return 0, fmt.Errorf("%s: host malloc of %d bytes failed: %w", d.opt.Name, bytes, device.ErrOutOfMemory)
	}
	C.memset(base, 0xff, C.size_t(bytes+2*guard))
	p := device.Ptr(uintptr(base) + guard)
	d.allocs[p] = alloc{base, bytes}
	d.used += bytes
	return p, nil
}

// Free implements device.Device.
func (d *Device) Free(p device.Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("%s: free of unknown pointer %#x", d.opt.Name, uint64(p))
	}
	C.free(a.base)
	delete(d.allocs, p)
	d.used -= a.size
	return nil
}

// span checks that [p, p+n) lies inside one allocation and returns p as a
// pointer derived from that allocation.
func (d *Device) span(p device.Ptr, n int64) (unsafe.Pointer, error) {
	for base, a := range d.allocs {
		if p >= base && uint64(p)+uint64(n) <= uint64(base)+uint64(a.size) {
			return unsafe.Add(a.base, guard+int64(p-base)), nil
		}
	}
	return nil, fmt.Errorf("%s: range %#x+%d is not inside an allocation", d.opt.Name, uint64(p), n)
}

// CopyIn implements device.Device.
func (d *Device) CopyIn(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	q, err := d.span(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	copy(unsafe.Slice((*byte)(q), len(src)), src)
	return nil
}

// CopyOut implements device.Device.
func (d *Device) CopyOut(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	q, err := d.span(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("copy out: %w", err)
	}
	copy(dst, unsafe.Slice((*byte)(q), len(dst)))
	return nil
}

// Launch implements device.Device: it runs the kernel's C++ translation
// over the grid on the calling goroutine's OS thread.
func (d *Device) Launch(kernel string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.kernels[kernel]
	if k == nil {
		return fmt.Errorf("%s: unknown kernel %q", d.opt.Name, kernel)
	}
	if err := device.CheckArgs(kernel, C.GoString(k.sig), args); err != nil {
		return fmt.Errorf("%s: %w", d.opt.Name, err)
	}
	if err := device.CheckGeometry(kernel, grid, block, sharedBytes); err != nil {
		return fmt.Errorf("%s: %w", d.opt.Name, err)
	}
	vals := make([]C.uint64_t, len(args)+1)
	for i, a := range args {
		switch v := a.(type) {
		case device.Ptr:
			// 0 is an absent optional operand; anything else must point into a
			// live allocation (a freed or stale pointer would be a
			// use-after-free on a GPU)
			if v != 0 {
				if _, err := d.span(v, 0); err != nil {
					return fmt.Errorf("%s: launch %s: pointer argument %d: %w", d.opt.Name, kernel, i, err)
				}
			}
			vals[i] = C.uint64_t(v)
		case int32:
			vals[i] = C.uint64_t(uint32(v))
		case uint32:
			vals[i] = C.uint64_t(v)
		case float32:
			vals[i] = C.uint64_t(*(*uint32)(unsafe.Pointer(&v)))
		}
	}
	msg := C.emu_launch(k, &vals[0], C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.size_t(sharedBytes))
	if msg != nil {
		return fmt.Errorf("%s: kernel %s: %s", d.opt.Name, kernel, C.GoString(msg))
	}
	return d.checkGuards(kernel)
}

// Gemm implements device.Device on the CPU: inputs converted exactly to
// float32, products accumulated in fp32 in increasing k.
func (d *Device) Gemm(g device.Gemm) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%s: %w", d.opt.Name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	es := int64(g.AType.Size())
	var ops [3]unsafe.Pointer
	for i, c := range []struct {
		p device.Ptr
		n int64
		w string
	}{{g.A, int64(g.M*g.K) * es, "A"}, {g.B, int64(g.N*g.K) * es, "B"}, {g.C, int64(g.M*g.N) * 4, "C"}} {
		q, err := d.span(c.p, c.n)
		if err != nil {
			return fmt.Errorf("gemm operand %s: %w", c.w, err)
		}
		ops[i] = q
	}
	acc := C.int(0)
	if g.Accumulate {
		acc = 1
	}
	C.emu_gemm(C.int(g.M), C.int(g.N), C.int(g.K), ops[0], ops[1], C.int(g.AType), (*C.float)(ops[2]), acc)
	return d.checkGuards("gemm")
}

// BatchedGemm implements device.BatchedGemmer on the CPU with the
// semantics of Gemm (inputs converted exactly to float32, fp32
// accumulation in increasing k), then the product by Alpha.
func (d *Device) BatchedGemm(g device.BatchedGemm) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%s: %w", d.opt.Name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	es := int64(g.AType.Size())
	na, nb, nc := g.Extents()
	var ops [3]unsafe.Pointer
	for i, c := range []struct {
		p device.Ptr
		n int64
		w string
	}{{g.A, na * es, "A"}, {g.B, nb * es, "B"}, {g.C, nc * 4, "C"}} {
		q, err := d.span(c.p, c.n)
		if err != nil {
			return fmt.Errorf("batched gemm operand %s: %w", c.w, err)
		}
		ops[i] = q
	}
	tb, acc := C.int(0), C.int(0)
	if g.TransB {
		tb = 1
	}
	if g.Accumulate {
		acc = 1
	}
	C.emu_gemm_batched(C.int(g.M), C.int(g.N), C.int(g.K), ops[0], C.int(g.LDA), C.longlong(g.StrideA), ops[1], C.int(g.LDB),
		C.longlong(g.StrideB), tb, C.int(g.AType), (*C.float)(ops[2]), C.int(g.LDC), C.longlong(g.StrideC), C.int(g.Batch),
		C.float(g.Alpha), acc)
	return d.checkGuards("batched gemm")
}

func (d *Device) checkGuards(what string) error {
	if !d.opt.CheckGuards {
		return nil
	}
	ptrs := make([]device.Ptr, 0, len(d.allocs))
	for p := range d.allocs {
		ptrs = append(ptrs, p)
	}
	sort.Slice(ptrs, func(i, j int) bool { return ptrs[i] < ptrs[j] })
	for _, p := range ptrs {
		a := d.allocs[p]
		blk := unsafe.Slice((*byte)(a.base), a.size+2*guard)
		for i := 0; i < guard; i++ {
			if blk[i] != 0xff {
				return fmt.Errorf("%s: %s wrote %d bytes before allocation %#x (size %d)", d.opt.Name, what, guard-i, uint64(p), a.size)
			}
			if blk[int64(guard)+a.size+int64(i)] != 0xff {
				return fmt.Errorf("%s: %s wrote at byte %d past the end of allocation %#x (size %d)", d.opt.Name, what, i, uint64(p), a.size)
			}
		}
	}
	return nil
}

// Sync implements device.Device (emulated work is synchronous).
func (d *Device) Sync() error { return nil }

// MemInfo implements device.Device.
func (d *Device) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opt.MemBytes - d.used, d.opt.MemBytes, nil
}

// Close frees every allocation.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, a := range d.allocs {
		C.free(a.base)
		delete(d.allocs, p)
	}
	d.used = 0
	d.closed = true
	return nil
}
