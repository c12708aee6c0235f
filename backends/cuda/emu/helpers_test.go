//go:build cgo

package emu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
)

func newTestDevice(t *testing.T) *Device {
	t.Helper()
	d, err := New(Options{Name: "emu:test", MemBytes: 1 << 30, CheckGuards: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func upBytes(t *testing.T, d *Device, b []byte) device.Ptr {
	t.Helper()
	n := len(b)
	if n == 0 {
		n = 1
	}
	p, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(p, b); err != nil {
		t.Fatal(err)
	}
	return p
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func upF32(t *testing.T, d *Device, x []float32) device.Ptr { return upBytes(t, d, f32Bytes(x)) }

func upI32(t *testing.T, d *Device, x []int32) device.Ptr {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return upBytes(t, d, b)
}

func allocT(t *testing.T, d *Device, n int) device.Ptr {
	t.Helper()
	p, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func downF32(t *testing.T, d *Device, p device.Ptr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	if err := d.CopyOut(b, p); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

func downI32(t *testing.T, d *Device, p device.Ptr, n int) []int32 {
	t.Helper()
	b := make([]byte, 4*n)
	if err := d.CopyOut(b, p); err != nil {
		t.Fatal(err)
	}
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

func downU16(t *testing.T, d *Device, p device.Ptr, n int) []uint16 {
	t.Helper()
	b := make([]byte, 2*n)
	if err := d.CopyOut(b, p); err != nil {
		t.Fatal(err)
	}
	x := make([]uint16, n)
	for i := range x {
		x[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return x
}

func launch(t *testing.T, d *Device, k string, grid, block device.Dim3, shared int, args ...any) {
	t.Helper()
	if err := d.Launch(k, grid, block, shared, args...); err != nil {
		t.Fatal(err)
	}
}

// bf16RNE is an independent float32→bf16 rounding (via float64 arithmetic).
func bf16RNE(f float32) uint16 {
	if f != f {
		return uint16(math.Float32bits(f)>>16) | 0x40
	}
	b := math.Float32bits(f)
	hi := b &^ 0xffff
	if hi == b {
		return uint16(b >> 16) // exact, including ±Inf
	}
	lo := math.Float32frombits(hi)
	up := math.Float32frombits(hi + 0x10000)
	d1 := math.Abs(float64(f) - float64(lo))
	upv := float64(up)
	if math.IsInf(upv, 0) { // IEEE rounding treats the overflow point as 2^128
		upv = math.Copysign(0x1p128, upv)
	}
	d2 := math.Abs(upv - float64(f))
	if d1 < d2 || (d1 == d2 && (hi>>16)&1 == 0) {
		return uint16(hi >> 16)
	}
	return uint16((hi + 0x10000) >> 16)
}

// worst reports the largest violation of |got-want| <= abs + rel*|want|.
func checkClose(t *testing.T, name string, got []float32, want []float64, abs, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	worst, wi := 0.0, -1
	for i := range want {
		e := math.Abs(float64(got[i]) - want[i])
		lim := abs + rel*math.Abs(want[i])
		if !(e <= lim) {
			if r := e / lim; r > worst || math.IsNaN(e) {
				worst, wi = r, i
			}
		}
	}
	if wi >= 0 {
		t.Errorf("%s: element %d = %v, want %v (error %.3g x the tolerance abs %g + rel %g)", name, wi, got[wi], want[wi], worst, abs, rel)
	}
}
