package quant

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// TestModelOptWorkedExample is docs/formats/modelopt.md's example: one row
// of 16 NVFP4 codes with an E4M3 block scale and weight_scale_2, and an FP8
// weight whose scale is first cast to the model dtype.
func TestModelOptWorkedExample(t *testing.T) {
	cfg := &checkpoint.Config{TorchDtype: "bfloat16", QuantizationFiles: map[string]json.RawMessage{
		"hf_quant_config.json": json.RawMessage(`{"producer": {"name": "modelopt", "version": "0.29.0"},
			"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": ["lm_head"]}}`)}}
	s, err := Parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// codes 1.5 (0x3), -6 (0xF) in the first byte, the rest 0
	packed := make([]byte, 8)
	packed[0] = 0xF3
	src := newMem().add("m.weight", "U8", []int{1, 8}, packed).
		add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x3C}).                                       // E4M3 1.5
		add("m.weight_scale_2", "F32", []int{}, floats("F32", float64(math.Float32frombits(0x3DCCCCCD)))). // f32 0.1
		add("m.input_scale", "F32", []int{}, floats("F32", 0.5))
	l, w := decode(t, s, src, "m")
	// eff = f32(1.5 · t), t = 13421773·2^-27: 20132659.5·2^-27 → 20132660·2^-27 (RNE)
	eff := math.Ldexp(20132660, -27)
	want := make([]float64, 16)
	want[0] = RoundBF16(RoundF32(1.5 * eff)) // 30198990·2^-27 exactly, then bf16
	want[1] = RoundBF16(-6 * eff)
	sameBits(t, "W", w, want)
	if want[0] != 0.224609375 || want[1] != -0.8984375 { // 1.796875·2^-3, -1.796875·2^-1
		t.Fatalf("hand values changed: %v %v", want[0], want[1])
	}
	aq := l.InputQuantizer().(*ActQuant)
	if aq.Kind != ActFP4 || aq.GlobalScale != 2 || l.Format() != "modelopt-nvfp4+a-nvfp4" {
		t.Errorf("%s: input quantizer %+v", l.Format(), aq)
	}

	fp8 := mustScheme(t, `{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]}`)
	src = newMem().add("m.weight", "F8_E4M3", []int{1, 2}, []byte{0x3C, 0xB8}). // 1.5, -1
											add("m.weight_scale", "F32", []int{}, floats("F32", float64(math.Float32frombits(0x3DCCCCCD)))).
											add("m.input_scale", "F32", []int{}, floats("F32", 0.25))
	_, w = decode(t, fp8, src, "m")
	// scale to bf16 first: 0x3DCD = 0.10009765625; 1.5 · that = 0.150146484375 → bf16 0.150390625
	sameBits(t, "W(fp8)", w, []float64{0.150390625, -0.10009765625})
}

func TestModelOptErrors(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{`{"quant_method":"modelopt","quant_algo":"NVFP4","kv_cache_quant_algo":"NVFP4"}`, `x/config.json: quantization_config: kv_cache_quant_algo "NVFP4": this KV cache format is not evaluated by qppl (FP8 only); nothing was computed`},
		{`{"quant_method":"modelopt","quant_algo":"W4A16_AWQ"}`, `quant_algo "W4A16_AWQ" is not evaluated by qppl yet`},
		{`{"quant_method":"modelopt","quant_algo":"NVFP4","group_size":32}`, "group_size 32: want 16"},
		{`{"quant_method":"modelopt"}`, "quant_algo missing"},
	} {
		_, err := ParseJSON([]byte(c.config), "bfloat16", "x/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.config, err, c.want)
		}
	}
	// ModelOpt tensors under a dense config.json: named for what they are
	src := newMem().add("m.weight", "U8", []int{1, 8}, make([]byte, 8)).
		add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x38}).add("m.weight_scale_2", "F32", []int{}, floats("F32", 1))
	if _, err := mustScheme(t, "null").Open(src, "m"); err == nil || !strings.Contains(err.Error(), "has weight_scale_2 (modelopt) but quant_method is dense") {
		t.Errorf("dense: %v", err)
	}
	// hf_quant_config.json from another producer is not claimed
	cfg := &checkpoint.Config{QuantizationFiles: map[string]json.RawMessage{"hf_quant_config.json": json.RawMessage(`{"producer": {"name": "other"}, "quantization": {"quant_algo": "FP8"}}`)}}
	if _, err := Parse(cfg); err == nil || !strings.Contains(err.Error(), "hf_quant_config.json: no quant_method") {
		t.Errorf("other producer: %v", err)
	}
}

// TestModelOptPublishedConfigs: blocks as NVIDIA's exported checkpoints ship
// them parse, with their FP8 KV cache (kvcache_test.go has more).
func TestModelOptPublishedConfigs(t *testing.T) {
	for _, c := range []struct{ source, body, want string }{
		// huggingface.co/nvidia/Llama-3.1-8B-Instruct-FP8 hf_quant_config.json
		{"nvidia FP8", `{"producer": {"name": "modelopt", "version": "0.15.0"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}`, ""},
		// huggingface.co/nvidia/Llama-3.3-70B-Instruct-FP4 hf_quant_config.json
		{"nvidia NVFP4", `{"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}}`, ""},
		// the same without a quantized KV cache
		{"NVFP4, no KV", `{"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": ["lm_head"]}}`, ""},
	} {
		cfg := &checkpoint.Config{QuantizationFiles: map[string]json.RawMessage{"hf_quant_config.json": json.RawMessage(c.body)}}
		s, err := Parse(cfg)
		switch {
		case c.want == "" && (err != nil || s.Method != MethodModelOpt):
			t.Errorf("%s: %+v, %v", c.source, s, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.source, err, c.want)
		}
	}
}
