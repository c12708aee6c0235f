package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is a ggml tensor type id as stored in a GGUF tensor info.
type Type uint32

// The ggml type ids (ggml.h's enum ggml_type). Ids 4, 5, 31–33 and 36–38
// were removed from ggml and are refused like any unknown id.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// typeInfo is the storage layout of a type: BlockSize elements are stored
// in TypeSize bytes.
type typeInfo struct {
	name      string
	blockSize int64
	typeSize  int64
}

// lookup returns ggml's type_traits blck_size and type_size of every type
// id a GGUF file may carry (checked against libggml in the llama.cpp tests).
func lookup(t Type) (typeInfo, bool) {
	switch t {
	case F32:
		return typeInfo{"F32", 1, 4}, true
	case F16:
		return typeInfo{"F16", 1, 2}, true
	case BF16:
		return typeInfo{"BF16", 1, 2}, true
	case F64:
		return typeInfo{"F64", 1, 8}, true
	case I8:
		return typeInfo{"I8", 1, 1}, true
	case I16:
		return typeInfo{"I16", 1, 2}, true
	case I32:
		return typeInfo{"I32", 1, 4}, true
	case I64:
		return typeInfo{"I64", 1, 8}, true
	case Q4_0:
		return typeInfo{"Q4_0", 32, 18}, true
	case Q4_1:
		return typeInfo{"Q4_1", 32, 20}, true
	case Q5_0:
		return typeInfo{"Q5_0", 32, 22}, true
	case Q5_1:
		return typeInfo{"Q5_1", 32, 24}, true
	case Q8_0:
		return typeInfo{"Q8_0", 32, 34}, true
	case Q8_1:
		return typeInfo{"Q8_1", 32, 36}, true
	case Q2_K:
		return typeInfo{"Q2_K", 256, 84}, true
	case Q3_K:
		return typeInfo{"Q3_K", 256, 110}, true
	case Q4_K:
		return typeInfo{"Q4_K", 256, 144}, true
	case Q5_K:
		return typeInfo{"Q5_K", 256, 176}, true
	case Q6_K:
		return typeInfo{"Q6_K", 256, 210}, true
	case Q8_K:
		return typeInfo{"Q8_K", 256, 292}, true
	case IQ2_XXS:
		return typeInfo{"IQ2_XXS", 256, 66}, true
	case IQ2_XS:
		return typeInfo{"IQ2_XS", 256, 74}, true
	case IQ2_S:
		return typeInfo{"IQ2_S", 256, 82}, true
	case IQ3_XXS:
		return typeInfo{"IQ3_XXS", 256, 98}, true
	case IQ3_S:
		return typeInfo{"IQ3_S", 256, 110}, true
	case IQ1_S:
		return typeInfo{"IQ1_S", 256, 50}, true
	case IQ1_M:
		return typeInfo{"IQ1_M", 256, 56}, true
	case IQ4_NL:
		return typeInfo{"IQ4_NL", 32, 18}, true
	case IQ4_XS:
		return typeInfo{"IQ4_XS", 256, 136}, true
	case TQ1_0:
		return typeInfo{"TQ1_0", 256, 54}, true
	case TQ2_0:
		return typeInfo{"TQ2_0", 256, 66}, true
	case MXFP4:
		return typeInfo{"MXFP4", 32, 17}, true
	}
	return typeInfo{}, false
}

// Known reports whether t is a type id this package knows the layout of.
func (t Type) Known() bool { _, ok := lookup(t); return ok }

// String returns ggml's name of the type ("Q4_K"), or "type(N)".
func (t Type) String() string {
	if ti, ok := lookup(t); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements per block (1 for plain types),
// 0 for an unknown type.
func (t Type) BlockSize() int64 {
	ti, _ := lookup(t)
	return ti.blockSize
}

// TypeSize returns the bytes per block, 0 for an unknown type.
func (t Type) TypeSize() int64 {
	ti, _ := lookup(t)
	return ti.typeSize
}

// RowBytes returns the bytes of n elements of type t: n/BlockSize blocks.
// n must be a multiple of the block size and the product must not overflow.
func (t Type) RowBytes(n int64) (int64, error) {
	ti, ok := lookup(t)
	if !ok {
		return 0, fmt.Errorf("%w: unknown ggml type id %d", ErrUnsupported, uint32(t))
	}
	if n < 0 || n%ti.blockSize != 0 {
		return 0, fmt.Errorf("%d elements of %s are not a whole number of %d-element blocks", n, ti.name, ti.blockSize)
	}
	blocks := n / ti.blockSize
	if blocks > math.MaxInt64/ti.typeSize {
		return 0, fmt.Errorf("%d elements of %s overflow a byte size", n, ti.name)
	}
	return blocks * ti.typeSize, nil
}

// Decoder decodes the bytes of n consecutive elements of one ggml type into
// float32 values exactly as ggml's dequantize_row_<type> computes them.
// raw holds exactly t.RowBytes(n) bytes and len(dst) == n. It returns an
// error wrapping ErrUnsupported for a type it does not decode.
//
// Package gguf decodes F32, F16 and BF16 itself (PlainDecoder); the block
// types come from a Decoder passed in Options.
type Decoder func(t Type, raw []byte, n int, dst []float32) error

// PlainDecoder decodes F32, F16 and BF16, the types llama.cpp's converter
// writes unquantized; any other type is ErrUnsupported.
func PlainDecoder(t Type, raw []byte, n int, dst []float32) error {
	if len(dst) != n {
		return fmt.Errorf("gguf: decoding %d %s elements into %d values", n, t, len(dst))
	}
	want, err := t.RowBytes(int64(n))
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
			dst[i] = f16ToF32(le.Uint16(raw[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(le.Uint16(raw[2*i:])) << 16)
		}
	default:
		return fmt.Errorf("%w: no decoder for ggml type %s", ErrUnsupported, t)
	}
	return nil
}

// f16ToF32 converts an IEEE half to float32 exactly (as ggml's
// GGML_FP16_TO_FP32).
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: man·2⁻²⁴, exact in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
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
