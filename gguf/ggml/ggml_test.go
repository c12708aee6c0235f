package ggml

import (
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if refVal != nil {
		os.RemoveAll(refVal.dir)
	}
	os.Exit(code)
}

// sameBits reports whether a and b are the same float32 (NaNs: both NaN,
// payload and sign aside, as x86's NaN propagation depends on operand order).
func sameBits(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// assertIdentical decodes src with Dequantize and ggml and requires every
// value bit-identical.
func assertIdentical(t *testing.T, r *ggmlRef, typ Type, src []byte, n int, what string) {
	t.Helper()
	got := make([]float32, n)
	if err := Dequantize(typ, src, got); err != nil {
		t.Fatalf("%s %s: %v", typ, what, err)
	}
	want := r.dequantize(t, typ, src, n)
	bad := 0
	for i := range got {
		if !sameBits(got[i], want[i]) {
			if bad < 5 {
				t.Errorf("%s %s: element %d (block %d) = %g (%#08x), ggml %g (%#08x)", typ, what, i, i/typ.BlockSize(),
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s %s: %d of %d values differ from ggml", typ, what, bad, n)
	}
}

func TestTypeTable(t *testing.T) {
	// Sizes and bits per weight as ggml's block structs define them
	// (ggml-common.h static_asserts; llama.cpp's quantize tool lists the bpw).
	for _, c := range []struct {
		typ       Type
		name      string
		blk, size int
		bpw       float64
	}{
		{F32, "f32", 1, 4, 32}, {F16, "f16", 1, 2, 16}, {BF16, "bf16", 1, 2, 16},
		{Q4_0, "q4_0", 32, 18, 4.5}, {Q4_1, "q4_1", 32, 20, 5}, {Q5_0, "q5_0", 32, 22, 5.5},
		{Q5_1, "q5_1", 32, 24, 6}, {Q8_0, "q8_0", 32, 34, 8.5},
		{Q2_K, "q2_K", 256, 84, 2.625}, {Q3_K, "q3_K", 256, 110, 3.4375}, {Q4_K, "q4_K", 256, 144, 4.5},
		{Q5_K, "q5_K", 256, 176, 5.5}, {Q6_K, "q6_K", 256, 210, 6.5625},
		{IQ4_NL, "iq4_nl", 32, 18, 4.5}, {IQ4_XS, "iq4_xs", 256, 136, 4.25}, {MXFP4, "mxfp4", 32, 17, 4.25},
		{IQ2_XXS, "iq2_xxs", 256, 66, 2.0625}, {IQ2_XS, "iq2_xs", 256, 74, 2.3125}, {IQ2_S, "iq2_s", 256, 82, 2.5625},
		{IQ3_XXS, "iq3_xxs", 256, 98, 3.0625}, {IQ3_S, "iq3_s", 256, 110, 3.4375},
		{IQ1_S, "iq1_s", 256, 50, 1.5625}, {IQ1_M, "iq1_m", 256, 56, 1.75},
		{TQ1_0, "tq1_0", 256, 54, 1.6875}, {TQ2_0, "tq2_0", 256, 66, 2.0625}, {NVFP4, "nvfp4", 64, 36, 4.5},
		{Q1_0, "q1_0", 128, 18, 1.125}, {Q2_0, "q2_0", 64, 18, 2.25},
	} {
		if c.typ.String() != c.name || c.typ.BlockSize() != c.blk || c.typ.TypeSize() != c.size || c.typ.BitsPerWeight() != c.bpw || !c.typ.Supported() {
			t.Errorf("%d: got %s blk %d size %d bpw %v supported %v, want %s %d %d %v", c.typ, c.typ, c.typ.BlockSize(),
				c.typ.TypeSize(), c.typ.BitsPerWeight(), c.typ.Supported(), c.name, c.blk, c.size, c.bpw)
		}
	}
	if n := len(Types()); n != 28 {
		t.Errorf("Types() lists %d types, want 28", n)
	}
	for _, typ := range []Type{4, 5, 31, 36, 43, 1 << 31} {
		if typ.Known() || typ.BlockSize() != 0 || typ.BitsPerWeight() != 0 || typ.String() != "type("+strconv.Itoa(int(typ))+")" {
			t.Errorf("id %d: known %v blk %d name %s", uint32(typ), typ.Known(), typ.BlockSize(), typ)
		}
	}
}

func TestCheckType(t *testing.T) {
	for _, c := range []struct {
		id   uint32
		want string // error substring; "" means accepted
	}{
		{12, ""}, {30, ""}, {29, ""},
		{4, `tensor "blk.0.attn_q.weight": unknown ggml type id 4`},
		{99, `tensor "blk.0.attn_q.weight": unknown ggml type id 99`},
		{15, `tensor "blk.0.attn_q.weight": ggml type q8_K (id 15) is not supported`},
		{24, `ggml type i8 (id 24) is not supported`},
		{9, `ggml type q8_1 (id 9) is not supported`},
	} {
		typ, err := CheckType("blk.0.attn_q.weight", c.id)
		switch {
		case c.want == "" && (err != nil || uint32(typ) != c.id):
			t.Errorf("id %d: %v", c.id, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("id %d: error %v, want %q", c.id, err, c.want)
		}
	}
}

func TestDequantizeRefusesBadLengths(t *testing.T) {
	for _, c := range []struct {
		typ  Type
		src  int
		n    int
		want string
	}{
		{Q4_K, 144, 255, "not a whole number of 256-element blocks"},
		{Q4_K, 143, 256, "256 elements need 144 bytes, got 143"},
		{Q8_0, 35, 32, "32 elements need 34 bytes, got 35"},
		{Q8_K, 292, 256, "q8_K (id 15) cannot be decoded"},
		{Type(77), 4, 1, "type(77) (id 77) cannot be decoded"},
	} {
		err := Dequantize(c.typ, make([]byte, c.src), make([]float32, c.n))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s src %d n %d: %v, want %q", c.typ, c.src, c.n, err, c.want)
		}
	}
	if _, err := RowBytes(F32, 1<<62); err == nil {
		t.Error("RowBytes(f32, 2^62) did not report the overflow")
	}
	if n, err := RowBytes(IQ2_XS, 512); err != nil || n != 148 {
		t.Errorf("RowBytes(iq2_xs, 512) = %d, %v; want 148", n, err)
	}
}

// TestDecodeKnownValues pins a few values computed by hand from the block
// layouts (independent of the ggml library).
func TestDecodeKnownValues(t *testing.T) {
	// Q8_0: d = 0.5 (f16 0x3800), q = -3 -> -1.5.
	b := make([]byte, 34)
	b[0], b[1] = 0x00, 0x38
	b[2] = 0xfd
	y := make([]float32, 32)
	if err := Dequantize(Q8_0, b, y); err != nil || y[0] != -1.5 || y[1] != 0 {
		t.Errorf("q8_0: %v %v", y[:2], err)
	}
	// Q4_1: d = 2, m = -1 (0xbc00), low nibble 5 -> 9, high nibble 1 -> 1.
	b = make([]byte, 20)
	b[1], b[3] = 0x40, 0xbc
	b[4] = 0x15
	if err := Dequantize(Q4_1, b, y); err != nil || y[0] != 9 || y[16] != 1 {
		t.Errorf("q4_1: %v %v %v", y[0], y[16], err)
	}
	// MXFP4: e = 127 -> half scale 0.5; code 7 is 12 -> 6, code 0xd is -6 -> -3.
	b = make([]byte, 17)
	b[0], b[1] = 127, 0xd7
	if err := Dequantize(MXFP4, b, y); err != nil || y[0] != 6 || y[16] != -3 {
		t.Errorf("mxfp4: %v %v %v", y[0], y[16], err)
	}
	// BF16 and F16.
	var one [1]float32
	if Dequantize(BF16, []byte{0x80, 0x3f}, one[:]); one[0] != 1 {
		t.Errorf("bf16 0x3f80 = %v", one[0])
	}
	if Dequantize(F16, []byte{0x01, 0x00}, one[:]); one[0] != float32(math.Ldexp(1, -24)) {
		t.Errorf("f16 0x0001 = %v", one[0])
	}
	// ksigns: even parity completes the 7 stored bits.
	for i, want := range map[uint32]uint32{0: 0, 1: 129, 3: 3, 127: 255, 126: 126} {
		if got := ksign(i); got != want {
			t.Errorf("ksign(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestF16ToF32 checks every half against an independent conversion.
func TestF16ToF32(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		e, m := h>>10&0x1f, h&0x3ff
		var want float64
		switch e {
		case 0:
			want = math.Ldexp(float64(m), -24)
		case 31:
			want = math.Inf(1)
			if m != 0 {
				want = math.NaN()
			}
		default:
			want = math.Ldexp(float64(m|0x400), e-25)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		got := F16ToF32(uint16(h))
		if float64(got) != want && !(math.IsNaN(want) && got != got) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

// realisticRows draws rows like LLM weights: Gaussian with a per-row scale,
// a few outliers, and some degenerate rows (zero, constant, tiny, huge).
func realisticRows(rng *rand.Rand, rows, perRow int) []float32 {
	x := make([]float32, rows*perRow)
	for r := 0; r < rows; r++ {
		row := x[r*perRow : (r+1)*perRow]
		scale := math.Ldexp(0.5+rng.Float64(), -rng.IntN(12))
		switch r % 8 {
		case 5: // all zero
			continue
		case 6: // constant
			for i := range row {
				row[i] = float32(scale)
			}
			continue
		case 7: // tiny: f16 scales underflow to subnormals
			scale = 1e-7
		}
		for i := range row {
			v := rng.NormFloat64() * scale
			if rng.IntN(64) == 0 {
				v *= 8
			}
			row[i] = float32(v)
		}
	}
	return x
}

func TestQuantizedByGGMLBitIdentical(t *testing.T) {
	r := libggml(t)
	rng := rand.New(rand.NewPCG(13, 1))
	// 8 rows of 512 cover every degenerate row kind once.
	const rows, perRow = 8, 512
	x := realisticRows(rng, rows, perRow)
	imatrix := make([]float32, perRow)
	for i := range imatrix {
		v := 0.1 + 2*rng.Float64()
		imatrix[i] = float32(v * v)
	}
	var all, plain []Type
	for _, typ := range Types() {
		if testing.Short() && typ.isGrid() {
			// ggml_quantize_init builds i-quant search tables for 10+ s of CPU.
			continue
		}
		all = append(all, typ)
		if !needsImatrix(typ) && !typ.isGrid() {
			plain = append(plain, typ)
		}
	}
	if testing.Short() {
		t.Log("-short: grid types are covered by TestArbitraryBytesBitIdentical and TestGridsAgainstGGML only")
	}
	// ggml's i-quant search is slow: the grid types are quantized with the
	// imatrix only, the others with and without it.
	withIm := r.quantize(t, all, x, perRow, imatrix)
	without := r.quantize(t, plain, x, perRow, nil)
	for _, typ := range all {
		t.Run(typ.String(), func(t *testing.T) {
			for _, q := range [][]byte{withIm[typ], without[typ]} {
				if q == nil {
					continue
				}
				if want, _ := RowBytes(typ, int64(len(x))); int64(len(q)) != want {
					t.Fatalf("ggml wrote %d bytes, want %d", len(q), want)
				}
				assertIdentical(t, r, typ, q, len(x), "rows quantized by ggml")
			}
		})
	}
}

// needsImatrix: the types ggml_quantize_chunk refuses without an
// importance matrix (ggml_quantize_requires_imatrix).
func needsImatrix(t Type) bool { return t == IQ2_XXS || t == IQ2_XS || t == IQ1_S }

func TestArbitraryBytesBitIdentical(t *testing.T) {
	r := libggml(t)
	rng := rand.New(rand.NewPCG(13, 2))
	for _, typ := range Types() {
		t.Run(typ.String(), func(t *testing.T) {
			nb := 4096 / typ.BlockSize()
			if nb < 64 {
				nb = 64
			}
			src := make([]byte, nb*typ.TypeSize())
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			assertIdentical(t, r, typ, src, nb*typ.BlockSize(), "arbitrary bytes")
		})
	}
}

func TestTraitsMatchGGML(t *testing.T) {
	r := libggml(t)
	var ids []Type
	for id := Type(0); id < 64; id++ {
		if id.Known() {
			ids = append(ids, id)
		}
	}
	got := r.traits(t, ids)
	for _, id := range ids {
		g := got[id]
		if g[0] != id.String() || g[1] != strconv.Itoa(id.BlockSize()) || g[2] != strconv.Itoa(id.TypeSize()) {
			t.Errorf("id %d: ggml says %s blck %s size %s; package says %s %d %d", id, g[0], g[1], g[2], id, id.BlockSize(), id.TypeSize())
		}
		if id.Supported() && id != F32 && g[3] != "1" {
			t.Errorf("%s: ggml has no dequantizer", id)
		}
	}
}

var updateGrids = flag.Bool("update-grids", false, "rewrite grids.go from libggml's dequantizers")
