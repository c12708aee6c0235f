package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qppl/qppl/gguf/ggml"
)

// Type is a ggml tensor type id as stored in a GGUF tensor info: package
// ggml's Type (the one type table: names, block sizes and bytes per block,
// checked against libggml in the llama.cpp tests).
type Type = ggml.Type

// The ggml type ids (package ggml, the one place that knows their
// layouts and decoders). Ids 4, 5, 31–33 and 36–38 were removed from ggml
// and are refused like any unknown id.
const (
	F32     = ggml.F32
	F16     = ggml.F16
	Q4_0    = ggml.Q4_0
	Q4_1    = ggml.Q4_1
	Q5_0    = ggml.Q5_0
	Q5_1    = ggml.Q5_1
	Q8_0    = ggml.Q8_0
	Q8_1    = ggml.Q8_1
	Q2_K    = ggml.Q2_K
	Q3_K    = ggml.Q3_K
	Q4_K    = ggml.Q4_K
	Q5_K    = ggml.Q5_K
	Q6_K    = ggml.Q6_K
	Q8_K    = ggml.Q8_K
	IQ2_XXS = ggml.IQ2_XXS
	IQ2_XS  = ggml.IQ2_XS
	IQ3_XXS = ggml.IQ3_XXS
	IQ1_S   = ggml.IQ1_S
	IQ4_NL  = ggml.IQ4_NL
	IQ3_S   = ggml.IQ3_S
	IQ2_S   = ggml.IQ2_S
	IQ4_XS  = ggml.IQ4_XS
	I8      = ggml.I8
	I16     = ggml.I16
	I32     = ggml.I32
	I64     = ggml.I64
	F64     = ggml.F64
	IQ1_M   = ggml.IQ1_M
	BF16    = ggml.BF16
	TQ1_0   = ggml.TQ1_0
	TQ2_0   = ggml.TQ2_0
	MXFP4   = ggml.MXFP4
)

// rowBytes returns the bytes of n elements of type t: n/BlockSize blocks.
// An unknown type is ErrUnsupported; n must be a whole number of blocks and
// the product must not overflow.
func rowBytes(t Type, n int64) (int64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("%w: unknown ggml type id %d", ErrUnsupported, uint32(t))
	}
	bs, ts := int64(t.BlockSize()), int64(t.TypeSize())
	if n < 0 || n%bs != 0 {
		return 0, fmt.Errorf("%d elements of %s are not a whole number of %d-element blocks", n, t, bs)
	}
	blocks := n / bs
	if blocks > math.MaxInt64/ts {
		return 0, fmt.Errorf("%d elements of %s overflow a byte size", n, t)
	}
	return blocks * ts, nil
}

// Decoder decodes the bytes of n consecutive elements of one ggml type into
// float32 values exactly as ggml's dequantize_row_<type> computes them.
// raw holds exactly ggml.RowBytes(t, n) bytes and len(dst) == n. It returns an
// error wrapping ErrUnsupported for a type it does not decode.
//
// GGMLDecoder (package ggml's decoders) is the default; PlainDecoder
// decodes F32, F16 and BF16 only.
type Decoder func(t Type, raw []byte, n int, dst []float32) error

// GGMLDecoder decodes every type package ggml decodes (F32, F16, BF16, the
// legacy, K, IQ and FP4 block types), bit-identical to ggml's
// dequantize_row_<type>; a known type it does not decode is ErrUnsupported.
func GGMLDecoder(t Type, raw []byte, n int, dst []float32) error {
	g := ggml.Type(t)
	if !g.Supported() {
		return fmt.Errorf("%w: no decoder for ggml type %s (id %d)", ErrUnsupported, t, uint32(t))
	}
	if n < 0 || n > len(dst) {
		return fmt.Errorf("gguf: decoding %d %s elements into %d values", n, t, len(dst))
	}
	return ggml.Dequantize(g, raw, dst[:n])
}

// PlainDecoder decodes F32, F16 and BF16, the types llama.cpp's converter
// writes unquantized; any other type is ErrUnsupported.
func PlainDecoder(t Type, raw []byte, n int, dst []float32) error {
	if len(dst) != n {
		return fmt.Errorf("gguf: decoding %d %s elements into %d values", n, t, len(dst))
	}
	want, err := rowBytes(t, int64(n))
	if err != nil {
		return err
	}
	if int64(len(raw)) != want {
		return fmt.Errorf("gguf: %d bytes for %d %s elements, want %d", len(raw), n, t, want)
	}
	le := binary.LittleEndian
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = ggml.F16ToF32(le.Uint16(raw[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = ggml.BF16ToF32(le.Uint16(raw[2*i:]))
		}
	default:
		return fmt.Errorf("%w: no decoder for ggml type %s", ErrUnsupported, t)
	}
	return nil
}

// f32ToF16 rounds a float32 to the nearest IEEE half (ties to even), as
// numpy's astype(float16) and ggml's GGML_FP32_TO_FP16 do; overflow gives
// ±Inf.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff { // Inf, NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // half subnormal (or zero)
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to Inf: correct
	}
	return sign | uint16(h)
}
