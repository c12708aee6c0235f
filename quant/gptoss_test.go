package quant

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestGptOssMXFP4WorkedExample decodes bytes whose values follow from
// transformers' integrations/mxfp4.py convert_moe_packed_tensors: lut =
// FP4_VALUES (+0, +0.5, +1, +1.5, +2, +3, +4, +6, -0, -0.5, …, -6);
// out[:, 0::2] = lut[blk & 0x0F], out[:, 1::2] = lut[blk >> 4];
// ldexp(out, scale - 127); reshape [E, rows, G·32]; transpose(1, 2) to the
// [E, in, out] parameter used as x @ W. So expert e's nn.Linear weight
// row r, column 32g + 2b is lut[blocks[e][r][g][b] & 15]·2^(scales[e][r][g]-127)
// and column 32g + 2b + 1 the high nibble's.
func TestGptOssMXFP4WorkedExample(t *testing.T) {
	const E, rows, cols = 2, 2, 64 // down_proj of hidden 2, width 64: blocks [2, 2, 2, 16]
	blocks := make([]byte, E*rows*2*16)
	scales := make([]byte, E*rows*2)
	for i := range scales {
		scales[i] = 127 // ×1
	}
	// expert 1, row 0, group 1, byte 3: 0x2F → column 32+6 = lut[0xF] = -6,
	// column 32+7 = lut[0x2] = +1; scale 128 → ×2: -12, +2.
	blocks[((1*rows+0)*2+1)*16+3] = 0x2F
	scales[(1*rows+0)*2+1] = 128
	// expert 0, row 1, group 0, byte 0: 0x81 → column 0 = lut[1] = +0.5,
	// column 1 = lut[8] = -0; scale 125 → ×1/4: 0.125, -0.
	blocks[((0*rows+1)*2+0)*16+0] = 0x81
	scales[(0*rows+1)*2+0] = 125
	// expert 0, row 0, group 1, byte 15: 0x7C → column 62 = lut[0xC] = -2,
	// column 63 = lut[7] = 6; scale 0 → ×2^-127.
	blocks[((0*rows+0)*2+1)*16+15] = 0x7C
	scales[(0*rows+0)*2+1] = 0
	want := map[[3]int]float64{
		{1, 0, 38}: -12, {1, 0, 39}: 2,
		{0, 1, 0}: 0.125, {0, 1, 1}: math.Copysign(0, -1),
		{0, 0, 62}: -2 * math.Ldexp(1, -127), {0, 0, 63}: 6 * math.Ldexp(1, -127),
	}
	// gate_up_proj of hidden 2, width 64: dense bf16 [E, 2, 128].
	gu := make([]byte, 2*E*2*128)
	src := newMem().
		add("l.down_proj_blocks", "U8", []int{E, rows, 2, 16}, blocks).
		add("l.down_proj_scales", "U8", []int{E, rows, 2}, scales).
		add("l.gate_up_proj", "BF16", []int{E, rows, 2 * cols}, gu)
	s := &Scheme{Method: MethodMXFP4}
	_, down, err := s.OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	for e := 0; e < E; e++ {
		w := make([]float64, rows*cols)
		if err := down[e].Dequantize(w); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				v, ok := want[[3]int{e, r, c}]
				if !ok {
					v = 0
				}
				if got := w[r*cols+c]; got != v || math.Signbit(got) != math.Signbit(v) {
					t.Errorf("expert %d [%d][%d] = %v, want %v", e, r, c, got, v)
				}
			}
		}
	}

	// Refusals: blocks without quant_method mxfp4, the E8M0 NaN, and a
	// product transformers' bf16 decode makes infinite (4·2^(254-127)).
	if _, _, err := (&Scheme{Method: MethodDense}).OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols); err == nil || !strings.Contains(err.Error(), "quant_method") {
		t.Errorf("blocks under quant_method dense: %v", err)
	}
	bad := append([]byte(nil), scales...)
	bad[1] = 255
	src.add("l.down_proj_scales", "U8", []int{E, rows, 2}, bad)
	if _, _, err := s.OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols); err == nil || !strings.Contains(err.Error(), "0xFF") {
		t.Errorf("scale 0xFF: %v", err)
	}
	bad[1] = 127
	bad[(1*rows+0)*2+1] = 254 // expert 1 row 0 group 1 holds -6 and +1: -6·2^127 overflows
	src.add("l.down_proj_scales", "U8", []int{E, rows, 2}, bad)
	if _, _, err := s.OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols); err == nil || !strings.Contains(err.Error(), "infinite") {
		t.Errorf("-6·2^127: %v", err)
	}
	bad[(1*rows+0)*2+1] = 253 // -6·2^126 = -1.5·2^128: still infinite; scale 252 is fine
	src.add("l.down_proj_scales", "U8", []int{E, rows, 2}, bad)
	if _, _, err := s.OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols); err == nil || !strings.Contains(err.Error(), "infinite") {
		t.Errorf("-6·2^126: %v", err)
	}
	bad[(1*rows+0)*2+1] = 252
	src.add("l.down_proj_scales", "U8", []int{E, rows, 2}, bad)
	if _, _, err := s.OpenGptOssExperts(src, "l.gate_up_proj", "l.down_proj", E, rows, cols); err != nil {
		t.Errorf("-6·2^125 is finite in bf16: %v", err)
	}
}

// TestGptOssDenseExpertsTransposed: a dense fused tensor [E, in, out]
// (used as x @ W) opens as nn.Linear weights [out, in], rows in any range.
func TestGptOssDenseExpertsTransposed(t *testing.T) {
	const E, hidden, width = 2, 3, 2 // gate_up [E, 3, 4], down [E, 2, 3]
	enc := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	gu := make([]float32, E*hidden*2*width)
	for i := range gu {
		gu[i] = float32(i)
	}
	dn := make([]float32, E*width*hidden)
	src := newMem().add("x.gate_up_proj", "F32", []int{E, hidden, 2 * width}, enc(gu)).
		add("x.down_proj", "F32", []int{E, width, hidden}, enc(dn))
	gate, _, err := (&Scheme{Method: MethodDense}).OpenGptOssExperts(src, "x.gate_up_proj", "x.down_proj", E, hidden, width)
	if err != nil {
		t.Fatal(err)
	}
	for e := 0; e < E; e++ {
		rd := gate[e].(RowDequantizer)
		for r0 := 0; r0 < 2*width; r0++ {
			w := make([]float64, (2*width-r0)*hidden)
			if err := rd.DequantizeRows(r0, 2*width, w); err != nil {
				t.Fatal(err)
			}
			for r := r0; r < 2*width; r++ {
				for c := 0; c < hidden; c++ {
					if got, want := w[(r-r0)*hidden+c], float64(gu[(e*hidden+c)*2*width+r]); got != want {
						t.Errorf("expert %d rows from %d: W[%d][%d] = %v, want stored [%d][%d][%d] = %v", e, r0, r, c, got, e, c, r, want)
					}
				}
			}
		}
	}
	if _, _, err := (&Scheme{Method: MethodDense}).OpenGptOssExperts(src, "x.gate_up_proj", "x.down_proj", E, hidden+1, width); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("wrong hidden: %v", err)
	}
}

// TestGptOssExpertsBPW: the fused experts count in the decoder's bits per
// weight as compare_q counts every weight (MXFP4: 16 bytes of codes and one
// scale byte per 32 weights, 4.25 bits; the biases excluded), beside the
// Linears.
func TestGptOssExpertsBPW(t *testing.T) {
	const E, rows, cols = 4, 8, 64
	src := newMem().
		add("model.layers.0.mlp.experts.down_proj_blocks", "U8", []int{E, rows, cols / 32, 16}, make([]byte, E*rows*cols/2)).
		add("model.layers.0.mlp.experts.down_proj_scales", "U8", []int{E, rows, cols / 32}, make([]byte, E*rows*cols/32)).
		add("model.layers.0.mlp.experts.down_proj_bias", "BF16", []int{E, rows}, make([]byte, 2*E*rows)).
		add("model.layers.0.mlp.experts.gate_up_proj", "BF16", []int{E, rows, 2 * cols}, make([]byte, 2*E*rows*2*cols)).
		add("model.layers.0.mlp.experts.gate_up_proj_bias", "BF16", []int{E, 2 * cols}, make([]byte, 2*E*2*cols)).
		add("model.layers.0.self_attn.q_proj.weight", "BF16", []int{32, 8}, make([]byte, 2*32*8))
	r, err := (&Scheme{Method: MethodMXFP4}).InspectSource(src, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range r.Modules {
		got[m.Module] = m.BPW
	}
	want := map[string]float64{"model.layers.0.mlp.experts.down_proj": 4.25, "model.layers.0.mlp.experts.gate_up_proj": 16, "model.layers.0.self_attn.q_proj": 16}
	if len(got) != len(want) {
		t.Fatalf("modules %v, want %v", got, want)
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("%s: %v bpw, want %v", m, got[m], w)
		}
	}
	if w := int64(E*rows*cols + E*2*cols*rows + 32*8); r.LayerWeights != w {
		t.Errorf("layer weights %d, want %d", r.LayerWeights, w)
	}
}
