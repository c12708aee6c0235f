package quant

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// TestKVCacheWorkedExample is the worked example of docs/formats/kv-cache.md:
// a BF16 k_scale 0x3C80 (2^-6) and three cache entries.
func TestKVCacheWorkedExample(t *testing.T) {
	src := newMem().add("a.k_scale", "BF16", []int{1}, []byte{0x80, 0x3C}).add("a.v_scale", "BF16", []int{1}, []byte{0x80, 0x3C})
	kv := &KVCache{File: "config.json", Key: "quantization_config.kv_cache_scheme"}
	sc, err := kv.OpenScales(src, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if sc.K[0] != 0.015625 || sc.KName != "a.k_scale" {
		t.Fatalf("scale %v from %s", sc.K, sc.KName)
	}
	x := []float64{0.0263671875, 9.0, -0.0001}
	FakeQuantKV(x, sc.K, 1, 1, 3)
	// y = x/s: 1.6875 (a tie between 1.625 and 1.75: even mantissa 110),
	// 576 (saturates to 448), -0.0064 (subnormal: -3·2^-9)
	for i, c := range []struct {
		code byte
		val  float64
	}{{0x3E, 0.02734375}, {0x7E, 7.0}, {0x83, -0.005859375 * 0.015625}} {
		if x[i] != c.val {
			t.Errorf("entry %d: %v, want %v", i, x[i], c.val)
		}
		if b := EncodeE4M3(x[i] / 0.015625); b != c.code {
			t.Errorf("entry %d: E4M3 byte %#02x, want %#02x", i, b, c.code)
		}
	}
}

// TestKVCacheSchemes: what parses (and how each names its file and key)
// and what is refused with one line naming the key.
func TestKVCacheSchemes(t *testing.T) {
	ct := func(kv string) string {
		return `{"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"FP8":["Linear"]},"kv_cache_scheme":` + kv + `}`
	}
	for _, c := range []struct {
		name, js string
		perHead  bool
		desc     string
	}{
		{"ct tensor", ct(`{"num_bits":8,"type":"float","strategy":"tensor","dynamic":false,"symmetric":true}`), false, "fp8-e4m3 per-tensor static (dir/config.json quantization_config.kv_cache_scheme)"},
		{"ct attn_head", ct(`{"num_bits":8,"type":"float","strategy":"attn_head","dynamic":false,"symmetric":true}`), true, "fp8-e4m3 per-head static (dir/config.json quantization_config.kv_cache_scheme)"},
		{"autofp8", `{"quant_method":"fp8","activation_scheme":"static","kv_cache_scheme":"static"}`, false, "fp8-e4m3 per-tensor static (dir/config.json quantization_config.kv_cache_scheme)"},
		{"modelopt", `{"quant_method":"modelopt","quant_algo":"FP8","kv_cache_quant_algo":"FP8"}`, false, "fp8-e4m3 per-tensor static (dir/config.json quantization_config.kv_cache_quant_algo)"},
	} {
		s, err := ParseJSON([]byte(c.js), "bfloat16", "dir/config.json")
		if err != nil || s.KV == nil || s.KV.PerHead != c.perHead || s.KV.Describe() != c.desc {
			t.Errorf("%s: %+v %v", c.name, s, err)
			continue
		}
		if on, err := s.KVQuantEnabled(""); !on || err != nil {
			t.Errorf("%s: not on by default: %v", c.name, err)
		}
		if on, err := s.KVQuantEnabled("off"); on || err != nil {
			t.Errorf("%s: off: %v %v", c.name, on, err)
		}
	}
	for _, c := range []struct{ js, want string }{
		{ct(`{"num_bits":8,"type":"int","strategy":"tensor"}`), "dir/config.json: quantization_config: kv_cache_scheme: a int 8-bit KV cache is not evaluated by qppl"},
		{ct(`{"num_bits":8,"type":"float","strategy":"token","dynamic":true}`), "kv_cache_scheme: a dynamic KV cache is not evaluated by qppl"},
		{ct(`{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}`), "kv_cache_scheme: a float 4-bit KV cache is not evaluated"},
		{ct(`{"num_bits":8,"type":"float","strategy":"channel"}`), "kv_cache_scheme: a strategy channel KV cache is not evaluated"},
		{`{"quant_method":"modelopt","quant_algo":"FP8","kv_cache_quant_algo":"INT8"}`, `kv_cache_quant_algo "INT8": this KV cache format is not evaluated by qppl (FP8 only); nothing was computed`},
	} {
		if _, err := ParseJSON([]byte(c.js), "", "dir/config.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.js, err, c.want)
		}
	}
	// hf_quant_config.json names its own file and nested key
	cfg := &checkpoint.Config{QuantizationFiles: map[string]json.RawMessage{"hf_quant_config.json": json.RawMessage(
		`{"producer":{"name":"modelopt"},"quantization":{"quant_algo":"NVFP4","group_size":16,"kv_cache_quant_algo":"FP8"}}`)}}
	s, err := Parse(cfg)
	if err != nil || s.KV == nil || s.KV.Describe() != "fp8-e4m3 per-tensor static (hf_quant_config.json quantization.kv_cache_quant_algo)" {
		t.Errorf("hf_quant_config.json: %+v %v", s, err)
	}
	dense := mustScheme(t, "null")
	if _, err := dense.KVQuantEnabled("on"); err == nil || !strings.Contains(err.Error(), "declares no quantized KV cache") {
		t.Errorf("on without a scheme: %v", err)
	}
}

// TestKVCacheScaleNames: every naming writers use is found (vLLM's
// remapping), a lone kv_scale serves both, and mistakes are named.
func TestKVCacheScaleNames(t *testing.T) {
	one := floats("F32", 0.5)
	kv := &KVCache{File: "config.json", Key: "k"}
	for _, names := range [][2]string{{"a.k_scale", "a.v_scale"}, {"a.k_proj.k_scale", "a.v_proj.v_scale"}, {"a.k_proj.output_scale", "a.v_proj.output_scale"}, {"a.kv_scale", "a.kv_scale"}} {
		src := newMem().add(names[0], "F32", []int{}, one)
		if names[1] != names[0] {
			src.add(names[1], "F32", []int{1}, floats("F32", 2))
		}
		sc, err := kv.OpenScales(src, "a", 2)
		if err != nil || sc.KName != names[0] || sc.VName != names[1] || sc.K[0] != 0.5 {
			t.Errorf("%v: %+v %v", names, sc, err)
		}
	}
	perHead := &KVCache{PerHead: true, File: "config.json", Key: "k"}
	src := newMem().add("a.k_scale", "BF16", []int{2, 1, 1}, floats("BF16", 0.5, 0.25)).add("a.v_scale", "BF16", []int{2, 1, 1}, floats("BF16", 1, 2))
	if sc, err := perHead.OpenScales(src, "a", 2); err != nil || sc.K[1] != 0.25 || sc.V[1] != 2 {
		t.Errorf("per head: %+v %v", sc, err)
	}
	for _, c := range []struct {
		kv   *KVCache
		src  *memSrc
		want string
	}{
		{kv, newMem(), "declares a quantized KV cache (k) but the checkpoint has no cache scales for a"},
		{kv, newMem().add("a.k_scale", "F32", []int{}, one), "has only one of a.k_scale and a.v_scale"},
		{kv, newMem().add("a.k_scale", "F32", []int{}, one).add("a.v_scale", "F32", []int{}, one).add("a.kv_scale", "F32", []int{}, one), "two namings"},
		{kv, newMem().add("a.k_scale", "F32", []int{2}, floats("F32", 1, 1)).add("a.v_scale", "F32", []int{}, one), "want one value (per-tensor scheme)"},
		{perHead, newMem().add("a.k_scale", "F32", []int{}, one).add("a.v_scale", "F32", []int{}, one), "want 2 values (one per key/value head"},
		{kv, newMem().add("a.k_scale", "F32", []int{}, floats("F32", 0)).add("a.v_scale", "F32", []int{}, one), "scales must be finite and > 0"},
		{kv, newMem().add("a.k_scale", "F8_E4M3", []int{}, []byte{0x38}).add("a.v_scale", "F32", []int{}, one), "dtype F8_E4M3, want F32, BF16 or F16"},
	} {
		if _, err := c.kv.OpenScales(c.src, "a", 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	// NaN passes through; saturation is symmetric
	x := []float64{math.NaN(), -1e9, 1e9}
	FakeQuantKV(x, []float64{1}, 1, 1, 3)
	if !math.IsNaN(x[0]) || x[1] != -448 || x[2] != 448 {
		t.Errorf("NaN/saturation: %v", x)
	}
}

// TestKVCachePublishedConfigs: KV cache blocks as published checkpoints
// ship them. No model repository can be downloaded here: the blocks are
// written from the writers' code (llm-compressor's
// examples/quantization_kv_cache, AutoFP8's save path, ModelOpt's
// hf_quant_config.json export) and the model cards named; check them
// against the live repositories.
func TestKVCachePublishedConfigs(t *testing.T) {
	kvTensor := `"kv_cache_scheme": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": null, "num_bits": 8, "observer": "minmax", "observer_kwargs": {}, "strategy": "tensor", "symmetric": true, "type": "float"}`
	for _, c := range []struct{ source, file, body, desc string }{
		// huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-KV config.json (llm-compressor FP8 + kv_cache_scheme)
		{"RedHatAI Llama-3.1-8B-Instruct-FP8-KV", "config.json", `{"config_groups": {"group_0": {"input_activations": {"dynamic": false, "num_bits": 8, "observer": "minmax", "strategy": "tensor", "symmetric": true, "type": "float"}, "output_activations": null, "targets": ["Linear"], "weights": {"dynamic": false, "num_bits": 8, "observer": "minmax", "strategy": "tensor", "symmetric": true, "type": "float"}}}, "format": "float-quantized", "global_compression_ratio": 1.24, "ignore": ["lm_head"], ` + kvTensor + `, "quant_method": "compressed-tensors", "quantization_status": "frozen"}`,
			"fp8-e4m3 per-tensor static (config.json quantization_config.kv_cache_scheme)"},
		// huggingface.co/RedHatAI/Qwen3-8B-FP8-dynamic with an FP8 KV cache (llm-compressor examples/quantization_kv_cache/llama3_fp8_kv_example.py recipe)
		{"llm-compressor kv example", "config.json", `{"config_groups": {"group_0": {"input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"}, "targets": ["Linear"], "weights": {"dynamic": false, "num_bits": 8, "strategy": "channel", "symmetric": true, "type": "float"}}}, "format": "float-quantized", "ignore": ["lm_head"], ` + kvTensor + `, "quant_method": "compressed-tensors", "quantization_status": "compressed", "version": "0.10.2"}`,
			"fp8-e4m3 per-tensor static (config.json quantization_config.kv_cache_scheme)"},
		// huggingface.co/neuralmagic/Meta-Llama-3-8B-Instruct-FP8-KV config.json (AutoFP8)
		{"neuralmagic Llama-3-8B-Instruct-FP8-KV", "config.json", `{"activation_scheme": "static", "ignored_layers": ["lm_head"], "kv_cache_scheme": "static", "quant_method": "fp8"}`,
			"fp8-e4m3 per-tensor static (config.json quantization_config.kv_cache_scheme)"},
		// huggingface.co/nvidia/Llama-3.3-70B-Instruct-FP4 hf_quant_config.json (NVFP4 weights, FP8 KV cache)
		{"nvidia Llama-3.3-70B-Instruct-FP4", "hf_quant_config.json", `{"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}}`,
			"fp8-e4m3 per-tensor static (hf_quant_config.json quantization.kv_cache_quant_algo)"},
		// huggingface.co/nvidia/DeepSeek-R1-FP4 hf_quant_config.json
		{"nvidia DeepSeek-R1-FP4", "hf_quant_config.json", `{"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}}`,
			"fp8-e4m3 per-tensor static (hf_quant_config.json quantization.kv_cache_quant_algo)"},
		// huggingface.co/nvidia/Llama-3.1-8B-Instruct-FP8 hf_quant_config.json
		{"nvidia Llama-3.1-8B-Instruct-FP8", "hf_quant_config.json", `{"producer": {"name": "modelopt", "version": "0.15.0"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}`,
			"fp8-e4m3 per-tensor static (hf_quant_config.json quantization.kv_cache_quant_algo)"},
	} {
		cfg := &checkpoint.Config{TorchDtype: "bfloat16"}
		if c.file == "config.json" {
			cfg.QuantizationConfig = json.RawMessage(c.body)
		} else {
			cfg.QuantizationFiles = map[string]json.RawMessage{c.file: json.RawMessage(c.body)}
		}
		s, err := Parse(cfg)
		if err != nil || s.KV == nil || s.KV.Describe() != c.desc {
			t.Errorf("%s: %+v %v", c.source, s, err)
		}
	}
}
