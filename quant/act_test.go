package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Examples E1–E6 of formats.md §8, exact float64.

func TestActExamples(t *testing.T) {
	negZero := math.Copysign(0, -1)
	eff := 208.0 / 448
	cases := []struct {
		name string
		q    ActQuant
		cols int
		x    []float64
		want []float64
	}{
		{"E1 nvfp4", ActQuant{Kind: ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448}, 16,
			[]float64{2.875, -1.125, 0.25, 0.3125, -0.6875, 0.84375, 1.3125, -1.6875, 1.75, 2.4375, -2.5625, 0, -0.09375, 0.625, 1.25, -0.75},
			[]float64{2.7857142857142856, -0.9285714285714286, 0.23214285714285715, 0.23214285714285715, -0.6964285714285714, 0.9285714285714286, 1.3928571428571428, -1.8571428571428572, 1.8571428571428572, 2.7857142857142856, -2.7857142857142856, 0, negZero, 0.6964285714285714, 1.3928571428571428, -0.6964285714285714}},
		{"E2 fp8 token", ActQuant{Kind: ActFP8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true}, 8,
			[]float64{2.5, -1, 0.01171875, 0, 0.296875, -2, 1.09375, 0.0625},
			[]float64{2.5, -0.9821428571428572, 0.011160714285714286, 0, 0.29017857142857145, -1.9642857142857144, 1.0714285714285714, 0.061383928571428575}},
		{"E3 fp8 static", ActQuant{Kind: ActFP8, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0.010009765625}, 8,
			[]float64{5, -4.5, 0.296875, -0.01171875, 0, 1, 2.25, -0.0625},
			[]float64{4.484375, -4.484375, 0.30029296875, -0.011260986328125, 0, 0.9609375, 2.2421875, -0.06005859375}},
		{"E5 int8 token", ActQuant{Kind: ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true}, 8,
			[]float64{-2.5, 1.25, 0.01171875, 0, 2, -0.6875, 0.9375, 1.71875},
			[]float64{-2.5098039215686274, 1.2549019607843137, 0.0196078431372549, 0, 2.0, -0.6862745098039216, 0.9411764705882353, 1.7254901960784315}},
		{"E6 int8 static sym", ActQuant{Kind: ActInt, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0x1p-6}, 8,
			[]float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5},
			[]float64{1, -2, 0.296875, 1.984375, negZero, 0, -2, 0.5}},
		{"E6 int8 static asym", ActQuant{Kind: ActInt, Bits: 8, Strategy: "tensor", Symmetric: false, Scale: 0x1p-6, ZeroPoint: -9}, 8,
			[]float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5},
			[]float64{1, -1.859375, 0.296875, 2.09375, -0.015625, 0, -1.859375, 0.5}},
	}
	_ = eff
	for _, c := range cases {
		x := append([]float64(nil), c.x...)
		if err := c.q.Quantize(x, len(x)/c.cols, c.cols); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// E6 sym: -0.0078125*64 = -0.5 → RHE -0 → (-0 - 0)*s: the spec lists −0.
		sameBits(t, c.name, x, c.want)
	}
}

// E1b: saturation and the zero scale.
func TestActE1b(t *testing.T) {
	q := ActQuant{Kind: ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448}
	x := make([]float64, 32)
	for i := 0; i < 16; i++ {
		x[i] = 1e-6
	}
	x[16], x[17] = 7, -3
	for i := 18; i < 32; i++ {
		x[i] = 0.5
	}
	if err := q.Quantize(x, 1, 32); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 32)
	want[16], want[17] = 6, -3
	for i := 18; i < 32; i++ {
		want[i] = 0.5
	}
	sameBits(t, "E1b", x, want)
}

// E4: fp8 groups of 128 in one 256-column token.
func TestActE4(t *testing.T) {
	q := ActQuant{Kind: ActFP8, Bits: 8, Strategy: "group", GroupSize: 128, Dynamic: true, Symmetric: true}
	x := make([]float64, 256)
	copy(x, []float64{3.5, -1, 0.296875, 0.0625})
	for i := 4; i < 128; i++ {
		x[i] = 0.25
	}
	copy(x[128:], []float64{0.5, -0.0625, 0.013671875, -0.40625})
	for i := 132; i < 256; i++ {
		x[i] = 0.03125
	}
	if err := q.Quantize(x, 1, 256); err != nil {
		t.Fatal(err)
	}
	s0 := 0x1p-7
	for i, w := range []float64{448 * s0, -128 * s0, 40 * s0, 8 * s0, 32 * s0} {
		if x[i] != w {
			t.Errorf("group 0 [%d] = %v, want %v", i, x[i], w)
		}
	}
	for i, w := range []float64{0.5, -0.0625, 0.013392857142857142, -0.39285714285714285, 0.03125} {
		if x[128+i] != w {
			t.Errorf("group 1 [%d] = %v, want %v", i, x[128+i], w)
		}
	}
}

// Idempotence (formats.md §8.8 item 7) and the INT8 dynamic scale change.
func TestActIdempotence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	x := make([]float64, 4*64)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	for _, q := range []ActQuant{
		{Kind: ActFP8, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0.010009765625},
		{Kind: ActInt, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0x1p-6},
		{Kind: ActFP8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true},
		{Kind: ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448},
	} {
		a := append([]float64(nil), x...)
		if err := q.Quantize(a, 4, 64); err != nil {
			t.Fatal(err)
		}
		b := append([]float64(nil), a...)
		if err := q.Quantize(b, 4, 64); err != nil {
			t.Fatal(err)
		}
		sameBits(t, q.describe()+" second pass", b, a)
	}
	// INT8 dynamic: same codes, scale × 128/127.5 when the extreme is negative.
	q := ActQuant{Kind: ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true}
	x1 := []float64{-2.5, 1.25, 0.01171875, 0, 2, -0.6875, 0.9375, 1.71875}
	codes := []float64{-128, 64, 1, 0, 102, -35, 48, 88}
	q.Quantize(x1, 1, 8)
	q.Quantize(x1, 1, 8)
	s2 := (2.5 / 127.5 * 128) / 127.5
	for i, c := range codes {
		if x1[i]/s2 != c && math.Abs(x1[i]/s2-c) > 1e-9 {
			t.Errorf("second pass code %d = %v, want %v", i, x1[i]/s2, c)
		}
	}
}

func TestActErrors(t *testing.T) {
	q := ActQuant{Kind: ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448}
	if err := q.Quantize(make([]float64, 24), 1, 24); err == nil {
		t.Error("24 columns with group 16 must fail")
	}
	if err := q.Quantize(make([]float64, 5), 1, 16); err == nil {
		t.Error("wrong length must fail")
	}
}
