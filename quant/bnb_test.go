package quant

import (
	"math"
	"strings"
	"testing"
)

const bnbNF4Config = `{"_load_in_4bit": true, "_load_in_8bit": false, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8",
	"bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": false, "llm_int8_enable_fp32_cpu_offload": false,
	"llm_int8_has_fp16_weight": false, "llm_int8_skip_modules": null, "llm_int8_threshold": 6.0,
	"load_in_4bit": true, "load_in_8bit": false, "quant_method": "bitsandbytes"}`

// bnbModule is a 1×4 NF4/FP4 module with blocksize 64 (one partial block).
func bnbModule(qt string, packed []byte, nested bool) *memSrc {
	code := BNB4Code(qt)
	cf := make([]float64, 16)
	for i, c := range code {
		cf[i] = float64(c)
	}
	qs := `{"quant_type": "` + qt + `", "blocksize": 64, "dtype": "bfloat16", "shape": [1, 4]}`
	src := newMem().add("m.weight", "U8", []int{2, 1}, packed).add("m.weight.quant_map", "F32", []int{16}, floats("F32", cf...))
	if nested {
		// absmax = f32(f32(nested_map[255] · nested_absmax) + offset) = 1 · 0.25 + 0.25
		qs = `{"quant_type": "` + qt + `", "blocksize": 64, "dtype": "bfloat16", "shape": [1, 4], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.25}`
		nm := make([]float64, 256)
		for i := range nm {
			nm[i] = float64(i-128) / 128
		}
		nm[255] = 1
		src.add("m.weight.absmax", "U8", []int{1}, []byte{255}).add("m.weight.nested_absmax", "F32", []int{1}, floats("F32", 0.25)).
			add("m.weight.nested_quant_map", "F32", []int{256}, floats("F32", nm...))
	} else {
		src.add("m.weight.absmax", "F32", []int{1}, floats("F32", 0.5))
	}
	return src.add("m.weight.quant_state.bitsandbytes__"+qt, "U8", []int{len(qs)}, []byte(qs))
}

// TestBNBWorkedExample is docs/formats/bitsandbytes.md's example: bytes F0
// 79 hold codes 15, 0, 7, 9 (high nibble first); NF4 gives 1, -1, 0,
// 0.16093020141124725 times absmax 0.5 in float32, rounded to bf16; double
// quantization reaches the same absmax as 1 · 0.25 + 0.25; FP4 byte 0x6E
// is codes 6 (+2/12) and 14 (-2/12).
func TestBNBWorkedExample(t *testing.T) {
	s := mustScheme(t, bnbNF4Config)
	want := []float64{0.5, -0.5, 0, 0.08056640625} // f32 0.08046510070562363 → bf16
	for _, nested := range []bool{false, true} {
		l, w := decode(t, s, bnbModule("nf4", []byte{0xF0, 0x79}, nested), "m")
		sameBits(t, "NF4", w, want)
		if f := l.Format(); f != "bnb-nf4-b64" && f != "bnb-nf4-dq-b64" {
			t.Errorf("format %s", f)
		}
	}
	fp4 := mustScheme(t, strings.Replace(bnbNF4Config, `"bnb_4bit_quant_type": "nf4"`, `"bnb_4bit_quant_type": "fp4"`, 1))
	_, w := decode(t, fp4, bnbModule("fp4", []byte{0x6E, 0x00}, false), "m")
	sameBits(t, "FP4", w, []float64{0.08349609375, -0.08349609375, 0, 0}) // f32(1/6)·0.5 = 0.0833333358168602 → bf16
	if c := BNB4Code("fp4"); c[6] != float32(2)/float32(12) || c[2] != float32(8)/float32(12) || c[4] != float32(4)/float32(12) {
		t.Errorf("fp4 table is not get_4bit_type's /12 values: %v", c)
	}
}

// TestBNB8WorkedExample: LLM.int8 weight codes with SCB, and the input
// decomposition: column 1 has |x| >= 6 in row 0, so it stays in both rows;
// the rest is int8 per row over the other columns' amax / 127.
func TestBNB8WorkedExample(t *testing.T) {
	s := mustScheme(t, `{"load_in_8bit": true, "load_in_4bit": false, "llm_int8_threshold": 6.0, "quant_method": "bitsandbytes"}`)
	src := newMem().add("m.weight", "I8", []int{1, 3}, []byte{0x81, 0x7F, 0x01}). // -127, 127, 1
											add("m.SCB", "F32", []int{1}, floats("F32", 2.5)).add("m.weight_format", "U8", []int{}, []byte{0})
	l, w := decode(t, s, src, "m")
	sameBits(t, "W", w, []float64{-2.5, 2.5, 2.5 / 127})
	x := []float64{1.27, -7, 0.5, 0.254, 3, -2.54}
	if err := l.InputQuantizer().Quantize(x, 2, 3); err != nil {
		t.Fatal(err)
	}
	s0, s1 := 1.27/127, 2.54/127
	want := []float64{127 * s0, -7, 50 * s0, 13 * s1, 3, -127 * s1} // 0.5/s0 = 50; 0.254/s1 = 12.7 → 13
	sameBits(t, "x", x, want)
	if l.Format() != "bnb-int8+a-llm-int8-t6" {
		t.Errorf("format %s", l.Format())
	}
	// threshold 0: no outlier columns
	a := &ActQuant{Kind: ActLLMInt8}
	y := []float64{1.27, -7, 0.5}
	_ = a.Quantize(y, 1, 3)
	if y[1] != -7 || y[0] != math.RoundToEven(1.27/(7.0/127))*(7.0/127) {
		t.Errorf("no threshold: %v", y)
	}
}

func TestBNBErrors(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{`{"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": true}`, "both true"},
		{`{"quant_method": "bitsandbytes"}`, "neither load_in_4bit nor load_in_8bit"},
		{`{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "int4"}`, "want nf4 or fp4"},
		{`{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_storage": "bfloat16"}`, "bnb_4bit_quant_storage \"bfloat16\" is not evaluated by qppl yet"},
		{`{"quant_method": "bitsandbytes", "load_in_8bit": true, "llm_int8_has_fp16_weight": true}`, "llm_int8_has_fp16_weight"},
		{`{"quant_method": "auto-round", "packing_format": "auto_round:fp8_static"}`, `packing_format "auto_round:fp8_static" is not evaluated`},
		{`{"quant_method": "auto-round", "data_type": "nv_fp"}`, `data_type "nv_fp" is not evaluated`},
		{`{"quant_method": "auto-round", "bits": 4, "act_bits": 8}`, "act_bits 8"},
		{`{"quant_method": "auto-round", "bits": 4, "group_size": 128, "extra_config": {"model.layers.0.mlp.down_proj": {"bits": 8}}}`, "extra_config.model.layers.0.mlp.down_proj: per-layer settings"},
	} {
		_, err := ParseJSON([]byte(c.config), "bfloat16", "x/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x/config.json") {
			t.Errorf("%s: got %v, want %q", c.config, err, c.want)
		}
	}
	s := mustScheme(t, bnbNF4Config)
	bad := bnbModule("nf4", []byte{0xF0, 0x79}, false)
	bad.data["m.weight.quant_map"] = floats("F32", make([]float64, 16)...)
	if _, err := s.Open(bad, "m"); err == nil || !strings.Contains(err.Error(), "m.weight.quant_map: element 0 is 0") {
		t.Errorf("quant_map: %v", err)
	}
	if _, err := s.Open(bnbModule("fp4", []byte{0xF0, 0x79}, false), "m"); err == nil || !strings.Contains(err.Error(), "bitsandbytes__fp4 but quantization_config.bnb_4bit_quant_type is nf4") {
		t.Errorf("quant type: %v", err)
	}
	if _, err := mustScheme(t, "null").Open(bnbModule("nf4", []byte{0xF0, 0x79}, false), "m"); err == nil || !strings.Contains(err.Error(), "has weight.absmax (bitsandbytes) but quant_method is dense") {
		t.Errorf("dense: %v", err)
	}
}

// TestAutoRoundWorkedExample is docs/formats/autoround.md's example: the
// same GPTQ bytes decode with z = stored + 1 under auto_round:auto_gptq and
// z = stored under the native auto_round packing.
func TestAutoRoundWorkedExample(t *testing.T) {
	qw := make([]uint32, 8) // [in/8=1][out=8]
	qw[0] = 0x76543210
	src := func() *memSrc {
		return newMem().add("m.qweight", "I32", []int{1, 8}, i32s(qw...)).
			add("m.qzeros", "I32", []int{1, 1}, i32s(0x00000087)).
			add("m.scales", "F16", []int{1, 8}, floats("F16", 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5))
	}
	for _, c := range []struct {
		pf string
		z  float64
	}{{"auto_round:auto_gptq", 8}, {"auto_round", 7}} {
		s := mustScheme(t, `{"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": false, "data_type": "int", "packing_format": "`+c.pf+`"}`)
		_, w := decode(t, s, src(), "m")
		for i := 0; i < 8; i++ { // column 0: W[0, i], row-major [out][in]
			if w[i] != 0.5*(float64(i)-c.z) {
				t.Fatalf("%s: W[0,%d] = %v, want %v", c.pf, i, w[i], 0.5*(float64(i)-c.z))
			}
		}
	}
}

// TestBNB4RowsAcrossBlocks: with in = 37 and blocksize 32 the absmax blocks
// cross rows; every row range decodes to Dequantize's bits.
func TestBNB4RowsAcrossBlocks(t *testing.T) {
	out, in, bs := 5, 37, 32
	n := out * in
	q := &BNB4{Base: Base{Name: "m", Out: out, In: in}, Code: BNB4Code("fp4"), BlockSize: bs, OutDType: "F16", ComputeDType: "BF16",
		Packed: make([]byte, (n+1)/2), Absmax: make([]float32, (n+bs-1)/bs)}
	for i := range q.Packed {
		q.Packed[i] = byte(i*37 + 11)
	}
	for i := range q.Absmax {
		q.Absmax[i] = float32(i+1) * 0.37
	}
	whole := make([]float64, n)
	if err := q.Dequantize(whole); err != nil {
		t.Fatal(err)
	}
	for r0 := 0; r0 <= out; r0++ {
		for r1 := r0; r1 <= out; r1++ {
			part := make([]float64, (r1-r0)*in)
			if err := q.DequantizeRows(r0, r1, part); err != nil {
				t.Fatal(err)
			}
			sameBits(t, "rows", part, whole[r0*in:r1*in])
		}
	}
}
