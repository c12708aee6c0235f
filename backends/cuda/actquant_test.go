package cuda

// act_quant against package quant's float64 rule (formats.md §8.2), on the
// spec's examples E1-E6 and on seeded random rows. The kernel works in fp32:
// each value is (q - zp)·eff with the same code q as the float64 rule unless
// x/eff falls within fp32 rounding (≈1e-7 relative) of a rounding boundary,
// which the spec examples avoid and random data hits about once in 10^5;
// the outputs then agree to 2^-22 relative.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

func runActQuant(t *testing.T, d device.Device, q *quant.ActQuant, x []float64, rows, cols int) []float64 {
	t.Helper()
	p, err := newActParams("test", q)
	if err != nil {
		t.Fatal(err)
	}
	xf := make([]float32, len(x))
	for i, v := range x {
		xf[i] = float32(v)
	}
	in, err := allocCopy(d, f32Bytes(xf))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Alloc(int64(4 * len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(in)
	defer d.Free(out)
	if p.tensor {
		amax, err := d.Alloc(4)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(amax)
		if err := device.LaunchActAmax(d, amax, in, len(x)); err != nil {
			t.Fatal(err)
		}
		if err := device.LaunchActQuantTensor(d, out, device.F32, in, rows, cols, p.kind, amax); err != nil {
			t.Fatal(err)
		}
	} else if err := d.Launch(device.KActQuant, device.D1(rows), device.D1(128), 0, out, int32(device.F32), in, int32(rows), int32(cols),
		p.kind, p.gsize, p.dynamic, p.sym, p.scale, p.zp, p.gscale); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4*len(x))
	if err := d.CopyOut(buf, out); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, len(x))
	for i := range got {
		got[i] = float64(math.Float32frombits(uint32(buf[4*i]) | uint32(buf[4*i+1])<<8 | uint32(buf[4*i+2])<<16 | uint32(buf[4*i+3])<<24))
	}
	return got
}

func TestActQuantSpecExamples(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	g1 := []float64{0.5, -0.0625, 0.013671875, -0.40625}
	for i := 0; i < 124; i++ {
		g1 = append(g1, 0.03125)
	}
	g0 := []float64{3.5, -1, 0.296875, 0.0625}
	for i := 0; i < 124; i++ {
		g0 = append(g0, 0.25)
	}
	e1b := []float64{}
	for i := 0; i < 16; i++ {
		e1b = append(e1b, 1e-6)
	}
	e1b = append(e1b, 7, -3)
	for i := 0; i < 14; i++ {
		e1b = append(e1b, 0.5)
	}
	cases := []struct {
		name string
		q    quant.ActQuant
		x    []float64
	}{
		{"E1 nvfp4", quant.ActQuant{Kind: quant.ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448},
			[]float64{2.875, -1.125, 0.25, 0.3125, -0.6875, 0.84375, 1.3125, -1.6875, 1.75, 2.4375, -2.5625, 0, -0.09375, 0.625, 1.25, -0.75}},
		{"E1b nvfp4 saturation", quant.ActQuant{Kind: quant.ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 448}, e1b},
		{"E2 fp8 token", quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true},
			[]float64{2.5, -1, 0.01171875, 0, 0.296875, -2, 1.09375, 0.0625}},
		{"E3 fp8 static", quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0.010009765625},
			[]float64{5, -4.5, 0.296875, -0.01171875, 0, 1, 2.25, -0.0625}},
		{"E4 fp8 group", quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "group", GroupSize: 128, Dynamic: true, Symmetric: true}, append(g0, g1...)},
		{"E5 int8 token", quant.ActQuant{Kind: quant.ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true},
			[]float64{-2.5, 1.25, 0.01171875, 0, 2, -0.6875, 0.9375, 1.71875}},
		{"E6 int8 static sym", quant.ActQuant{Kind: quant.ActInt, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0x1p-6},
			[]float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5}},
		{"E6 int8 static asym", quant.ActQuant{Kind: quant.ActInt, Bits: 8, Strategy: "tensor", Symmetric: false, Scale: 0x1p-6, ZeroPoint: -9},
			[]float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5}},
		{"int8 token asym", quant.ActQuant{Kind: quant.ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: false},
			[]float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5}},
	}
	for _, c := range cases {
		want := append([]float64(nil), c.x...)
		if err := c.q.Quantize(want, 1, len(want)); err != nil {
			t.Fatal(err)
		}
		got := runActQuant(t, d, &c.q, c.x, 1, len(c.x))
		for i := range want {
			if !(math.Abs(got[i]-want[i]) <= 0x1p-22*math.Abs(want[i])) { // a NaN fails
				t.Errorf("%s: element %d of %v: kernel %v, quant %v", c.name, i, c.x[i], got[i], want[i])
			}
		}
	}
}

func TestActQuantRandom(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	rng := rand.New(rand.NewPCG(13, 14))
	rows, cols := 9, 256
	x := make([]float64, rows*cols)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64() * math.Exp(rng.NormFloat64())))
	}
	x[5] = 0
	for c := 0; c < cols; c++ { // an all-zero row
		x[3*cols+c] = 0
	}
	for _, q := range []quant.ActQuant{
		{Kind: quant.ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true, GlobalScale: 300},
		{Kind: quant.ActFP8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true},
		{Kind: quant.ActFP8, Bits: 8, Strategy: "tensor", Symmetric: true, Scale: 0.01},
		{Kind: quant.ActFP8, Bits: 8, Strategy: "group", GroupSize: 128, Dynamic: true, Symmetric: true},
		{Kind: quant.ActMXFP4, Bits: 4, Strategy: "group", GroupSize: 32, Dynamic: true, Symmetric: true},
		{Kind: quant.ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true},
		{Kind: quant.ActInt, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: false},
		{Kind: quant.ActInt, Bits: 8, Strategy: "tensor", Symmetric: false, Scale: 0.02, ZeroPoint: 3},
		{Kind: quant.ActFP8, Bits: 8, Strategy: "tensor", Dynamic: true, Symmetric: true},
		{Kind: quant.ActInt, Bits: 8, Strategy: "tensor", Dynamic: true, Symmetric: true},
	} {
		want := append([]float64(nil), x...)
		if err := q.Quantize(want, rows, cols); err != nil {
			t.Fatal(err)
		}
		got := runActQuant(t, d, &q, x, rows, cols)
		flips := 0
		for i := range want {
			if !(math.Abs(got[i]-want[i]) <= 0x1p-22*math.Abs(want[i])) { // a NaN fails
				flips++
			}
		}
		if flips > 1 { // see the comment at the top of the file
			t.Errorf("%+v: %d of %d values differ from quant beyond fp32 rounding", q, flips, len(x))
		}
	}
}

// TestActQuantPartialGroupRefused: act_quant writes whole groups only, so a
// Linear whose in_features is not a multiple of the activation group size
// is refused when it is prepared (a partial group would leave stale GEMM
// inputs on the device).
func TestActQuantPartialGroupRefused(t *testing.T) {
	for _, c := range []struct {
		in   int
		want bool // accepted
	}{{256, true}, {192, false}} {
		a := &quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "group", GroupSize: 128, Dynamic: true, Symmetric: true}
		l := &quant.Dense{Base: quant.Base{Name: "m", Out: 2, In: c.in, Act: a}, DType: "F32", Raw: make([]byte, 4*2*c.in)}
		_, err := prepareLinear(l, device.F32)
		if c.want != (err == nil) {
			t.Errorf("in_features %d, group 128: err = %v", c.in, err)
		}
	}
}

// TestActQuantDynamicTensor: AutoFP8's dynamic per-tensor FP8 input (one
// scale amax/448 over every row of the matrix, act_amax + act_quant_tensor)
// against quant's rule. The amax, 3.5 = 448·2^-7, sits in the last of
// several act_amax blocks and gives a power-of-two scale, so the kernel's
// fp32 arithmetic is exact and the outputs must equal quant's bit for bit;
// rows whose own amax is smaller are quantized with the whole matrix's scale
// (a per-token scale would give other values), and an all-zero matrix gives
// zeros.
func TestActQuantDynamicTensor(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	rows, cols := 5, 300 // 1500 values: 6 act_amax blocks of 256
	x := make([]float64, rows*cols)
	for i := range x {
		x[i] = float64(float32(math.Sin(float64(i)) * 0.37))
	}
	x[len(x)-3] = -3.5
	q := quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "tensor", Dynamic: true, Symmetric: true}
	want := append([]float64(nil), x...)
	if err := q.Quantize(want, rows, cols); err != nil {
		t.Fatal(err)
	}
	perRow := quant.ActQuant{Kind: quant.ActFP8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true}
	tok := append([]float64(nil), x...)
	if err := perRow.Quantize(tok, rows, cols); err != nil {
		t.Fatal(err)
	}
	got := runActQuant(t, d, &q, x, rows, cols)
	differ := 0
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d of %v: kernel %v, quant %v", i, x[i], got[i], want[i])
		}
		if want[i] != tok[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the per-tensor and per-token results agree everywhere: the test cannot tell them apart")
	}
	zero := runActQuant(t, d, &q, make([]float64, 64), 2, 32)
	for i, v := range zero {
		if v != 0 || math.Signbit(v) {
			t.Fatalf("all-zero input: element %d = %v", i, v)
		}
	}
}
