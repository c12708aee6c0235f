package ggml

// Decoders of the 32-element block types. Each mirrors ggml's
// dequantize_row_<type> statement for statement. Every product that an
// add or subtract consumes is written float32(a*b): the explicit
// conversion forces its rounding, where Go may otherwise fuse the two into
// one multiply-add (on arm64, even across statements); ggml's CPU build
// rounds each operation.

// kvaluesIQ4NL is IQ4_NL's (and IQ4_XS's) non-linear 4-bit codebook, as
// int8 bytes: -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53,
// 69, 89, 113. (Tables here are constant strings: immutable.)
const kvaluesIQ4NL = "\x81\x98\xad\xbf\xcf\xdd\xea\xf6\x01\x0d\x19\x26\x35\x45\x59\x71"

// kvaluesFP4 holds the E2M1 values doubled (MXFP4's and NVFP4's codebook),
// as int8 bytes: 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12.
const kvaluesFP4 = "\x00\x01\x02\x03\x04\x06\x08\x0c\x00\xff\xfe\xfd\xfc\xfa\xf8\xf4"

// kv is entry q of a 16-entry int8 codebook.
func kv(table string, q byte) float32 { return float32(int8(table[q&15])) }

// Q4_0: d f16, qs[16]; y = (q-8)*d.
func decodeQ4_0(b []byte, y []float32) {
	d := f16(b)
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		y[j] = float32(int(qs[j]&0xf)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// Q4_1: d f16, m f16, qs[16]; y = q*d + m.
func decodeQ4_1(b []byte, y []float32) {
	d, m := f16(b), f16(b[2:])
	qs := b[4:20]
	for j := 0; j < 16; j++ {
		y[j] = float32(float32(qs[j]&0xf)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

// Q5_0: d f16, qh u32 (fifth bits), qs[16]; y = (q-16)*d.
func decodeQ5_0(b []byte, y []float32) {
	d := f16(b)
	qh := le32(b[2:])
	qs := b[6:22]
	for j := 0; j < 16; j++ {
		h0 := byte(qh>>uint(j)<<4) & 0x10
		h1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0xf|h0)-16) * d
		y[j+16] = float32(int(qs[j]>>4|h1)-16) * d
	}
}

// Q5_1: d f16, m f16, qh u32, qs[16]; y = q*d + m.
func decodeQ5_1(b []byte, y []float32) {
	d, m := f16(b), f16(b[2:])
	qh := le32(b[4:])
	qs := b[8:24]
	for j := 0; j < 16; j++ {
		h0 := byte(qh>>uint(j)<<4) & 0x10
		h1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(float32(qs[j]&0xf|h0)*d) + m
		y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
	}
}

// Q8_0: d f16, qs[32] int8; y = q*d.
func decodeQ8_0(b []byte, y []float32) {
	d := f16(b)
	for j := 0; j < 32; j++ {
		y[j] = float32(int8(b[2+j])) * d
	}
}

// MXFP4: e E8M0, qs[16]; y = kvalues_fp4[q] * 2^(e-128).
func decodeMXFP4(b []byte, y []float32) {
	d := E8M0HalfToF32(b[0])
	qs := b[1:17]
	for j := 0; j < 16; j++ {
		y[j] = kv(kvaluesFP4, qs[j]) * d
		y[j+16] = kv(kvaluesFP4, qs[j]>>4) * d
	}
}

// IQ4_NL: d f16, qs[16]; y = d * kvalues_iq4nl[q].
func decodeIQ4_NL(b []byte, y []float32) {
	d := f16(b)
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		y[j] = d * kv(kvaluesIQ4NL, qs[j])
		y[j+16] = d * kv(kvaluesIQ4NL, qs[j]>>4)
	}
}
