package quant

import (
	"math"
	"testing"
)

// TestMXScale: compressed-tensors' generate_mxfp4_scales on group maxima
// (its docstring's 0.0825 example included): the power of two below amax,
// or above it from a significand of 1.75, times 2^-2.
func TestMXScale(t *testing.T) {
	for _, c := range []struct{ amax, want float64 }{
		{0.0825, math.Ldexp(1, -6)}, // 1.32·2^-4 → 2^-4 → 2^-6
		{6.9, 1},                    // 1.725·2^2 → 2^2 → 2^0
		{7, 2},                      // 1.75·2^2 → 2^3 → 2^1
		{1, 0.25},
		{math.Ldexp(1.99, -130), math.Ldexp(1, -127)}, // clamped to E8M0's smallest
	} {
		if got := MXScale(c.amax); got != c.want {
			t.Errorf("MXScale(%v) = %v, want %v", c.amax, got, c.want)
		}
	}
}

// TestMXActWorkedExample is docs/formats/mxfp4-w4a4.md's example: a group
// of 32 whose largest magnitude is 0.0825 and one whose is 7.
func TestMXActWorkedExample(t *testing.T) {
	x := make([]float64, 64)
	x[0], x[1], x[2], x[3] = 0.0825, -0.05, 0.01, 0.0039
	x[32], x[33], x[34] = 7, -0.6, -0.4
	q := &ActQuant{Kind: ActMXFP4, Bits: 4, Strategy: "group", GroupSize: 32, Dynamic: true, Symmetric: true}
	if err := q.Quantize(x, 1, 64); err != nil {
		t.Fatal(err)
	}
	s := math.Ldexp(1, -6)
	want := make([]float64, 64)
	want[0] = 6 * s                 // 0.0825/s = 5.28 → 6 (above 5)
	want[1] = -3 * s                // -3.2 → -3
	want[2] = 0.5 * s               // 0.64 → 0.5
	want[3] = 0                     // 0.2496 → 0 (at most 0.25)
	want[32] = 4 * 2                // 7/2 = 3.5 → 4 (a tie: the even code)
	want[33] = -0.5 * 2             // -0.3 → -0.5 (above 0.25)
	want[34] = math.Copysign(0, -1) // -0.2 → -0 (the sign is kept)
	sameBits(t, "x̂", x, want)
}
