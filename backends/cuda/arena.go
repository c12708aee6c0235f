package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
)

// arenaAlign is the alignment of every tensor inside an arena (cudaMalloc
// returns 256-byte aligned memory; the kernels' 16-byte vector loads and
// cuBLAS need at least 16).
const arenaAlign = 256

func alignUp(n int64) int64 { return (n + arenaAlign - 1) / arenaAlign * arenaAlign }

// arenaBytes is the arena size holding tensors of the given byte sizes
// (each at least 1 byte, aligned to arenaAlign).
func arenaBytes(sizes ...int64) int64 {
	var n int64
	for _, s := range sizes {
		n += alignUp(max(s, 1))
	}
	return n
}

// arena is a device.Device whose Alloc hands out aligned pieces of one
// device allocation (a layer's weights: one cuMemAlloc instead of 10–40,
// no per-allocation granularity loss). Free of a piece is a no-op; the
// arena is released as a whole by its base pointer. Everything else goes
// to the underlying device.
type arena struct {
	device.Device
	base     device.Ptr
	off, cap int64
}

func newArena(d device.Device, bytes int64) (*arena, error) {
	p, err := d.Alloc(max(bytes, 1))
	if err != nil {
		return nil, err
	}
	return &arena{Device: d, base: p, cap: bytes}, nil
}

// Alloc implements device.Device from the arena.
func (a *arena) Alloc(bytes int64) (device.Ptr, error) {
	n := alignUp(max(bytes, 1))
	if a.off+n > a.cap {
		return 0, fmt.Errorf("%s: arena of %d bytes overflows (%d used, %d more asked): the layer's size was planned wrong", a.Name(), a.cap, a.off, bytes)
	}
	p := a.base + device.Ptr(a.off)
	a.off += n
	return p, nil
}

// Free implements device.Device: pieces are released with the arena.
func (a *arena) Free(device.Ptr) error { return nil }
