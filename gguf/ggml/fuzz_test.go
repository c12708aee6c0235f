package ggml

import (
	"math"
	"testing"
)

// FuzzDequantize: arbitrary bytes, type ids and lengths never panic; a
// supported type with a whole number of blocks of the exact byte size
// always decodes, and the float64 widening agrees with the float32 pass.
func FuzzDequantize(f *testing.F) {
	for _, t := range Types() {
		f.Add(uint32(t), uint16(t.BlockSize()), make([]byte, t.TypeSize()))
	}
	f.Add(uint32(99), uint16(32), []byte{1, 2, 3})
	f.Add(uint32(Q4_K), uint16(255), make([]byte, 144))
	f.Fuzz(func(t *testing.T, id uint32, n uint16, data []byte) {
		typ := Type(id)
		dst := make([]float32, n)
		err := Dequantize(typ, data, dst)
		want, rerr := RowBytes(typ, int64(n))
		ok := typ.Supported() && rerr == nil && want == int64(len(data))
		if ok != (err == nil) {
			t.Fatalf("%s n %d len %d: err %v, expected success %v", typ, n, len(data), err, ok)
		}
		if !ok {
			return
		}
		if _, err := CheckType("t", id); err != nil {
			t.Fatalf("CheckType refuses decodable %s: %v", typ, err)
		}
		d64 := make([]float64, n)
		if err := DequantizeFloat64(typ, data, d64, nil); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			if math.Float64bits(float64(v)) != math.Float64bits(d64[i]) && !(v != v && d64[i] != d64[i]) {
				t.Fatalf("%s element %d: float64 %v, float32 %v", typ, i, d64[i], v)
			}
		}
	})
}
