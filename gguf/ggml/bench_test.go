package ggml

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDequantize decodes a 4096×256 slab per type; bytes/s count the
// float32 values written (4 bytes each), so types compare directly. Every
// byte is in [0x30, 0x3c) so that each f16 (and bf16, e8m0) scale is a
// normal number of moderate size, as in real files: random bytes would
// time subnormal arithmetic.
func BenchmarkDequantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 4096 * 256
	dst := make([]float32, n)
	for _, typ := range Types() {
		size, _ := RowBytes(typ, n)
		src := make([]byte, size)
		for i := range src {
			src[i] = 0x30 + byte(rng.IntN(12))
		}
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize encodes 256 rows of 1024 Gaussian values per type;
// bytes/s count the float32 values read.
func BenchmarkQuantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 3))
	const rows, perRow = 256, 1024
	x := make([]float32, rows*perRow)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.02)
	}
	for _, typ := range QuantizableTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * rows * perRow)
			for b.Loop() {
				if _, err := Quantize(typ, x, perRow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
