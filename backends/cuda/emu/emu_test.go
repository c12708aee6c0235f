//go:build cgo

package emu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/x448/float16"
)

func TestConversionsRNE(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(1, 1))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, 65519.99, 1e-8, 6e-8, 3e-8, 2.9802322e-08,
		5.9604645e-08, 6.1035156e-05, 6.1e-05, 1.0009765625, 1.00048828125, 1.00146484375, 3.4e38, float32(math.Inf(1)),
		float32(math.Inf(-1)), 1.00390625, 1.01171875, 1.005859375}
	for i := 0; i < 20000; i++ {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	n := len(vals)
	in := upF32(t, d, vals)
	for _, dt := range []device.DType{device.BF16, device.F16} {
		out := allocT(t, d, 2*n)
		launch(t, d, device.KCastAct, device.D1(8), device.D1(128), 0, out, in, int32(n), int32(dt))
		got := downU16(t, d, out, n)
		for i, v := range vals {
			var want uint16
			if dt == device.BF16 {
				want = bf16RNE(v)
			} else {
				want = uint16(float16.Fromfloat32(v))
			}
			if v != v { // NaN: any quiet NaN
				if dt == device.BF16 && (got[i]&0x7f80 != 0x7f80 || got[i]&0x7f == 0) || dt == device.F16 && (got[i]&0x7c00 != 0x7c00 || got[i]&0x3ff == 0) {
					t.Fatalf("%v(%08x): NaN became %04x", dt, math.Float32bits(v), got[i])
				}
				continue
			}
			if got[i] != want {
				t.Fatalf("%v(%g = %08x) = %04x, want %04x", dt, v, math.Float32bits(v), got[i], want)
			}
		}
	}
}

func TestGuardBandsCatchOutOfBounds(t *testing.T) {
	d := newTestDevice(t)
	p := allocT(t, d, 4*10)
	if err := d.Launch(device.KFill, device.D1(1), device.D1(32), 0, p, int32(10), float32(1)); err != nil {
		t.Fatalf("in-bounds fill: %v", err)
	}
	err := d.Launch(device.KFill, device.D1(1), device.D1(32), 0, p, int32(11), float32(1))
	if err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Fatalf("out-of-bounds fill: err = %v, want a guard-band error", err)
	}
}

func TestLaunchArgumentChecks(t *testing.T) {
	d := newTestDevice(t)
	p := allocT(t, d, 64)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{p, int32(1)}, "2 arguments"},
		{[]any{p, float32(1), float32(1)}, "argument 1 is f"},
		{[]any{p, 1, float32(1)}, "unsupported Go type"},
	} {
		err := d.Launch(device.KFill, device.D1(1), device.D1(1), 0, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := d.Launch("nope", device.D1(1), device.D1(1), 0); err == nil {
		t.Error("unknown kernel accepted")
	}
	// A pointer that is not inside a live allocation (freed, stale).
	q := allocT(t, d, 64)
	if err := d.Free(q); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(device.KFill, device.D1(1), device.D1(1), 0, q, int32(1), float32(1)); err == nil || !strings.Contains(err.Error(), "not inside an allocation") {
		t.Errorf("launch with a freed pointer: err = %v", err)
	}
	// Geometry a GPU refuses is refused here too (device.CheckGeometry).
	for _, g := range []struct {
		grid, block device.Dim3
		shared      int
	}{{device.Dim3{X: 1, Y: 65536, Z: 1}, device.D1(1), 0}, {device.D1(1), device.D1(1025), 0}, {device.D1(1), device.D1(1), 48 << 10}} {
		if err := d.Launch(device.KFill, g.grid, g.block, g.shared, p, int32(0), float32(1)); err == nil {
			t.Errorf("grid %v block %v shared %d accepted", g.grid, g.block, g.shared)
		}
	}
}

func TestOutOfMemory(t *testing.T) {
	d, err := New(Options{MemBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.Alloc(600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(600); err == nil || !strings.Contains(err.Error(), "out of device memory") {
		t.Fatalf("second alloc: %v", err)
	}
	if free, total, _ := d.MemInfo(); free != 400 || total != 1000 {
		t.Fatalf("MemInfo = %d, %d", free, total)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(600); err != nil {
		t.Fatal(err)
	}
}

// TestGemm: fp32 accumulation of exactly converted inputs. Error budget:
// inputs are exact in every dtype (they are generated in it), so the only
// error is the fp32 accumulation, ≤ K·2^-24·Σ|a·b| (first-order bound).
func TestGemm(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(2, 3))
	for _, sh := range []struct{ M, N, K int }{{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 16, 300}} {
		for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
			a := make([]float32, sh.M*sh.K)
			b := make([]float32, sh.N*sh.K)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			pa, pb := upF32(t, d, a), upF32(t, d, b)
			ca, cb := allocT(t, d, sh.M*sh.K*dt.Size()), allocT(t, d, sh.N*sh.K*dt.Size())
			launch(t, d, device.KCastAct, device.D1(4), device.D1(64), 0, ca, pa, int32(len(a)), int32(dt))
			launch(t, d, device.KCastAct, device.D1(4), device.D1(64), 0, cb, pb, int32(len(b)), int32(dt))
			ra, rb := roundTo(a, dt), roundTo(b, dt)
			c := allocT(t, d, 4*sh.M*sh.N)
			if err := d.Gemm(device.Gemm{M: sh.M, N: sh.N, K: sh.K, A: ca, B: cb, C: c, AType: dt, BType: dt}); err != nil {
				t.Fatal(err)
			}
			got := downF32(t, d, c, sh.M*sh.N)
			want := make([]float64, sh.M*sh.N)
			bound := 0.0
			for m := 0; m < sh.M; m++ {
				for n := 0; n < sh.N; n++ {
					s, sa := 0.0, 0.0
					for k := 0; k < sh.K; k++ {
						s += ra[m*sh.K+k] * rb[n*sh.K+k]
						sa += math.Abs(ra[m*sh.K+k] * rb[n*sh.K+k])
					}
					want[m*sh.N+n] = s
					bound = math.Max(bound, sa)
				}
			}
			checkClose(t, "gemm "+dt.String(), got, want, float64(sh.K)*0x1p-24*bound, 0)
		}
	}
}

func roundTo(x []float32, dt device.DType) []float64 {
	r := make([]float64, len(x))
	for i, v := range x {
		switch dt {
		case device.BF16:
			r[i] = float64(math.Float32frombits(uint32(bf16RNE(v)) << 16))
		case device.F16:
			r[i] = float64(float16.Fromfloat32(v).Float32())
		default:
			r[i] = float64(v)
		}
	}
	return r
}

func TestDevicesCoexist(t *testing.T) {
	a, b := newTestDevice(t), newTestDevice(t)
	pa, pb := allocT(t, a, 4*100), allocT(t, b, 4*100)
	done := make(chan error, 2)
	go func() { done <- a.Launch(device.KFill, device.D1(2), device.D1(64), 0, pa, int32(100), float32(1)) }()
	go func() { done <- b.Launch(device.KFill, device.D1(2), device.D1(64), 0, pb, int32(100), float32(2)) }()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if x, y := downF32(t, a, pa, 100), downF32(t, b, pb, 100); x[99] != 1 || y[99] != 2 {
		t.Fatalf("devices interfered: %v %v", x[99], y[99])
	}
	if err := a.CopyIn(pb, []byte{1}); err == nil {
		t.Fatal("device a accepted a pointer of device b")
	}
}
