package ggml

import "math"

// Decoders of ggml's low-bit types beyond the list (ternary
// TQ1_0/TQ2_0, binary Q1_0, 2-bit Q2_0) and NVFP4, statement for statement
// as ggml's dequantize_row_<type>.

// TQ1_0: qs[48] (5 base-3 digits per byte, fixed point), qh[4] (4 digits
// per byte), d f16; y = (digit-1)*d.
func decodeTQ1_0(b []byte, y []float32) {
	qs, qh := b[0:48], b[48:52]
	d := f16(b[52:])
	pow3 := [5]byte{1, 3, 9, 27, 81}
	digit := func(v byte, n int) float32 {
		q := v * pow3[n] // wraps mod 256 as uint8 does
		return float32(int(uint16(q)*3>>8) - 1)
	}
	for _, part := range [][2]int{{0, 32}, {32, 16}} {
		j, w := part[0], part[1]
		for n := 0; n < 5; n++ {
			for m := 0; m < w; m++ {
				y[0] = digit(qs[j+m], n) * d
				y = y[1:]
			}
		}
	}
	for n := 0; n < 4; n++ {
		for j := 0; j < 4; j++ {
			y[0] = digit(qh[j], n) * d
			y = y[1:]
		}
	}
}

// TQ2_0: qs[64] (2-bit codes), d f16; y = (q-1)*d.
func decodeTQ2_0(b []byte, y []float32) {
	qs := b[0:64]
	d := f16(b[64:])
	for j := 0; j < 64; j += 32 {
		for l := 0; l < 4; l++ {
			for m := 0; m < 32; m++ {
				y[0] = float32(int(qs[j+m]>>uint(2*l)&3)-1) * d
				y = y[1:]
			}
		}
	}
}

// Q1_0: d f16, qs[16] (one sign bit per value); y = bit ? d : -d.
func decodeQ1_0(b []byte, y []float32) {
	d := f16(b)
	for j := 0; j < 128; j++ {
		if b[2+j/8]>>uint(j%8)&1 != 0 {
			y[j] = d
		} else {
			y[j] = -d
		}
	}
}

// Q2_0: d f16, qs[16] (2-bit codes 00=-1, 01=0, 10=1, 11=2); y = (q-1)*d.
func decodeQ2_0(b []byte, y []float32) {
	d := f16(b)
	for j := 0; j < 64; j++ {
		y[j] = float32(int(b[2+j/4]>>uint(2*(j%4))&3)-1) * d
	}
}

// UE4M3HalfToF32 is ggml_ue4m3_to_fp32: half of an unsigned E4M3 scale
// (bit 7 ignored; 0 and 0x7f are zero).
func UE4M3HalfToF32(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	e, m := int(x>>3&0xf), float32(x&7)
	if e == 0 {
		return float32(math.Ldexp(float64(m), -9)) * 0.5
	}
	return float32(math.Ldexp(float64(1+m/8), e-7)) * 0.5
}

// NVFP4: d[4] UE4M3 scales (one per 16 values), qs[32] E2M1 codes;
// y = kvalues_fp4[q] (doubled E2M1) * half the scale.
func decodeNVFP4(b []byte, y []float32) {
	for s := 0; s < 4; s++ {
		d := UE4M3HalfToF32(b[s])
		qs := b[4+8*s : 12+8*s]
		for j := 0; j < 8; j++ {
			y[16*s+j] = kv(kvaluesFP4, qs[j]) * d
			y[16*s+j+8] = kv(kvaluesFP4, qs[j]>>4) * d
		}
	}
}
