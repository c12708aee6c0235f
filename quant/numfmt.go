package quant

import (
	"encoding/binary"
	"math"

	"github.com/qppl/qppl/checkpoint"
)

// This file holds the exact number formats of formats.md: rounding of a
// float64 to bf16/f16/f32/E4M3 with round-to-nearest-even, the E2M1 grid,
// E8M0 and the bit-level decoders. Every function is pure and exact: a
// rounding result is a float64 that the target format represents.

// roundToPrecision rounds x to the nearest value with p significant bits
// (implicit bit included) and minimum normal exponent emin (values below
// 2^emin are rounded on the subnormal grid 2^(emin-p+1)), ties to even.
// Overflow is not handled here.
func roundToPrecision(x float64, p, emin int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	_, e := math.Frexp(x) // |x| = f * 2^e, f in [0.5,1)
	e--                   // |x| = m * 2^e, m in [1,2)
	if e < emin {
		e = emin
	}
	shift := e - (p - 1) // quantum = 2^shift
	return math.Ldexp(math.RoundToEven(math.Ldexp(x, -shift)), shift)
}

// RoundBF16 rounds x to bfloat16 (RNE); values beyond the largest finite
// bf16 become ±Inf as torch does.
func RoundBF16(x float64) float64 {
	if f := float32(x); float64(f) == x {
		// Fast path for values float32 holds exactly (every product the
		// decoders form): round-to-nearest-even on the low 16 bits, which
		// also carries into ±Inf on overflow and handles subnormals.
		u := math.Float32bits(f)
		if u&0x7F800000 == 0x7F800000 { // Inf/NaN
			return x
		}
		u += 0x7FFF + (u>>16)&1
		return float64(math.Float32frombits(u &^ 0xFFFF))
	}
	r := roundToPrecision(x, 8, -126)
	if math.Abs(r) > maxBF16 {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// RoundF16 rounds x to IEEE half precision (RNE), overflowing to ±Inf.
func RoundF16(x float64) float64 {
	r := roundToPrecision(x, 11, -14)
	if math.Abs(r) > 65504 {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// RoundF32 rounds x to float32 (RNE).
func RoundF32(x float64) float64 { return float64(float32(x)) }

const maxBF16 = 3.3895313892515355e38 // (2-2^-7)*2^127

// RoundDType rounds x to the float dtype dt (BF16, F16, F32; F64 unchanged).
func RoundDType(dt string, x float64) float64 {
	switch dt {
	case "BF16":
		return RoundBF16(x)
	case "F16":
		return RoundF16(x)
	case "F32":
		return RoundF32(x)
	}
	return x
}

// EpsDType is torch.finfo(dt).eps, the scale CT substitutes for a zero scale.
func EpsDType(dt string) float64 {
	switch dt {
	case "BF16":
		return 0x1p-7
	case "F16":
		return 0x1p-10
	case "F32":
		return 0x1p-23
	}
	return 0x1p-52
}

// E4M3 is the largest finite float8_e4m3fn value.
const E4M3Max = 448.0

// RoundE4M3 rounds x to float8_e4m3fn with RNE. The caller clamps to ±448
// first (as CT and torch do); values beyond 448 are saturated here too.
func RoundE4M3(x float64) float64 {
	r := roundToPrecision(x, 4, -6)
	if r > E4M3Max {
		return E4M3Max
	}
	if r < -E4M3Max {
		return -E4M3Max
	}
	return r
}

// DecodeE4M3 returns the value of a float8_e4m3fn byte (NaN for 0x7F/0xFF):
// package checkpoint's decoding of the F8_E4M3 dtype.
func DecodeE4M3(b byte) float64 { return checkpoint.F8E4M3ToFloat64(b) }

// EncodeE4M3 returns the byte of a value that E4M3 represents exactly
// (as produced by RoundE4M3). -0 keeps its sign.
func EncodeE4M3(v float64) byte {
	var s byte
	if math.Signbit(v) {
		s = 0x80
		v = -v
	}
	if v == 0 {
		return s
	}
	frac, e := math.Frexp(v) // v = frac*2^e, frac in [0.5,1)
	exp := e - 1 + 7         // biased exponent of 1.m form
	if exp <= 0 {            // subnormal: v = m/8 * 2^-6
		return s | byte(math.Ldexp(v, 9))
	}
	m := byte(math.Ldexp(frac*2-1, 3))
	return s | byte(exp)<<3 | m
}

// e2m1Mag is the E2M1 magnitude table indexed by bits 0-2 of a code.
var e2m1Mag = [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// DecodeE2M1 returns the value of a 4-bit E2M1 code (bit 3 = sign; 0x8 is -0).
func DecodeE2M1(code byte) float64 {
	v := e2m1Mag[code&7]
	if code&8 != 0 {
		return math.Copysign(v, -1)
	}
	return v
}

// RoundE2M1 rounds y (already clamped to ±6) to the E2M1 grid with CT's
// thresholds (ties to even) and returns the 4-bit code; the sign comes from
// the sign of y, so a small negative y gives 0x8 (-0) and +0 gives 0x0.
func RoundE2M1(y float64) byte {
	a := math.Abs(y)
	var m byte
	switch {
	case a <= 0.25:
		m = 0
	case a < 0.75:
		m = 1
	case a <= 1.25:
		m = 2
	case a < 1.75:
		m = 3
	case a <= 2.5:
		m = 4
	case a < 3.5:
		m = 5
	case a <= 5:
		m = 6
	default:
		m = 7
	}
	if y < 0 || (y == 0 && math.Signbit(y)) {
		m |= 8
	}
	return m
}

// DecodeE8M0 returns 2^(e-127); e == 255 is NaN.
func DecodeE8M0(e byte) float64 {
	if e == 255 {
		return math.NaN()
	}
	return math.Ldexp(1, int(e)-127)
}

// BF16Bits returns the bf16 bit pattern of a value bf16 represents exactly.
func BF16Bits(v float64) uint16 { return uint16(math.Float32bits(float32(v)) >> 16) }

// BF16Value decodes a bf16 bit pattern (package checkpoint's decoding).
func BF16Value(b uint16) float64 { return checkpoint.BF16ToFloat64(b) }

// F16Value decodes an IEEE half bit pattern (package checkpoint's decoding).
func F16Value(b uint16) float64 { return checkpoint.F16ToFloat64(b) }

// F16Bits returns the half bit pattern of a value f16 represents exactly
// (including ±Inf).
func F16Bits(v float64) uint16 {
	var s uint16
	if math.Signbit(v) {
		s = 0x8000
		v = -v
	}
	switch {
	case math.IsInf(v, 0):
		return s | 0x7C00
	case math.IsNaN(v):
		return 0x7E00
	case v == 0:
		return s
	}
	frac, e := math.Frexp(v)
	exp := e - 1 + 15
	if exp <= 0 {
		return s | uint16(math.Ldexp(v, 24))
	}
	return s | uint16(exp)<<10 | uint16(math.Ldexp(frac*2-1, 10))
}

// dtypeSize is the element size in bytes of the float/int dtypes quant reads.
func dtypeSize(dt string) int {
	switch dt {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "F16", "BF16", "I16", "U16":
		return 2
	case "I8", "U8", "F8_E4M3", "F8_E8M0", "BOOL":
		return 1
	}
	return 0
}

// decodeFloats decodes raw little-endian bytes of a float dtype exactly.
func decodeFloats(dt string, raw []byte) ([]float64, bool) {
	sz := dtypeSize(dt)
	if sz == 0 || len(raw)%sz != 0 {
		return nil, false
	}
	out := make([]float64, len(raw)/sz)
	if !decodeFloatsInto(dt, raw, out) {
		return nil, false
	}
	return out, true
}

// decodeFloatsInto is decodeFloats writing into out, which must hold
// exactly len(raw)/size values; false for an unknown dtype or a length
// mismatch.
func decodeFloatsInto(dt string, raw []byte, out []float64) bool {
	switch dt {
	case "F64", "F32", "F16", "BF16", "F8_E4M3":
		return checkpoint.DecodeFloat64(checkpoint.DType(dt), raw, out) == nil
	}
	return false
}

// decodeInts decodes raw little-endian bytes of an integer dtype.
func decodeInts(dt string, raw []byte) ([]int64, bool) {
	sz := dtypeSize(dt)
	if sz == 0 || len(raw)%sz != 0 {
		return nil, false
	}
	n := len(raw) / sz
	out := make([]int64, n)
	for i := range out {
		switch dt {
		case "I8":
			out[i] = int64(int8(raw[i]))
		case "U8":
			out[i] = int64(raw[i])
		case "I16":
			out[i] = int64(int16(binary.LittleEndian.Uint16(raw[2*i:])))
		case "I32":
			out[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		case "U32":
			out[i] = int64(binary.LittleEndian.Uint32(raw[4*i:]))
		case "I64":
			out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		default:
			return nil, false
		}
	}
	return out, true
}

// EncodeFloat appends the little-endian bytes of v (exactly representable in
// dt) in dtype dt (F32, F16, BF16, F64).
func EncodeFloat(dst []byte, dt string, v float64) []byte {
	switch dt {
	case "F64":
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	case "F32":
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v)))
	case "F16":
		return binary.LittleEndian.AppendUint16(dst, F16Bits(v))
	case "BF16":
		return binary.LittleEndian.AppendUint16(dst, BF16Bits(v))
	}
	panic("quant: EncodeFloat: unsupported dtype " + dt)
}
