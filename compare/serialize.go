package compare

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Binary form of a WindowResult (one journal record), little-endian:
//
//	u8 version (1) | uvarint Index, First, Len | u8 flags
//	(1: Top1, 2: base, 4: TopKOverlap) | f64 NLL[T] | [i32 Top1[T]]
//	| [uvarint nKL | f64 KL[nKL] | f64 BaseNLL[T] | i32 BaseTop1[T]]
//	| [i32 TopKOverlap[T]]
//
// with T = Len − First. Float64 values are stored bit for bit, so a
// journaled window reduces exactly like the original.

const wrVersion = 1

// MarshalBinary encodes w.
func (w *WindowResult) MarshalBinary() ([]byte, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	t := w.Targets()
	b := make([]byte, 0, 32+8*t+8*len(w.KL)+16*t)
	b = append(b, wrVersion)
	b = binary.AppendUvarint(b, uint64(w.Index))
	b = binary.AppendUvarint(b, uint64(w.First))
	b = binary.AppendUvarint(b, uint64(w.Len))
	var flags byte
	if w.Top1 != nil {
		flags |= 1
	}
	if w.HasBase() {
		flags |= 2
	}
	if w.TopKOverlap != nil {
		flags |= 4
	}
	b = append(b, flags)
	b = appendF64s(b, w.NLL)
	if w.Top1 != nil {
		b = appendI32s(b, w.Top1)
	}
	if w.HasBase() {
		b = binary.AppendUvarint(b, uint64(len(w.KL)))
		b = appendF64s(b, w.KL)
		b = appendF64s(b, w.BaseNLL)
		b = appendI32s(b, w.BaseTop1)
	}
	if w.TopKOverlap != nil {
		b = appendI32s(b, w.TopKOverlap)
	}
	return b, nil
}

func appendF64s(b []byte, v []float64) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func appendI32s(b []byte, v []int32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

var errShortRecord = errors.New("window record: truncated")

type recReader struct {
	b   []byte
	err error
}

func (r *recReader) uvarint(limit uint64) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.err = fmt.Errorf("window record: bad length field")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *recReader) f64s(n int) []float64 {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)/8 {
		r.err = errShortRecord
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.b[8*i:]))
	}
	r.b = r.b[8*n:]
	return v
}

func (r *recReader) i32s(n int) []int32 {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)/4 {
		r.err = errShortRecord
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(r.b[4*i:]))
	}
	r.b = r.b[4*n:]
	return v
}

// UnmarshalBinary decodes a record written by MarshalBinary. Lengths are
// checked against the record size before allocating; the decoded window is
// validated as Reduce would.
func (w *WindowResult) UnmarshalBinary(data []byte) error {
	if len(data) < 1 || data[0] != wrVersion {
		return fmt.Errorf("window record: unknown version")
	}
	r := &recReader{b: data[1:]}
	const lim = 1 << 40
	var x WindowResult
	x.Index = r.uvarint(lim)
	x.First = r.uvarint(lim)
	x.Len = r.uvarint(lim)
	if r.err != nil {
		return r.err
	}
	if len(r.b) < 1 || x.First < 1 || x.Len < x.First {
		return fmt.Errorf("window record: bad header")
	}
	flags := r.b[0]
	r.b = r.b[1:]
	if flags&^7 != 0 {
		return fmt.Errorf("window record: unknown flags %#x", flags)
	}
	t := x.Len - x.First
	x.NLL = r.f64s(t)
	if flags&1 != 0 {
		x.Top1 = r.i32s(t)
	}
	if flags&2 != 0 {
		n := r.uvarint(uint64(len(r.b)))
		x.KL = r.f64s(n)
		x.BaseNLL = r.f64s(t)
		x.BaseTop1 = r.i32s(t)
	}
	if flags&4 != 0 {
		x.TopKOverlap = r.i32s(t)
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("window record: %d trailing bytes", len(r.b))
	}
	if err := x.validate(); err != nil {
		return fmt.Errorf("window record: %w", err)
	}
	*w = x
	return nil
}
