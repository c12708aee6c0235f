package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// runLLMInt8 runs llmint8_cols + llmint8_quant on x[rows][cols] in fp32.
func runLLMInt8(t *testing.T, d device.Device, thr float32, x []float64, rows, cols int) []float64 {
	t.Helper()
	xf := make([]float32, len(x))
	for i, v := range x {
		xf[i] = float32(v)
	}
	in, err := allocCopy(d, f32Bytes(xf))
	if err != nil {
		t.Fatal(err)
	}
	flags, err := d.Alloc(int64(4 * cols))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Alloc(int64(4 * len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(in)
	defer d.Free(flags)
	defer d.Free(out)
	if err := device.LaunchLLMInt8Cols(d, flags, in, rows, cols, thr); err != nil {
		t.Fatal(err)
	}
	if err := device.LaunchLLMInt8Quant(d, out, device.F32, in, flags, rows, cols); err != nil {
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

// TestLLMInt8Kernel: the kernels against quant's float64 LLM.int8 rule on
// rows with outlier columns (an outlier in one row keeps its column in
// every row) and without a threshold. fp32 vs float64: the same codes
// except within fp32 rounding of a .5 boundary; outputs agree to 2^-20
// relative of the row scale, outlier columns exactly (as fp32).
func TestLLMInt8Kernel(t *testing.T) {
	d := emuDevices(t, 1, 1<<24)[0]
	rng := rand.New(rand.NewPCG(5, 6))
	rows, cols := 7, 300
	x := make([]float64, rows*cols)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64()))
	}
	x[2*cols+17], x[5*cols+250] = -9.5, 6 // two outlier columns (6 is >= the threshold)
	for _, thr := range []float64{6, 0} {
		want := append([]float64(nil), x...)
		q := &quant.ActQuant{Kind: quant.ActLLMInt8, Threshold: thr}
		if err := q.Quantize(want, rows, cols); err != nil {
			t.Fatal(err)
		}
		got := runLLMInt8(t, d, float32(thr), x, rows, cols)
		kept := 0
		for i := range got {
			r := i / cols
			amax := 0.0
			for c := 0; c < cols; c++ {
				if thr == 0 || (c != 17 && c != 250) {
					amax = math.Max(amax, math.Abs(x[r*cols+c]))
				}
			}
			if thr > 0 && (i%cols == 17 || i%cols == 250) {
				kept++
				if got[i] != x[i] || want[i] != x[i] {
					t.Fatalf("thr %v: outlier column element %d: kernel %v, quant %v, x %v", thr, i, got[i], want[i], x[i])
				}
				continue
			}
			if math.Abs(got[i]-want[i]) > amax/127*1.01 || (math.Abs(got[i]-want[i]) > amax*1e-6 && math.Abs(math.Abs(got[i]-want[i])-amax/127) > amax*1e-4) {
				t.Fatalf("thr %v: element %d: kernel %v, quant %v", thr, i, got[i], want[i])
			}
		}
		if thr > 0 && kept != 2*rows {
			t.Fatalf("kept %d outlier elements, want %d", kept, 2*rows)
		}
	}
}
