package compare

import (
	"math"
	"testing"
)

// One position of a Llama-3-sized vocabulary through llama.cpp's 16-bit
// scheme, encode and decode.
func BenchmarkU16Vocab128256(b *testing.B) {
	const V = 128256
	lp := make([]float64, V)
	for i := range lp {
		lp[i] = -math.Abs(math.Sin(float64(i))) * 30
	}
	rec := make([]byte, 2*(2*((V+1)/2)+4))
	lp32 := make([]float32, V)
	dst := make([]float64, V)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		encodeU16(lp, lp32, rec)
		decodeU16(rec, dst)
	}
}

// Reduce of compare_q's 20×2047 = 40,940 scored tokens with full KLD
// statistics and 1000 bootstrap resamples.
func BenchmarkReduceRows20Ctx2048KLD(b *testing.B) {
	ws := make([]WindowResult, 20)
	for i := range ws {
		w := WindowResult{Index: i, First: 1, Len: 2048}
		for j := 0; j < 2047; j++ {
			x := float64(i*2047 + j)
			w.NLL = append(w.NLL, 2+math.Sin(x))
			w.BaseNLL = append(w.BaseNLL, 2+math.Sin(x+0.01))
			w.KL = append(w.KL, 0.01*(1+math.Cos(x)))
			w.Top1 = append(w.Top1, int32(j%7))
			w.BaseTop1 = append(w.BaseTop1, int32(j%5))
			w.TopKOverlap = append(w.TopKOverlap, int32(j%6))
		}
		ws[i] = w
	}
	for b.Loop() {
		if _, err := Reduce(ws, ReduceOptions{TopK: 5, KLMode: "scored"}); err != nil {
			b.Fatal(err)
		}
	}
}
