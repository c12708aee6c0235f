package ggml

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// quantizeRows are the test rows of the quantizer: realisticRows (Gaussian
// rows with outliers and degenerate ones) and, per row, one of a few
// harder shapes: uniform, heavy-tailed, one-sided, values on a coarse grid
// (ties in the level choice), mixed zero and non-zero blocks, values past
// float16's range.
func quantizeRows(rng *rand.Rand, rows, perRow int) []float32 {
	x := realisticRows(rng, rows, perRow)
	for r := 0; r < rows; r++ {
		row := x[r*perRow : (r+1)*perRow]
		switch r % 16 {
		case 8:
			for i := range row {
				row[i] = float32(rng.Float64()*2 - 1)
			}
		case 9:
			for i := range row {
				row[i] = float32(rng.NormFloat64() / (0.05 + rng.Float64()))
			}
		case 10:
			for i := range row {
				row[i] = float32(math.Abs(rng.NormFloat64()) * 0.02)
			}
		case 11:
			for i := range row {
				row[i] = float32(rng.IntN(17)-8) / 16
			}
		case 12:
			for i := range row {
				if i/32%3 != 1 {
					row[i] = float32(rng.NormFloat64() * 0.01)
				} else {
					row[i] = 0
				}
			}
		case 13:
			for i := range row {
				row[i] = -float32(math.Abs(rng.NormFloat64()) * 3)
			}
		case 14: // around float16's largest value: scales and F16 overflow
			for i := range row {
				row[i] = float32(rng.NormFloat64() * 3e4)
			}
			row[0], row[1], row[2] = 65519.996, 65520, -1e6
		}
	}
	return x
}

// TestQuantizeMatchesGGML: for every type qppl quantizes, the bytes equal
// ggml_quantize_chunk's (llama.cpp's libggml-base, no importance matrix)
// block for block, on 1024 rows of 512 values (2048 super-blocks and
// 16384 32-value blocks per type); and they decode to the values ggml's
// own decoder gives.
func TestQuantizeMatchesGGML(t *testing.T) {
	r := libggml(t)
	rng := rand.New(rand.NewPCG(17, 3))
	const rows, perRow = 1024, 512
	x := quantizeRows(rng, rows, perRow)
	var types []Type
	for _, typ := range QuantizableTypes() {
		types = append(types, typ)
	}
	want := r.quantize(t, types, x, perRow, nil)
	for _, typ := range types {
		got, err := Quantize(typ, x, perRow)
		if err != nil {
			t.Fatal(err)
		}
		w := want[typ]
		if len(got) != len(w) {
			t.Fatalf("%s: %d bytes, ggml %d", typ, len(got), len(w))
		}
		ts := typ.TypeSize()
		blocks, same := len(w)/ts, 0
		for i := 0; i < len(w); i += ts {
			if bytes.Equal(got[i:i+ts], w[i:i+ts]) {
				same++
			} else if blocks-same <= 3 {
				t.Errorf("%s block %d (row %d): qppl % x\nggml % x", typ, i/ts, i/ts/(perRow/typ.BlockSize()), got[i:i+ts], w[i:i+ts])
			}
		}
		t.Logf("%-6s %d/%d blocks byte-identical to ggml_quantize_chunk", typ, same, blocks)
		if same != blocks {
			t.Errorf("%s: %d of %d blocks differ from ggml", typ, blocks-same, blocks)
		}
	}
}

// TestQuantizeRoundTrip: every type decodes to values close to what it
// encoded (relative RMS error bounded per bit width; F32 exact), so that a
// quantizer writing the wrong layout cannot pass on ggml agreement alone.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	const rows, perRow = 32, 256
	x := quantizeRows(rng, rows, perRow)
	for r := 14; r < rows; r += 16 { // past float16's range: no error bound
		clear(x[r*perRow : (r+1)*perRow])
	}
	for _, typ := range QuantizableTypes() {
		q, err := Quantize(typ, x, perRow)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(x))
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i := range x {
			d := float64(y[i]) - float64(x[i])
			num += d * d
			den += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(num / den)
		// Relative RMS error: F32 exact, the 8-bit types below 1 %, the
		// 4-bit ones below 15 % (outlier rows included).
		limit := map[Type]float64{F32: 0, F16: 1e-3, BF16: 4e-3, Q8_0: 0.01, Q6_K: 0.03, Q5_0: 0.08, Q5_1: 0.06, Q5_K: 0.06}[typ]
		if limit == 0 && typ != F32 {
			limit = 0.15
		}
		t.Logf("%-6s relative RMS error %.4g", typ, rel)
		if !(rel <= limit) {
			t.Errorf("%s: relative RMS error %g > %g", typ, rel, limit)
		}
	}
}

func TestQuantizeRefusesBadShapes(t *testing.T) {
	for _, c := range []struct {
		typ    Type
		n, row int
	}{
		{Q4_K, 256, 128}, {Q8_0, 100, 100}, {Q8_0, 64, 48}, {IQ2_XXS, 256, 256}, {Type(99), 32, 32}, {Q8_0, 64, 0},
	} {
		if _, err := Quantize(c.typ, make([]float32, c.n), c.row); err == nil {
			t.Errorf("Quantize(%s, %d values, rows of %d): no error", c.typ, c.n, c.row)
		}
	}
}

// TestF32ToF16: every binary16 value converts back to itself, and every
// float32 between two neighbours rounds to the nearer (ties to the even
// one); overflow gives infinity.
func TestF32ToF16(t *testing.T) {
	for h := uint32(0); h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := F32ToF16(f); F16ToF32(g) == F16ToF32(g) {
				t.Fatalf("NaN %#04x -> %#04x", h, g)
			}
			continue
		}
		if g := F32ToF16(f); g != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x) = %g) = %#04x", h, f, g)
		}
		if h&0x7fff >= 0x7bff { // the largest finite and infinity: no next value
			continue
		}
		next := F16ToF32(uint16(h + 1))
		mid := float32((float64(f) + float64(next)) / 2) // exact in float32
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if g := F32ToF16(mid); g != want {
			t.Fatalf("tie %g between %#04x and %#04x -> %#04x, want %#04x", mid, h, h+1, g, want)
		}
		if g := F32ToF16(math.Nextafter32(mid, 0)); g != uint16(h) && f >= 0 {
			t.Fatalf("below the tie %g -> %#04x, want %#04x", mid, g, h)
		}
	}
	if F32ToF16(65520) != 0x7c00 || F32ToF16(65519.996) != 0x7bff || F32ToF16(-1e9) != 0xfc00 {
		t.Fatal("overflow rounding")
	}
}

// quantizeDigest is the SHA-256 of every quantizable type's encoding of
// quantizeRows(PCG(17, 3), 1024, 512), types in id order: the bytes
// TestQuantizeMatchesGGML proves equal to libggml's (on amd64, with the
// library). TestQuantizeDigest pins them so that a build without the
// library, or another GOARCH (qemu-aarch64: the float32 roundings that
// forbid fused multiply-adds), checks the same bytes.
const quantizeDigest = "4944b05a86dad6ddb8cb9dff3f3884c64f9a8e3bba01f2dbb6d797cca8b21a1d"

func TestQuantizeDigest(t *testing.T) {
	x := quantizeRows(rand.New(rand.NewPCG(17, 3)), 1024, 512)
	h := sha256.New()
	for _, typ := range QuantizableTypes() {
		q, err := Quantize(typ, x, 512)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(q)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != quantizeDigest {
		t.Fatalf("quantizer output digest %s, want %s (the bytes ggml_quantize_chunk gives)", got, quantizeDigest)
	}
}
