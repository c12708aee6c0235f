package ggml

import (
	"encoding/binary"
	"math"
)

// F16ToF32 converts IEEE binary16 bits to float32 exactly (ggml_fp16_to_fp32;
// NaN payloads are kept).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: man * 2^-24, exact in float32.
		v := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// BF16ToF32 converts bfloat16 bits to float32 (exact: the high half).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// E8M0HalfToF32 is ggml_e8m0_to_fp32_half: half of the power of two 2^(e-127)
// an E8M0 scale byte encodes (MXFP4's table holds doubled E2M1 values).
func E8M0HalfToF32(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func f16(b []byte) float32 { return F16ToF32(le16(b)) }

func decodeF32(b []byte, y []float32) { y[0] = math.Float32frombits(le32(b)) }
func decodeF16(b []byte, y []float32) { y[0] = f16(b) }
func decodeBF16(b []byte, y []float32) {
	y[0] = BF16ToF32(le16(b))
}
