package quant

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDenseAndPresets(t *testing.T) {
	s, err := ParseJSON(nil, "", "")
	if err != nil || s.Method != MethodDense {
		t.Fatalf("nil config: %v %v", s, err)
	}
	// preset-name groups, legacy compression_config key handled by checkpoint;
	// here the preset expands and the format comes from the top level.
	s = mustScheme(t, `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"W4A16":["Linear"]},"ignore":["lm_head","re:.*mlp\\.gate$"]}`)
	g := s.groupFor("model.layers.0.self_attn.q_proj")
	if g == nil || g.Weights.NumBits != 4 || g.Weights.GroupSize != 128 || g.Format != FormatPackQuantized || !g.Weights.Symmetric {
		t.Fatalf("W4A16 preset: %+v", g)
	}
	if s.groupFor("lm_head") != nil || s.groupFor("model.layers.3.mlp.gate") != nil {
		t.Error("ignore (exact and re:) must win over targets")
	}
	if s.groupFor("model.layers.3.mlp.gate_proj") == nil {
		t.Error("re: with $ must not ignore gate_proj")
	}
}

func TestParseMixedPrecision(t *testing.T) {
	s := mustScheme(t, `{"quant_method":"compressed-tensors","format":"mixed-precision",
"config_groups":{
 "group_0":{"targets":["re:.*mlp.*"],"format":"nvfp4-pack-quantized","weights":{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}},
 "group_1":{"targets":["Linear"],"format":"pack-quantized","weights":{"num_bits":8,"type":"int","group_size":-1,"strategy":null,"actorder":"static"}},
 "group_2":{"targets":["model.layers.0.self_attn.o_proj"],"format":"float-quantized","weights":{"num_bits":8,"type":"float","strategy":"tensor"}}}}`)
	for _, c := range []struct{ mod, format string }{
		{"model.layers.0.mlp.down_proj", FormatNVFP4},
		{"model.layers.0.self_attn.q_proj", FormatPackQuantized},
		{"model.layers.0.self_attn.o_proj", FormatFloatQuantized}, // exact name beats class
	} {
		if g := s.groupFor(c.mod); g == nil || g.Format != c.format {
			t.Errorf("%s: group %+v, want format %s", c.mod, g, c.format)
		}
	}
	g := s.groupFor("model.layers.1.self_attn.q_proj")
	if g.Weights.Strategy != "channel" || g.Weights.ActOrder != "weight" {
		t.Errorf("strategy inference / actorder alias: %+v", g.Weights)
	}
}

func TestParseLegacyAndGPTQAWQ(t *testing.T) {
	s := mustScheme(t, `{"quant_method":"gptq","bits":4,"group_size":128,"desc_act":true,"sym":false,"checkpoint_format":"gptq_v2"}`)
	if s.GPTQ == nil || !s.GPTQ.V2 || !s.GPTQ.DescAct || s.GPTQ.Sym {
		t.Errorf("gptq: %+v", s.GPTQ)
	}
	s = mustScheme(t, `{"quant_method":"awq","w_bit":4,"q_group_size":64,"zero_point":true,"version":"GEMM"}`)
	if s.AWQ == nil || s.AWQ.GroupSize != 64 {
		t.Errorf("awq: %+v", s.AWQ)
	}
	// CT config nested in compression_config
	s = mustScheme(t, `{"quant_method":"compressed-tensors","compression_config":{"format":"float-quantized","config_groups":{"FP8":["Linear"]}}}`)
	if g := s.groupFor("x.q_proj"); g == nil || g.Format != FormatFloatQuantized || g.Input == nil {
		t.Errorf("nested compression_config: %+v", g)
	}
}

func TestParseErrors(t *testing.T) {
	w4 := `{"num_bits":4,"type":"int","strategy":"group","group_size":128}`
	cases := []struct{ js, want string }{
		{`[1]`, "not a JSON object"},
		{`{"bits":4}`, "quant_method missing"},
		{`{"quant_method":"hqq"}`, `unsupported quant_method "hqq"`},
		{`{"quant_method":"bitsandbytes"}`, `bitsandbytes: neither load_in_4bit nor load_in_8bit is true`},
		{`{"quant_method":"compressed-tensors","transform_config":{"config_groups":{"u":{}}}}`, "non-empty transform_config"},
		{`{"quant_method":"compressed-tensors","sparsity_config":{"format":"sparse-24-bitmask"}}`, "sparse formats are not supported"},
		{`{"quant_method":"compressed-tensors","format":"sparse-bitmask"}`, `sparse format "sparse-bitmask"`},
		{`{"quant_method":"compressed-tensors","format":"what"}`, `unknown format "what"`},
		{`{"quant_method":"compressed-tensors","kv_cache_scheme":{"num_bits":8}}`, "kv_cache_scheme"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"diagonal"}}}}`, `unknown strategy "diagonal"`},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"format":"mixed-precision","weights":` + w4 + `}}}`, "may not be \"mixed-precision\""},
		{`{"quant_method":"compressed-tensors","format":"mixed-precision","config_groups":{"g":{"targets":["Linear"],"weights":` + w4 + `}}}`, "group has no format"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":12,"type":"int"}}}}`, "int num_bits 12"},
		{`{"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","symmetric":false}}}}`, "asymmetric float"},
		{`{"quant_method":"compressed-tensors","format":"int-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":8,"type":"int","strategy":"channel"},"input_activations":{"num_bits":8,"type":"int","strategy":"group","group_size":128,"dynamic":false}}}}`, "static group activation"},
		{`{"quant_method":"compressed-tensors","format":"mxfp4-pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":4,"type":"float","strategy":"group","group_size":32},"input_activations":{"num_bits":4,"type":"float","strategy":"group","group_size":32,"dynamic":false,"scale_dtype":"torch.uint8"}}}}`, "MX activation"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"W9A9":["Linear"]}}`, `unknown preset scheme "W9A9"`},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","ignore":["re:("]}`, "regex"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"output_activations":{"num_bits":8}}}}`, "output_activations"},
		{`{"quant_method":"gptq","bits":3}`, "gptq bits 3"},
		{`{"quant_method":"gptq","checkpoint_format":"marlin"}`, `checkpoint_format "marlin"`},
		{`{"quant_method":"awq","version":"gemv"}`, `awq version "gemv"`},
		{`{"quant_method":"awq","bits":"four"}`, "want an integer"},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.js), "", "dir/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dir/config.json") {
			t.Errorf("%s:\n got %v\nwant error containing %q and the file name", c.js, err, c.want)
		}
	}
}

// Malformed checkpoints: each fails at Open with a message naming the
// module or tensor.
func TestOpenErrors(t *testing.T) {
	packed := func() *memSrc {
		return newMem().
			add("m.weight_packed", "I32", []int{2, 2}, i32s(0x88888888, 0x88888888, 0x88888888, 0x88888888)).
			add("m.weight_scale", "BF16", []int{2, 2}, floats("BF16", 1, 1, 1, 1)).
			add("m.weight_shape", "I64", []int{2}, i64s(2, 16))
	}
	g8 := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, true), ""))
	g8a := mustScheme(t, `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":4,"type":"int","strategy":"group","group_size":8,"actorder":"group"}}}}`)
	g5 := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 5, true), ""))
	nv := mustScheme(t, ctJSON(FormatNVFP4, `{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}`, ""))
	fp8 := mustScheme(t, ctJSON(FormatFloatQuantized, `{"num_bits":8,"type":"float","strategy":"tensor"}`, `{"num_bits":8,"type":"float","strategy":"tensor","dynamic":false}`))
	mx := mustScheme(t, ctJSON(FormatMXFP4, `{"num_bits":4,"type":"float","strategy":"group","group_size":32}`, ""))
	i8 := mustScheme(t, ctJSON(FormatIntQuantized, intArgs(4, "channel", -1, true), ""))
	nan := math.NaN()
	cases := []struct {
		name string
		s    *Scheme
		src  *memSrc
		want string
	}{
		{"wrong packed width", g8, packed().add("m.weight_shape", "I64", []int{2}, i64s(2, 24)), "packed width 2 does not fit 24 4-bit values"},
		{"weight_shape rows", g8, packed().add("m.weight_shape", "I64", []int{2}, i64s(3, 16)), "does not fit weight_packed rows"},
		{"missing weight_shape", g8, func() *memSrc { m := packed(); delete(m.info, "m.weight_shape"); return m }(), "mem.safetensors: module m: missing tensor m.weight_shape"},
		{"missing scale", g8, func() *memSrc { m := packed(); delete(m.info, "m.weight_scale"); return m }(), "mem.safetensors: module m: missing tensor m.weight_scale"},
		{"scale shape", g8, packed().add("m.weight_scale", "BF16", []int{2, 3}, floats("BF16", 1, 1, 1, 1, 1, 1)), "shape [2 3], want [2 2]"},
		{"NaN scale", g8, packed().add("m.weight_scale", "BF16", []int{2, 2}, floats("BF16", 1, nan, 1, 1)), "element 1 is NaN: scales must be finite and > 0"},
		{"zero scale", g8, packed().add("m.weight_scale", "BF16", []int{2, 2}, floats("BF16", 1, 1, 0, 1)), "element 2 is 0"},
		{"Inf scale", g8, packed().add("m.weight_scale", "F32", []int{2, 2}, floats("F32", 1, 1, 1, math.Inf(1))), "is +Inf"},
		{"scale dtype", g8, packed().add("m.weight_scale", "I32", []int{2, 2}, i32s(1, 1, 1, 1)), "dtype I32, want BF16 or F16 or F32"},
		{"group not dividing", g5, packed().add("m.weight_scale", "BF16", []int{2, 4}, floats("BF16", 1, 1, 1, 1, 1, 1, 1, 1)), "group_size 5 does not divide in_features 16"},
		{"g_idx out of range", g8a, packed().add("m.weight_g_idx", "I32", []int{16}, i32s(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2)), "g_idx[15] = 2 out of range [0, 2)"},
		{"g_idx unbalanced", g8a, packed().add("m.weight_g_idx", "I32", []int{16}, i32s(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1)), "group 0 has 9 members, want 8"},
		{"g_idx length", g8a, packed().add("m.weight_g_idx", "I32", []int{15}, i32s(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1)), "shape [15], want [16]"},
		{"no group", mustScheme(t, `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["re:other.*"],"weights":{"num_bits":4,"group_size":8}}}}`), packed(), "no config_groups entry targets it"},
		{"no weights", g8, newMem().add("m.bias", "F32", []int{2}, floats("F32", 1, 1)), "no weight tensors found"},
		{"asym missing zp", mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, false), "")), packed(), "mem.safetensors: module m: missing tensor m.weight_zero_point"},
		{"zp width", mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, false), "")), packed().add("m.weight_zero_point", "I32", []int{2, 2}, i32s(0, 0, 0, 0)), "packed width 2 does not fit 2 4-bit values"},
		{"nvfp4 in%16", nv, newMem().add("m.weight_packed", "U8", []int{1, 4}, make([]byte, 4)).add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7E}).add("m.weight_global_scale", "F32", []int{1}, floats("F32", 1)), "in_features 8 is not a multiple of 16"},
		{"nvfp4 zero global", nv, newMem().add("m.weight_packed", "U8", []int{1, 8}, make([]byte, 8)).add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7E}).add("m.weight_global_scale", "F32", []int{1}, floats("F32", 0)), "weight_global_scale: element 0 is 0"},
		{"nvfp4 NaN scale", nv, newMem().add("m.weight_packed", "U8", []int{1, 8}, make([]byte, 8)).add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7F}).add("m.weight_global_scale", "F32", []int{1}, floats("F32", 1)), "element 0 is NaN (0x7F)"},
		{"nvfp4 zero scale", nv, newMem().add("m.weight_packed", "U8", []int{1, 8}, make([]byte, 8)).add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x00}).add("m.weight_global_scale", "F32", []int{1}, floats("F32", 1)), "element 0 is 0 (0x00)"},
		{"fp8 NaN weight", fp8, newMem().add("m.weight", "F8_E4M3", []int{1, 2}, []byte{0x00, 0xFF}).add("m.weight_scale", "F32", []int{1}, floats("F32", 1)).add("m.input_scale", "F32", []int{1}, floats("F32", 1)), "element [0,1] is NaN"},
		{"fp8 missing input_scale", fp8, newMem().add("m.weight", "F8_E4M3", []int{1, 2}, []byte{0x00, 0x01}).add("m.weight_scale", "F32", []int{1}, floats("F32", 1)), "mem.safetensors: module m: missing tensor m.input_scale"},
		{"mxfp4 NaN scale", mx, newMem().add("m.weight_packed", "U8", []int{1, 16}, make([]byte, 16)).add("m.weight_scale", "U8", []int{1, 1}, []byte{0xFF}), "E8M0 NaN"},
		{"int4 unpacked range", i8, newMem().add("m.weight", "I8", []int{1, 2}, []byte{0x07, 0x08}).add("m.weight_scale", "BF16", []int{1, 1}, floats("BF16", 1)), "code 8 at [0,1] outside the 4-bit range [-8, 7]"},
		{"gptq on CT", g8, newMem().add("m.qweight", "I32", []int{1, 8}, make([]byte, 32)), "has qweight"},
		{"gptq group", mustScheme(t, `{"quant_method":"gptq","bits":4,"group_size":24}`), newMem().add("m.qweight", "I32", []int{4, 8}, make([]byte, 128)), "group_size 24 does not divide in_features 32"},
		{"gptq qzeros shape", mustScheme(t, `{"quant_method":"gptq","bits":4,"group_size":16}`), newMem().add("m.qweight", "I32", []int{4, 8}, make([]byte, 128)).add("m.qzeros", "I32", []int{1, 1}, make([]byte, 4)), "shape [1 1], want [2 1]"},
		{"awq group", mustScheme(t, `{"quant_method":"awq","bits":4,"group_size":128}`), newMem().add("m.qweight", "I32", []int{64, 1}, make([]byte, 256)), "group_size 128 does not divide in_features 64"},
	}
	for _, c := range cases {
		_, err := c.s.Open(c.src, "m")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, err, c.want)
		}
	}
}

// FuzzParse: ParseJSON never panics and either errors or gives a scheme
// whose groups all have weights consistent with their format.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(ctJSON(FormatPackQuantized, intArgs(4, "group", 128, true), "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseJSON(data, "bfloat16", "fuzz/config.json")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz/config.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, g := range s.Groups {
			_ = s.groupFor("model.layers.0.self_attn.q_proj")
			if g.Format == FormatMixed || g.Format == "" {
				t.Fatalf("group %s has format %q", g.Name, g.Format)
			}
		}
	})
}
