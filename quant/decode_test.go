package quant

import (
	"math"
	"testing"
)

// Decoder cases the fixture quantizer does not write: legacy layouts,
// tensor strategy, block FP8, g_idx = -1, dense dtypes, NVFP4 roundings.

// Legacy word-aligned 3-bit layout (CT before PR #732): 10 values per word
// at bits 3k, 21 values → 3 words (the dense bitstream would need 2).
func TestLegacyWordAligned3Bit(t *testing.T) {
	q := make([]int, 21)
	for i := range q {
		q[i] = i%8 - 4 // -4..3
	}
	words := make([]uint32, 3)
	for i, v := range q {
		words[i/10] |= uint32(v+4) << (3 * (i % 10))
	}
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(3, "channel", -1, true), ""))
	src := newMem().
		add("m.weight_packed", "I32", []int{1, 3}, i32s(words...)).
		add("m.weight_scale", "F32", []int{1, 1}, floats("F32", 0.25)).
		add("m.weight_shape", "I64", []int{2}, i64s(1, 21))
	l, w := decode(t, s, src, "m")
	if !l.(*PackedInt).Legacy {
		t.Error("3 words for 21 3-bit values must be detected as legacy")
	}
	for i, v := range q {
		if w[i] != float64(v)*0.25 {
			t.Fatalf("[%d] = %v, want %v", i, w[i], float64(v)*0.25)
		}
	}
	// The same values in the dense bitstream (2 words), including the
	// element that straddles words 0 and 1 (bits 30..32).
	var dense [2]uint32
	for i, v := range q {
		p := 3 * i
		x := uint64(v+4) << (p % 32)
		dense[p/32] |= uint32(x)
		if p%32+3 > 32 {
			dense[p/32+1] |= uint32(x >> 32)
		}
	}
	src.add("m.weight_packed", "I32", []int{1, 2}, i32s(dense[:]...))
	l, w2 := decode(t, s, src, "m")
	if l.(*PackedInt).Legacy {
		t.Error("2 words must be the dense bitstream")
	}
	sameBits(t, "dense", w2, w)
}

// Legacy unpacked I8 zero points [out, G], and tensor strategy asym with an
// I8 [1] zero point and a [1] scale.
func TestLegacyZeroPointsAndTensorStrategy(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, false), ""))
	src := newMem().
		add("m.weight_packed", "I32", []int{2, 2}, i32s(0x76543210, 0xFEDCBA98, 0x88888888, 0x88888888)).
		add("m.weight_scale", "BF16", []int{2, 2}, floats("BF16", 1, 0.5, 2, 0.25)).
		add("m.weight_zero_point", "I8", []int{2, 2}, []byte{0xFF, 0x02, 0x00, 0x07}). // -1, 2, 0, 7
		add("m.weight_shape", "I64", []int{2}, i64s(2, 16))
	_, w := decode(t, s, src, "m")
	for c := 0; c < 16; c++ {
		if want := float64(c-8-[]int{-1, 2}[c/8]) * []float64{1, 0.5}[c/8]; w[c] != want {
			t.Errorf("row 0 [%d] = %v, want %v", c, w[c], want)
		}
		if want := float64(0-[]int{0, 7}[c/8]) * []float64{2, 0.25}[c/8]; w[16+c] != want {
			t.Errorf("row 1 [%d] = %v, want %v", c, w[16+c], want)
		}
	}
	st := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(8, "tensor", 0, false), ""))
	src = newMem().
		add("m.weight_packed", "I32", []int{2, 1}, i32s(0x84838281, 0x00FF7F80)).
		add("m.weight_scale", "F16", []int{1}, floats("F16", 0.5)).
		add("m.weight_zero_point", "I8", []int{1}, []byte{0x03}).
		add("m.weight_shape", "I64", []int{2}, i64s(2, 4))
	_, w = decode(t, st, src, "m")
	sameBits(t, "tensor", w, []float64{-1, -0.5, 0, 0.5, -1.5, -2, 62, -65.5})
}

// FP8 block strategy with partial blocks (3×5 weight, 2×2 blocks).
func TestFP8Block(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatFloatQuantized, `{"num_bits":8,"type":"float","strategy":"block","block_structure":[2,2]}`, ""))
	codes := make([]byte, 15)
	for i := range codes {
		codes[i] = 0x38 // 1.0
	}
	sc := []float64{1, 2, 4, 8, 16, 32}
	src := newMem().add("m.weight", "F8_E4M3", []int{3, 5}, codes).add("m.weight_scale", "F32", []int{2, 3}, floats("F32", sc...))
	_, w := decode(t, s, src, "m")
	for r := 0; r < 3; r++ {
		for c := 0; c < 5; c++ {
			if want := sc[(r/2)*3+c/2]; w[r*5+c] != want {
				t.Errorf("[%d,%d] = %v, want %v", r, c, w[r*5+c], want)
			}
		}
	}
}

// g_idx containing -1 means "unset" (formats.md §2.1): plain c/gs groups.
func TestGIdxMinusOne(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, true), ""))
	gi := make([]uint32, 16)
	for i := range gi {
		gi[i] = 0xFFFFFFFF
	}
	src := newMem().
		add("m.weight_packed", "I32", []int{1, 2}, i32s(0x99999999, 0x99999999)).
		add("m.weight_scale", "F32", []int{1, 2}, floats("F32", 1, 2)).
		add("m.weight_g_idx", "I32", []int{16}, i32s(gi...)).
		add("m.weight_shape", "I64", []int{2}, i64s(1, 16))
	l, w := decode(t, s, src, "m")
	if l.(*PackedInt).GIdx != nil || w[0] != 1 || w[15] != 2 {
		t.Errorf("g_idx -1: %v", w)
	}
}

// NVFP4 decode rounds eff and the product to f32, then to the model dtype.
func TestNVFP4Roundings(t *testing.T) {
	gs := float32(3) // 448/3 is not exact
	for _, dt := range []string{"bfloat16", "float32"} {
		s, err := ParseJSON([]byte(ctJSON(FormatNVFP4, `{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}`, "")), dt, "c")
		if err != nil {
			t.Fatal(err)
		}
		packed := []byte{0x71, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0} // codes 1,7,5,2,...,0,F
		src := newMem().add("m.weight_packed", "U8", []int{1, 8}, packed).
			add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7E}).
			add("m.weight_global_scale", "F32", []int{1}, floats("F32", float64(gs)))
		_, w := decode(t, s, src, "m")
		eff := float32(448) / gs
		for i, e := range []float32{0.5, 6, 3, 1} {
			want := float64(e * eff)
			if dt == "bfloat16" {
				want = RoundBF16(want)
			}
			if w[i] != want {
				t.Errorf("%s [%d] = %v, want %v", dt, i, w[i], want)
			}
		}
		if w[15] != float64(-6*eff) && dt == "float32" {
			t.Errorf("code F = %v", w[15])
		}
	}
}

func TestDenseDTypes(t *testing.T) {
	s := mustScheme(t, `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"W4A16":["Linear"]},"ignore":["lm_head"]}`)
	for _, dt := range []string{"F32", "F16", "BF16", "F64"} {
		src := newMem().add("lm_head.weight", dt, []int{2, 2}, floats(dt, 1.5, -2, 0.25, 384))
		l, w := decode(t, s, src, "lm_head")
		sameBits(t, dt, w, []float64{1.5, -2, 0.25, 384})
		if l.StoredBytes() != int64(4*dtypeSize(dt)) {
			t.Errorf("%s bytes %d", dt, l.StoredBytes())
		}
	}
}

func TestRoundings(t *testing.T) {
	for _, c := range []struct {
		f    func(float64) float64
		in   float64
		want float64
	}{
		{RoundBF16, 1 + 0x1p-8, 1},                                  // tie → even
		{RoundBF16, 1 + 3*0x1p-8, 1 + 0x1p-6},                       // tie → even (up)
		{RoundBF16, 0x1p-133 * 0.75, 0x1p-133},                      // subnormal
		{RoundBF16, 3.5e38, math.Inf(1)},                            // overflow
		{RoundF16, 65520, math.Inf(1)},                              // f16 overflow at the midpoint
		{RoundF16, 65519, 65504},                                    //
		{RoundF16, 0x1p-25, 0},                                      // half of the smallest subnormal → even 0
		{RoundF16, 0x1p-25 * 3, 0x1p-23},                            // 1.5 ulp → 2
		{RoundF32, 1 + 0x1p-24, 1},                                  //
		{func(x float64) float64 { return RoundE4M3(x) }, 464, 448}, // saturation
	} {
		if got := c.f(c.in); got != c.want {
			t.Errorf("round(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	for b := 0; b < 256; b++ { // E4M3 encode/decode round trip
		v := DecodeE4M3(byte(b))
		if math.IsNaN(v) {
			continue
		}
		if EncodeE4M3(v) != byte(b) || RoundE4M3(v) != v {
			t.Errorf("E4M3 %02X → %v → %02X", b, v, EncodeE4M3(v))
		}
	}
	for h := 0; h < 1<<16; h++ {
		v := F16Value(uint16(h))
		if math.IsNaN(v) {
			continue
		}
		if F16Bits(v) != uint16(h) || RoundF16(v) != v {
			t.Fatalf("F16 %04X → %v → %04X", h, v, F16Bits(v))
		}
	}
}

// A mixed-precision checkpoint: each module decoded with its own group's
// format, ignored modules dense, and the stored activation constants used.
func TestMixedPrecisionOpen(t *testing.T) {
	s := mustScheme(t, `{"quant_method":"compressed-tensors","format":"mixed-precision","ignore":["re:.*down_proj$"],
"config_groups":{
 "a":{"targets":["re:.*mlp\\.(gate|up)_proj$"],"format":"nvfp4-pack-quantized",
      "weights":{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16},
      "input_activations":{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16,"dynamic":"local"}},
 "b":{"targets":["Linear"],"format":"int-quantized",
      "weights":{"num_bits":8,"type":"int","strategy":"channel","symmetric":true},
      "input_activations":{"num_bits":8,"type":"int","strategy":"tensor","symmetric":false,"dynamic":false}}}}`)
	src := newMem().
		add("l.mlp.up_proj.weight_packed", "U8", []int{1, 8}, []byte{0x10, 0x3A, 0xD4, 0x76, 0x0F, 0x82, 0x76, 0x2C}).
		add("l.mlp.up_proj.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7E}).
		add("l.mlp.up_proj.weight_global_scale", "F32", []int{1}, floats("F32", 896)).
		add("l.mlp.up_proj.input_global_scale", "F32", []int{1}, floats("F32", 448)).
		add("l.self_attn.o_proj.weight", "I8", []int{1, 4}, []byte{0x7F, 0x80, 0x20, 0x00}).
		add("l.self_attn.o_proj.weight_scale", "BF16", []int{1, 1}, []byte{0x80, 0x3C}).
		add("l.self_attn.o_proj.input_scale", "BF16", []int{1}, floats("BF16", 0x1p-6)).
		add("l.self_attn.o_proj.input_zero_point", "I8", []int{1}, []byte{0xF7}). // -9
		add("l.mlp.down_proj.weight", "BF16", []int{1, 2}, floats("BF16", 1, 2))
	up, _ := decode(t, s, src, "l.mlp.up_proj")
	if up.Format() != "nvfp4+a-nvfp4" {
		t.Errorf("up: %s", up.Format())
	}
	x := []float64{2.875, -1.125, 0.25, 0.3125, -0.6875, 0.84375, 1.3125, -1.6875, 1.75, 2.4375, -2.5625, 0, -0.09375, 0.625, 1.25, -0.75}
	if err := up.InputQuantizer().Quantize(x, 1, 16); err != nil || x[0] != 2.7857142857142856 {
		t.Errorf("E1 through Open: %v %v", x[0], err)
	}
	o, w := decode(t, s, src, "l.self_attn.o_proj")
	sameBits(t, "o", w, []float64{127.0 / 64, -2, 0.5, 0})
	// E6 asymmetric through the stored input_scale and input_zero_point.
	x = []float64{1, -2.5, 0.296875, 2.09375, -0.0078125, 0, -1.9921875, 0.5}
	if err := o.InputQuantizer().Quantize(x, 2, 4); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "E6 asym", x, []float64{1, -1.859375, 0.296875, 2.09375, -0.015625, 0, -1.859375, 0.5})
	down, w := decode(t, s, src, "l.mlp.down_proj")
	if down.Format() != "bf16" || down.InputQuantizer() != nil || w[1] != 2 {
		t.Errorf("ignored down_proj: %s %v", down.Format(), w)
	}
}

// TestLE32: packed words are the little-endian 32-bit words of the stored
// bytes, whether viewed in place (aligned) or copied (unaligned).
func TestLE32(t *testing.T) {
	buf := make([]byte, 13)
	for i := range buf {
		buf[i] = byte(0x11 * (i + 1))
	}
	for _, off := range []int{0, 1} {
		b := buf[off : off+12]
		w := le32(b)
		if len(w) != 3 {
			t.Fatalf("offset %d: %d words", off, len(w))
		}
		for i, v := range w {
			if want := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24; v != want {
				t.Fatalf("offset %d: word %d = %#x, want %#x", off, i, v, want)
			}
		}
	}
	if len(le32(nil)) != 0 {
		t.Fatal("le32(nil) not empty")
	}
}
