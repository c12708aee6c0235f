package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Encoders: the inverse of the decoders, as ggml_quantize_chunk computes
// them without an importance matrix (ggml/src/ggml-quants.c:
// quantize_row_<type>_ref for the 32-element types and the k-quants,
// quantize_iq4_nl / quantize_iq4_xs for the non-linear ones). Like the
// decoders they are written statement for statement in float32, every
// product an add consumes rounded by an explicit float32 conversion (Go may
// otherwise fuse it into a multiply-add), sums in ggml's order.

// encoder returns the block encoder of t (nil: qppl does not quantize t).
func encoder(t Type) func(x []float32, b []byte) {
	switch t {
	case Q4_0:
		return encodeQ4_0
	case Q4_1:
		return encodeQ4_1
	case Q5_0:
		return encodeQ5_0
	case Q5_1:
		return encodeQ5_1
	case Q8_0:
		return encodeQ8_0
	case Q4_K:
		return encodeQ4_K
	case Q5_K:
		return encodeQ5_K
	case Q6_K:
		return encodeQ6_K
	case IQ4_NL:
		return encodeIQ4_NL
	case IQ4_XS:
		return encodeIQ4_XS
	}
	return nil
}

// Quantizable reports whether Quantize encodes type t.
func (t Type) Quantizable() bool {
	return t == F32 || t == F16 || t == BF16 || encoder(t) != nil
}

// QuantizableTypes lists the types Quantize encodes, in id order.
func QuantizableTypes() []Type {
	var out []Type
	for _, t := range Types() {
		if t.Quantizable() {
			out = append(out, t)
		}
	}
	return out
}

// Quantize encodes the float32 values x (rows of perRow values) as type t,
// byte for byte as ggml_quantize_chunk(t, x, ..., imatrix = NULL) does.
// perRow must be a whole number of t's blocks. F32 is copied, F16 and BF16
// are rounded to nearest even (ggml_fp32_to_fp16 / ggml_fp32_to_bf16 for
// finite values).
func Quantize(t Type, x []float32, perRow int) ([]byte, error) {
	tr, ok := typeTraits(t)
	if !ok {
		return nil, fmt.Errorf("unknown ggml type id %d", uint32(t))
	}
	if perRow <= 0 || len(x)%perRow != 0 {
		return nil, fmt.Errorf("%s: %d values are not whole rows of %d", tr.name, len(x), perRow)
	}
	if perRow%tr.blockSize != 0 {
		return nil, fmt.Errorf("%s: a row of %d values is not a whole number of %d-element blocks", tr.name, perRow, tr.blockSize)
	}
	n, err := RowBytes(t, int64(len(x)))
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	switch t {
	case F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	case F16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
		}
		return out, nil
	case BF16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(v))
		}
		return out, nil
	}
	enc := encoder(t)
	if enc == nil {
		return nil, fmt.Errorf("ggml type %s: qppl has no quantizer for it", tr.name)
	}
	// Blocks are independent: the work is split into contiguous runs of
	// blocks, one per CPU (the bytes do not depend on the split).
	bs, ts := tr.blockSize, tr.typeSize
	nb := len(x) / bs
	workers := min(runtime.GOMAXPROCS(0), max(1, nb/64))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		b0, b1 := nb*w/workers, nb*(w+1)/workers
		wg.Go(func() {
			for b := b0; b < b1; b++ {
				i, o := b*bs, b*ts
				enc(x[i:i+bs:i+bs], out[o:o+ts:o+ts])
			}
		})
	}
	wg.Wait()
	return out, nil
}

// F32ToF16 rounds f to the nearest IEEE binary16, ties to even, with
// overflow to infinity (ggml_compute_fp32_to_fp16, and the F16C
// instruction); NaN stays NaN with its sign.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: keep the top payload bits, stay a NaN
		return sign | 0x7e00 | uint16(a>>13&0x3ff)
	case a >= 0x477ff000: // 65520 and up round to infinity
		return sign | 0x7c00
	case a < 0x38800000: // below 2^-14: a binary16 subnormal, |f|·2^24 rounded
		return sign | uint16(math.RoundToEven(float64(math.Float32frombits(a))*(1<<24)))
	}
	h := (a - 0x38000000) >> 13 // rebias the exponent (127-15), drop 13 bits
	if rem := a & 0x1fff; rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent is the right result
	}
	return sign | uint16(h)
}

// F32ToBF16 rounds f to bfloat16, ties to even (ggml_compute_fp32_to_bf16;
// NaN is kept quiet).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + (0x7fff + (b >> 16 & 1))) >> 16)
}

func put16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// nearestInt is ggml's nearest_int: f rounded to the nearest integer, ties
// to even, by adding 1.5·2^23 in float32 (|f| ≤ 2^22).
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// --- 32-element blocks (quantize_row_<type>_ref) ---

// absMax returns the value of largest magnitude (the first of equal ones)
// and its magnitude, as quantize_row_q4_0_ref scans for it.
func absMax(x []float32) (mx, amax float32) {
	for _, v := range x {
		if amax < abs32(v) {
			amax, mx = abs32(v), v
		}
	}
	return mx, amax
}

func minMax(x []float32) (mn, mx float32) {
	mn, mx = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx
}

func inv(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

// Q4_0: d = max/-8, q = min(15, trunc(x/d + 8.5)).
func encodeQ4_0(x []float32, b []byte) {
	mx, _ := absMax(x)
	d := mx / -8
	id := inv(d)
	put16(b, d)
	for j := 0; j < 16; j++ {
		x0, x1 := float32(x[j]*id), float32(x[16+j]*id)
		b[2+j] = byte(min(15, int8(x0+8.5))) | byte(min(15, int8(x1+8.5)))<<4
	}
}

// Q4_1: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5)).
func encodeQ4_1(x []float32, b []byte) {
	mn, mx := minMax(x)
	d := (mx - mn) / 15
	id := inv(d)
	put16(b, d)
	put16(b[2:], mn)
	for j := 0; j < 16; j++ {
		x0, x1 := float32((x[j]-mn)*id), float32((x[16+j]-mn)*id)
		b[4+j] = byte(min(15, int8(x0+0.5))) | byte(min(15, int8(x1+0.5)))<<4
	}
}

// Q5_0: d = max/-16, q = min(31, trunc(x/d + 16.5)), fifth bits in qh.
func encodeQ5_0(x []float32, b []byte) {
	mx, _ := absMax(x)
	d := mx / -16
	id := inv(d)
	put16(b, d)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0, x1 := float32(x[j]*id), float32(x[16+j]*id)
		xi0, xi1 := byte(min(31, int8(x0+16.5))), byte(min(31, int8(x1+16.5)))
		b[6+j] = xi0&0xf | (xi1&0xf)<<4
		qh |= uint32(xi0&0x10)>>4<<j | uint32(xi1&0x10)>>4<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[2:], qh)
}

// Q5_1: d = (max-min)/31, m = min, q = trunc((x-min)/d + 0.5).
func encodeQ5_1(x []float32, b []byte) {
	mn, mx := minMax(x)
	d := (mx - mn) / 31
	id := inv(d)
	put16(b, d)
	put16(b[2:], mn)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0, x1 := float32((x[j]-mn)*id), float32((x[16+j]-mn)*id)
		xi0, xi1 := byte(x0+0.5), byte(x1+0.5)
		b[8+j] = xi0&0xf | (xi1&0xf)<<4
		qh |= uint32(xi0&0x10)>>4<<j | uint32(xi1&0x10)>>4<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[4:], qh)
}

// Q8_0: d = amax/127, q = roundf(x/d) (half away from zero).
func encodeQ8_0(x []float32, b []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	id := inv(d)
	put16(b, d)
	for j, v := range x {
		b[2+j] = byte(int8(math.Round(float64(v * id))))
	}
}
