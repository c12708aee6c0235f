package gguf

import (
	"math"
	"testing"

	"github.com/qppl/qppl/gguf/ggml"
)

// TestF32ToF16 checks round-to-nearest-even at normal, subnormal,
// overflow and tie boundaries, and that every half survives the round trip.
func TestF32ToF16(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {0, 0}, {float32(math.Copysign(0, -1)), 0x8000},
		{5.960464477539063e-08, 0x0001}, {2.9802322387695312e-08, 0x0000}, // tie → even (0)
		{8.940696716308594e-08, 0x0002}, // 1.5 ulp → tie → even (2)
		{6.097555160522461e-05, 0x03ff}, {6.103515625e-05, 0x0400},
		{1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}, {1.00146484375, 0x3c02}, // ties
	}
	for _, c := range cases {
		if got := f32ToF16(c.f); got != c.h {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := ggml.F16ToF32(uint16(h))
		if f != f { // NaN
			continue
		}
		if got := f32ToF16(f); got != uint16(h) {
			t.Fatalf("round trip %#04x → %g → %#04x", h, f, got)
		}
	}
}
