package ggml

import (
	"fmt"
	"math"
	"math/bits"
)

// Type is a ggml tensor type id as stored in a GGUF tensor info
// (enum ggml_type).
type Type uint32

// The ggml type ids. Ids 4, 5 and 31-33, 36-38 were removed from ggml and
// are unknown here.
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
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// qk is the super-block size of the k-quants and i-quants (QK_K).
const qk = 256

// traits describes one type: ggml's name, elements per block, bytes per
// block, and the block decoder (nil: known but not decoded by qppl).
type traits struct {
	name      string
	blockSize int
	typeSize  int
	decode    func(b []byte, y []float32)
}

// typeTraits returns the traits of t; ok is false for an unknown id.
func typeTraits(t Type) (traits, bool) {
	switch t {
	case F32:
		return traits{"f32", 1, 4, decodeF32}, true
	case F16:
		return traits{"f16", 1, 2, decodeF16}, true
	case BF16:
		return traits{"bf16", 1, 2, decodeBF16}, true
	case Q4_0:
		return traits{"q4_0", 32, 18, decodeQ4_0}, true
	case Q4_1:
		return traits{"q4_1", 32, 20, decodeQ4_1}, true
	case Q5_0:
		return traits{"q5_0", 32, 22, decodeQ5_0}, true
	case Q5_1:
		return traits{"q5_1", 32, 24, decodeQ5_1}, true
	case Q8_0:
		return traits{"q8_0", 32, 34, decodeQ8_0}, true
	case Q2_K:
		return traits{"q2_K", qk, 84, decodeQ2_K}, true
	case Q3_K:
		return traits{"q3_K", qk, 110, decodeQ3_K}, true
	case Q4_K:
		return traits{"q4_K", qk, 144, decodeQ4_K}, true
	case Q5_K:
		return traits{"q5_K", qk, 176, decodeQ5_K}, true
	case Q6_K:
		return traits{"q6_K", qk, 210, decodeQ6_K}, true
	case IQ4_NL:
		return traits{"iq4_nl", 32, 18, decodeIQ4_NL}, true
	case IQ4_XS:
		return traits{"iq4_xs", qk, 136, decodeIQ4_XS}, true
	case MXFP4:
		return traits{"mxfp4", 32, 17, decodeMXFP4}, true
	case IQ2_XXS:
		return traits{"iq2_xxs", qk, 66, decodeIQ2_XXS}, true
	case IQ2_XS:
		return traits{"iq2_xs", qk, 74, decodeIQ2_XS}, true
	case IQ2_S:
		return traits{"iq2_s", qk, 82, decodeIQ2_S}, true
	case IQ3_XXS:
		return traits{"iq3_xxs", qk, 98, decodeIQ3_XXS}, true
	case IQ3_S:
		return traits{"iq3_s", qk, 110, decodeIQ3_S}, true
	case IQ1_S:
		return traits{"iq1_s", qk, 50, decodeIQ1_S}, true
	case IQ1_M:
		return traits{"iq1_m", qk, 56, decodeIQ1_M}, true
	// Known to ggml, not decoded here.
	case Q8_1:
		return traits{"q8_1", 32, 36, nil}, true
	case Q8_K:
		return traits{"q8_K", qk, 292, nil}, true
	case I8:
		return traits{"i8", 1, 1, nil}, true
	case I16:
		return traits{"i16", 1, 2, nil}, true
	case I32:
		return traits{"i32", 1, 4, nil}, true
	case I64:
		return traits{"i64", 1, 8, nil}, true
	case F64:
		return traits{"f64", 1, 8, nil}, true
	case TQ1_0:
		return traits{"tq1_0", qk, 54, decodeTQ1_0}, true
	case TQ2_0:
		return traits{"tq2_0", qk, 66, decodeTQ2_0}, true
	case NVFP4:
		return traits{"nvfp4", 64, 36, decodeNVFP4}, true
	case Q1_0:
		return traits{"q1_0", 128, 18, decodeQ1_0}, true
	case Q2_0:
		return traits{"q2_0", 64, 18, decodeQ2_0}, true
	}
	return traits{}, false
}

// Known reports whether t is a ggml type id this package can name.
func (t Type) Known() bool { _, ok := typeTraits(t); return ok }

// Supported reports whether Dequantize decodes t.
func (t Type) Supported() bool { tr, ok := typeTraits(t); return ok && tr.decode != nil }

// String is ggml's name of the type (ggml_type_name: "q4_K", "iq2_xxs",
// "bf16"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if tr, ok := typeTraits(t); ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements one block holds (ggml_blck_size);
// 0 for an unknown id.
func (t Type) BlockSize() int { tr, _ := typeTraits(t); return tr.blockSize }

// TypeSize is the number of bytes one block occupies (ggml_type_size); 0
// for an unknown id.
func (t Type) TypeSize() int { tr, _ := typeTraits(t); return tr.typeSize }

// BitsPerWeight is the storage cost of one element, scales included:
// 8*TypeSize/BlockSize (Q4_K: 4.5, IQ2_XXS: 2.0625, F16: 16); 0 for an
// unknown id.
func (t Type) BitsPerWeight() float64 {
	tr, ok := typeTraits(t)
	if !ok {
		return 0
	}
	return 8 * float64(tr.typeSize) / float64(tr.blockSize)
}

// Types lists every supported type in id order.
func Types() []Type {
	var ts []Type
	for t := Type(0); t < 64; t++ {
		if t.Supported() {
			ts = append(ts, t)
		}
	}
	return ts
}

// CheckType validates the type id of the named tensor: an unknown id, or a
// known one qppl does not decode, is an error naming both.
func CheckType(tensor string, id uint32) (Type, error) {
	t := Type(id)
	tr, ok := typeTraits(t)
	if !ok {
		return 0, fmt.Errorf("tensor %q: unknown ggml type id %d", tensor, id)
	}
	if tr.decode == nil {
		return 0, fmt.Errorf("tensor %q: ggml type %s (id %d) is not supported", tensor, tr.name, id)
	}
	return t, nil
}

// RowBytes is the exact byte size of n elements of type t (ggml_row_size),
// checked: n must be a whole number of blocks and the size must not
// overflow int64.
func RowBytes(t Type, n int64) (int64, error) {
	tr, ok := typeTraits(t)
	if !ok {
		return 0, fmt.Errorf("unknown ggml type id %d", uint32(t))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: negative element count %d", tr.name, n)
	}
	if n%int64(tr.blockSize) != 0 {
		return 0, fmt.Errorf("%s: %d elements are not a whole number of %d-element blocks", tr.name, n, tr.blockSize)
	}
	hi, lo := bits.Mul64(uint64(n/int64(tr.blockSize)), uint64(tr.typeSize))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("%s: %d elements overflow the byte size", tr.name, n)
	}
	return int64(lo), nil
}

// Dequantize decodes src, the blocks of len(dst) elements of type t, into
// dst exactly as ggml's dequantize_row does. len(dst) must be a multiple of
// the block size and len(src) the exact byte size.
func Dequantize(t Type, src []byte, dst []float32) error {
	tr, ok := typeTraits(t)
	if !ok || tr.decode == nil {
		return fmt.Errorf("ggml type %s (id %d) cannot be decoded", t, uint32(t))
	}
	want, err := RowBytes(t, int64(len(dst)))
	if err != nil {
		return err
	}
	if int64(len(src)) != want {
		return fmt.Errorf("%s: %d elements need %d bytes, got %d", tr.name, len(dst), want, len(src))
	}
	switch t { // element types: one loop, no per-element call
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le32(src[4*i:]))
		}
		return nil
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(le16(src[2*i:]))
		}
		return nil
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(le16(src[2*i:]))
		}
		return nil
	}
	bs, ts := tr.blockSize, tr.typeSize
	for i, o := 0, 0; o < len(dst); i, o = i+ts, o+bs {
		tr.decode(src[i:i+ts:i+ts], dst[o:o+bs:o+bs])
	}
	return nil
}

// DequantizeFloat64 is Dequantize widened exactly to float64 (the values
// the reference backend computes with). scratch, if it has room for
// len(dst) values, is used for the float32 pass.
func DequantizeFloat64(t Type, src []byte, dst []float64, scratch []float32) error {
	if cap(scratch) < len(dst) {
		scratch = make([]float32, len(dst))
	}
	f := scratch[:len(dst)]
	if err := Dequantize(t, src, f); err != nil {
		return err
	}
	for i, v := range f {
		dst[i] = float64(v)
	}
	return nil
}
