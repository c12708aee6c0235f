package cuda

// dq_ggml (kernels/ggml.cu) against package gguf/ggml's decoders: in fp32
// the kernel's values must be bit-identical to ggml.Dequantize (NaNs: both
// NaN), in bf16/fp16 those values rounded once more.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/quant"
)

func TestGGMLKernelMatchesDecoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 4))
	d := emuDevices(t, 1, 1<<26)[0]
	// 64 rows of 512: 128 super-blocks, 4096 random grid lookups per type.
	const out, in = 64, 512
	for _, typ := range ggml.Types() {
		row, err := ggml.RowBytes(typ, in)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, int(row)*out)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if typ == ggml.F16 || typ == ggml.BF16 || typ == ggml.F32 {
			// Plus every exponent: a sweep of the 16-bit patterns.
			for i := 0; i+1 < len(data); i += 2 {
				binary.LittleEndian.PutUint16(data[i:], uint16(i*67))
			}
		}
		want := make([]float32, out*in)
		if err := ggml.Dequantize(typ, data, want); err != nil {
			t.Fatal(err)
		}
		h, err := prepareGGML("blk.0.ffn_up.weight", typ, out, in, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		dl, err := upload(d, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, odt := range []device.DType{device.F32, device.BF16, device.F16} {
			scratch, err := d.Alloc(int64(out * in * odt.Size()))
			if err != nil {
				t.Fatal(err)
			}
			p, err := dl.weight(d, scratch, odt)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			buf := make([]byte, out*in*odt.Size())
			if err := d.CopyOut(buf, p); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, w := range want {
				var got, exp float64
				switch odt {
				case device.F32:
					got, exp = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))), float64(w)
				case device.BF16:
					got = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16))
					exp = quant.RoundBF16(float64(w))
				case device.F16:
					got = float64(ggml.F16ToF32(binary.LittleEndian.Uint16(buf[2*i:])))
					exp = quant.RoundF16(float64(w))
				}
				if math.Float64bits(got) != math.Float64bits(exp) && !(got != got && exp != exp) {
					if bad < 3 {
						t.Errorf("%s %s: element %d = %g, decoder %g", typ, odt, i, got, exp)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s %s: %d of %d values differ", typ, odt, bad, len(want))
			}
			d.Free(scratch)
		}
	}
}

// TestGGMLKernelRowOrder: a row order moves whole decoded rows.
func TestGGMLKernelRowOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 5))
	d := emuDevices(t, 1, 1<<24)[0]
	const out, in = 6, 64
	typ := ggml.Q4_0
	data := make([]byte, out*in/32*18)
	for i := range data {
		data[i] = 0x30 + byte(rng.IntN(12))
	}
	plain := make([]float32, out*in)
	if err := ggml.Dequantize(typ, data, plain); err != nil {
		t.Fatal(err)
	}
	rows := []int{3, 0, 5, 1, 4, 2}
	h, err := prepareGGML("blk.0.attn_q.weight", typ, out, in, data, rows)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := upload(d, h)
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := d.Alloc(out * in * 4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dl.weight(d, scratch, device.F32)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, out*in*4)
	if err := d.CopyOut(buf, p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < out; i++ {
		for c := 0; c < in; c++ {
			got := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(i*in+c):]))
			if want := plain[rows[i]*in+c]; got != want {
				t.Fatalf("row %d col %d = %v, want stored row %d's %v", i, c, got, rows[i], want)
			}
		}
	}
}

func TestPrepareGGMLRefuses(t *testing.T) {
	for _, c := range []struct {
		typ     ggml.Type
		out, in int
		n       int
		rows    []int
		want    string
	}{
		{ggml.Q8_K, 1, 256, 292, nil, "ggml type q8_K (id 15) has no decoder"},
		{ggml.Q4_K, 2, 200, 288, nil, "not a whole number of 256-element blocks"},
		{ggml.Q4_K, 2, 256, 287, nil, "q4_K [2][256] needs 288 bytes, got 287"},
		{ggml.Q4_K, 2, 256, 288, []int{0}, "row order has 1 entries for 2 rows"},
		{ggml.Q4_K, 2, 256, 288, []int{1, 1}, "row order is not a permutation of 0..1 (entry 1 is 1)"},
		{ggml.Q4_K, 2, 256, 288, []int{0, 2}, "entry 1 is 2"},
	} {
		_, err := prepareGGML("output.weight", c.typ, c.out, c.in, make([]byte, c.n), c.rows)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "output.weight") {
			t.Errorf("%s: %v, want %q", c.typ, err, c.want)
		}
	}
}
