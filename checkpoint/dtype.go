package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is a safetensors dtype name such as "BF16" or "F8_E4M3".
type DType string

// The safetensors dtypes, in the order of the Rust crate's Dtype enum (which
// is also the writer's sort order, see WriteFile).
const (
	BOOL       DType = "BOOL"
	F4         DType = "F4"
	F6E2M3     DType = "F6_E2M3"
	F6E3M2     DType = "F6_E3M2"
	U8         DType = "U8"
	I8         DType = "I8"
	F8E5M2     DType = "F8_E5M2"
	F8E4M3     DType = "F8_E4M3" // torch float8_e4m3fn: no inf, S.1111.111 is NaN
	F8E8M0     DType = "F8_E8M0"
	F8E4M3FNUZ DType = "F8_E4M3FNUZ"
	F8E5M2FNUZ DType = "F8_E5M2FNUZ"
	I16        DType = "I16"
	U16        DType = "U16"
	F16        DType = "F16"
	BF16       DType = "BF16"
	I32        DType = "I32"
	U32        DType = "U32"
	F32        DType = "F32"
	C64        DType = "C64"
	F64        DType = "F64"
	I64        DType = "I64"
	U64        DType = "U64"
)

const dtypeUnknown = -1

// dtypes lists every dtype with its width in bits, in enum order.
var dtypes = [...]struct {
	dt   DType
	bits int
}{
	{BOOL, 8}, {F4, 4}, {F6E2M3, 6}, {F6E3M2, 6}, {U8, 8}, {I8, 8},
	{F8E5M2, 8}, {F8E4M3, 8}, {F8E8M0, 8}, {F8E4M3FNUZ, 8}, {F8E5M2FNUZ, 8},
	{I16, 16}, {U16, 16}, {F16, 16}, {BF16, 16}, {I32, 32}, {U32, 32},
	{F32, 32}, {C64, 64}, {F64, 64}, {I64, 64}, {U64, 64},
}

// DTypes returns every dtype name of the safetensors format, in the order of
// the Rust crate's Dtype enum.
func DTypes() []DType {
	out := make([]DType, len(dtypes))
	for i, d := range dtypes {
		out[i] = d.dt
	}
	return out
}

// rank is the position of dt in the Rust enum, or dtypeUnknown.
func (dt DType) rank() int {
	for i, d := range dtypes {
		if d.dt == dt {
			return i
		}
	}
	return dtypeUnknown
}

// Known reports whether dt is a safetensors dtype name.
func (dt DType) Known() bool { return dt.rank() != dtypeUnknown }

// Bits returns the width of one element in bits (4 for F4, 6 for F6_*, 16 for
// BF16, ...), or 0 for an unknown dtype.
func (dt DType) Bits() int {
	if r := dt.rank(); r != dtypeUnknown {
		return dtypes[r].bits
	}
	return 0
}

// Decodable reports whether DecodeFloat64 supports dt.
func (dt DType) Decodable() bool {
	switch dt {
	case BOOL, U8, I8, F8E5M2, F8E4M3, F8E8M0, F8E4M3FNUZ, F8E5M2FNUZ,
		I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64:
		return true
	}
	return false
}

// ByteSize returns the exact byte size of numel elements of dt. It fails when
// the dtype is unknown, numel is negative, the size overflows int64, or
// numel·bits is not a whole number of bytes.
func (dt DType) ByteSize(numel int64) (int64, error) {
	bits := int64(dt.Bits())
	switch {
	case bits == 0:
		return 0, fmt.Errorf("unknown dtype %q", string(dt))
	case numel < 0:
		return 0, fmt.Errorf("negative element count %d", numel)
	case numel > math.MaxInt64/bits:
		return 0, fmt.Errorf("%d elements of %s overflow int64 bytes", numel, dt)
	case numel*bits%8 != 0:
		return 0, fmt.Errorf("%d elements of %s (%d bits) are not a whole number of bytes", numel, dt, bits)
	}
	return numel * bits / 8, nil
}

// maxExactInt is the largest integer magnitude every float64 holds exactly.
const maxExactInt = 1 << 53

// DecodeFloat64 decodes raw little-endian elements of dt into dst exactly:
// len(raw) must be len(dst)·Bits()/8. Every float dtype up to F64 decodes
// without rounding (NaN and ±Inf are kept); integers beyond ±2^53, which
// float64 cannot hold exactly, are an error. F4, F6_* and C64 wrap
// ErrUnsupported.
func DecodeFloat64(dt DType, raw []byte, dst []float64) error {
	if !dt.Decodable() {
		if !dt.Known() {
			return fmt.Errorf("%w: unknown dtype %q", ErrUnsupported, string(dt))
		}
		return fmt.Errorf("%w: no float64 decoding for dtype %s", ErrUnsupported, dt)
	}
	want, err := dt.ByteSize(int64(len(dst)))
	if err != nil {
		return err
	}
	if int64(len(raw)) != want {
		return fmt.Errorf("checkpoint: %d bytes of %s for %d elements, want %d", len(raw), dt, len(dst), want)
	}
	le := binary.LittleEndian
	switch dt {
	case BOOL:
		for i, b := range raw {
			if b != 0 {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		}
	case U8:
		for i, b := range raw {
			dst[i] = float64(b)
		}
	case I8:
		for i, b := range raw {
			dst[i] = float64(int8(b))
		}
	case F8E4M3, F8E5M2, F8E8M0, F8E4M3FNUZ, F8E5M2FNUZ:
		// One 256-entry table per call: a lookup per element.
		var table [256]float64
		for b := range table {
			table[b] = f8ToFloat64(dt, uint8(b))
		}
		for i, b := range raw {
			dst[i] = table[b]
		}
	case I16:
		for i := range dst {
			dst[i] = float64(int16(le.Uint16(raw[2*i:])))
		}
	case U16:
		for i := range dst {
			dst[i] = float64(le.Uint16(raw[2*i:]))
		}
	case F16:
		raw = raw[:2*len(dst)]
		for i := range dst {
			h := uint32(raw[2*i]) | uint32(raw[2*i+1])<<8
			if h&0x7c00 == 0x7c00 {
				dst[i] = f16Special(uint16(h))
				continue
			}
			dst[i] = f16Finite(h)
		}
	case BF16:
		raw = raw[:2*len(dst)]
		for i := range dst {
			dst[i] = float64(math.Float32frombits(uint32(raw[2*i])<<16 | uint32(raw[2*i+1])<<24))
		}
	case I32:
		for i := range dst {
			dst[i] = float64(int32(le.Uint32(raw[4*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = float64(le.Uint32(raw[4*i:]))
		}
	case F32:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(le.Uint32(raw[4*i:])))
		}
	case F64:
		for i := range dst {
			dst[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
	case I64:
		for i := range dst {
			v := int64(le.Uint64(raw[8*i:]))
			if v > maxExactInt || v < -maxExactInt {
				return fmt.Errorf("checkpoint: I64 element %d = %d is not exactly representable in float64", i, v)
			}
			dst[i] = float64(v)
		}
	case U64:
		for i := range dst {
			v := le.Uint64(raw[8*i:])
			if v > maxExactInt {
				return fmt.Errorf("checkpoint: U64 element %d = %d is not exactly representable in float64", i, v)
			}
			dst[i] = float64(v)
		}
	}
	return nil
}

// f8ToFloat64 decodes one byte of an 8-bit float dtype.
func f8ToFloat64(dt DType, b uint8) float64 {
	switch dt {
	case F8E4M3:
		return F8E4M3ToFloat64(b)
	case F8E5M2:
		return F8E5M2ToFloat64(b)
	case F8E8M0:
		return F8E8M0ToFloat64(b)
	case F8E4M3FNUZ:
		return fnuzToFloat64(b, 3, 8)
	default: // F8E5M2FNUZ
		return fnuzToFloat64(b, 2, 16)
	}
}

// BF16ToFloat64 returns the exact value of a bfloat16 bit pattern.
func BF16ToFloat64(h uint16) float64 {
	return float64(math.Float32frombits(uint32(h) << 16))
}

// F16ToFloat64 returns the exact value of an IEEE binary16 bit pattern.
// Exponent and mantissa shifted into a binary32 keep their bits with the
// exponent 112 too small (a subnormal half lands on a subnormal single with
// the same mantissa), and a multiplication by 2^112 is exact: one shift and
// one multiply, no branch but for infinities and NaN.
func F16ToFloat64(h uint16) float64 {
	if h&0x7c00 == 0x7c00 {
		return f16Special(h)
	}
	return f16Finite(uint32(h))
}

// f16Finite is the value of a finite binary16 pattern h: sign, exponent
// and mantissa moved to their binary32 places, scaled by 2^112 (exact).
func f16Finite(h uint32) float64 {
	return float64(math.Float32frombits((h&0x8000)<<16|(h&0x7fff)<<13)) * 0x1p112
}

// f16Special is an infinity or NaN pattern's value.
func f16Special(h uint16) float64 {
	if h&0x3ff != 0 {
		return math.NaN()
	}
	if h&0x8000 != 0 {
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// F8E4M3ToFloat64 returns the exact value of a torch float8_e4m3fn byte:
// bias 7, no infinities, 0x7f and 0xff are NaN, max ±448.
func F8E4M3ToFloat64(b uint8) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b>>3) & 0xf
	m := float64(b & 7)
	if e == 0xf && b&7 == 7 {
		return math.NaN()
	}
	if e == 0 {
		return sign * math.Ldexp(m, -9) // m/8 · 2^-6
	}
	return sign * math.Ldexp(8+m, e-10) // (1+m/8) · 2^(e-7)
}

// F8E5M2ToFloat64 returns the exact value of a float8_e5m2 byte (IEEE-like:
// bias 15, infinities and NaN at exponent 31).
func F8E5M2ToFloat64(b uint8) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b>>2) & 0x1f
	m := float64(b & 3)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -16) // m/4 · 2^-14
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(4+m, e-17) // (1+m/4) · 2^(e-15)
}

// F8E8M0ToFloat64 returns the exact value of an unsigned E8M0 scale byte:
// 2^(b-127), with 0xff NaN.
func F8E8M0ToFloat64(b uint8) float64 {
	if b == 0xff {
		return math.NaN()
	}
	return math.Ldexp(1, int(b)-127)
}

// fnuzToFloat64 decodes the "finite, no negative zero" float8 variants:
// 0x80 is NaN, no infinities, exponent bias as given.
func fnuzToFloat64(b uint8, manBits uint, bias int) float64 {
	if b == 0x80 {
		return math.NaN()
	}
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b&0x7f) >> manBits
	m := float64(b & (1<<manBits - 1))
	one := float64(int(1) << manBits)
	if e == 0 {
		return sign * math.Ldexp(m, 1-bias-int(manBits))
	}
	return sign * math.Ldexp(one+m, e-bias-int(manBits))
}
