package quant

import (
	"math"
	"strings"
	"testing"
)

// fp8Example is the worked byte example of docs/formats/fp8.md: a 2×4
// weight with weight_block_size [2, 2], so weight_scale_inv is [1, 2].
func fp8Example(scaleDT string) *memSrc {
	codes := []byte{
		0x38, 0xB8, 0x3C, 0x7E, // 1.0, -1.0, 1.5, 448
		0x40, 0x01, 0x00, 0xC0, // 2.0, 2^-9, 0, -2.0
	}
	inv := []byte{0x00, 0x00, 0x00, 0x3F, 0xCD, 0xCC, 0xCC, 0x3D} // F32 0.5, F32 0.1 (0x3DCCCCCD)
	if scaleDT == "BF16" {
		inv = []byte{0x00, 0x3F, 0xCD, 0x3D} // BF16 0.5, BF16 0x3DCD = 0.10009765625
	}
	return newMem().add("model.layers.0.mlp.up_proj.weight", "F8_E4M3", []int{2, 4}, codes).
		add("model.layers.0.mlp.up_proj.weight_scale_inv", scaleDT, []int{1, 2}, inv)
}

const fp8BlockConfig = `{"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8","weight_block_size":[2,2]}`

// TestFP8MethodWorkedExample: the bytes of docs/formats/fp8.md decode to
// f32(e4m3(q) · weight_scale_inv[block]), values written out by hand.
func TestFP8MethodWorkedExample(t *testing.T) {
	s := mustScheme(t, fp8BlockConfig)
	l, w := decode(t, s, fp8Example("F32"), "model.layers.0.mlp.up_proj")
	tenth := math.Ldexp(13421773, -27) // F32 0x3DCCCCCD
	want := []float64{
		0.5, -0.5,
		math.Ldexp(20132660, -27), // 1.5 · tenth = 20132659.5·2^-27, a tie: even significand
		math.Ldexp(11744051, -18), // 448 · tenth = 6012954304·2^-27, to 24 bits
		1, math.Ldexp(1, -10), 0,
		-2 * tenth, // exact
	}
	sameBits(t, "W", w, want)
	if exact := 1.5 * tenth; exact == want[2] {
		t.Fatalf("the example does not exercise the f32 rounding (%v)", exact)
	}
	if f := l.Format(); f != "fp8-block2x2+a-fp8-g2" {
		t.Errorf("format %q", f)
	}
	aq, ok := l.InputQuantizer().(*ActQuant)
	if !ok || aq.Kind != ActFP8 || aq.Strategy != "group" || aq.GroupSize != 2 || !aq.Dynamic || !aq.Symmetric {
		t.Errorf("input quantizer %+v, want dynamic FP8 groups of 2", l.InputQuantizer())
	}
	// BF16 scales (Qwen3.5-*-FP8) multiply in f32 too.
	_, w = decode(t, s, fp8Example("BF16"), "model.layers.0.mlp.up_proj")
	bt := math.Ldexp(205, -11) // BF16 0x3DCD = 0.10009765625
	sameBits(t, "W(bf16 scales)", w, []float64{0.5, -0.5, 1.5 * bt, 448 * bt, 1, math.Ldexp(1, -10), 0, -2 * bt})
}

// TestFP8MethodAutoFP8: the AutoFP8 layout (per-tensor F32 weight_scale of
// shape [], static F32 input_scale).
func TestFP8MethodAutoFP8(t *testing.T) {
	s := mustScheme(t, `{"activation_scheme":"static","ignored_layers":["lm_head"],"quant_method":"fp8"}`)
	src := newMem().add("m.weight", "F8_E4M3", []int{1, 2}, []byte{0x38, 0x3C}).
		add("m.weight_scale", "F32", []int{}, floats("F32", 0.25)).
		add("m.input_scale", "F32", []int{}, floats("F32", 0.125))
	l, w := decode(t, s, src, "m")
	sameBits(t, "W", w, []float64{0.25, 0.375})
	aq, ok := l.InputQuantizer().(*ActQuant)
	if !ok || aq.Dynamic || aq.Strategy != "tensor" || aq.Scale != 0.125 {
		t.Errorf("input quantizer %+v, want static per-tensor 0.125", l.InputQuantizer())
	}
	if f := l.Format(); f != "fp8-tensor+a-fp8-static" {
		t.Errorf("format %q", f)
	}
	// lm_head stays dense
	head := newMem().add("lm_head.weight", "BF16", []int{1, 2}, floats("BF16", 1, 2))
	if l, _ := decode(t, s, head, "lm_head"); l.InputQuantizer() != nil || l.Format() != "bf16" {
		t.Errorf("lm_head: %s, %v", l.Format(), l.InputQuantizer())
	}
}

// TestFP8MethodPublishedConfigs: quantization_config blocks as published
// checkpoints ship them parse, and open a fixture of matching tensors.
func TestFP8MethodPublishedConfigs(t *testing.T) {
	for _, c := range []struct{ source, config string }{
		// huggingface.co/Qwen/Qwen3-8B-FP8 config.json (also DeepSeek-V3,
		// deepseek-ai/DeepSeek-V3 config.json, key order as there)
		{"Qwen3-8B-FP8", `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}`},
		// huggingface.co/deepseek-ai/DeepSeek-V3.1 config.json
		{"DeepSeek-V3.1", `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}`},
		// huggingface.co/Qwen/Qwen3.5-27B-FP8 style (modules_to_not_convert listed)
		{"Qwen3.5-FP8", `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head", "model.visual"]}`},
	} {
		s, err := ParseJSON([]byte(c.config), "bfloat16", c.source+"/config.json")
		if err != nil {
			t.Errorf("%s: %v", c.source, err)
			continue
		}
		codes := make([]byte, 128*256)
		for i := range codes {
			codes[i] = byte(i % 0x7E)
		}
		src := newMem().add("q.weight", "F8_E4M3", []int{128, 256}, codes).
			add("q.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 0.5, 0.25))
		if l, _ := decode(t, s, src, "q"); l.Format() != "fp8-block128x128+a-fp8-g128" {
			t.Errorf("%s: format %s", c.source, l.Format())
		}
	}
	// huggingface.co/neuralmagic/Meta-Llama-3-8B-Instruct-FP8 config.json (AutoFP8)
	s, err := ParseJSON([]byte(`{"activation_scheme": "static", "ignored_layers": ["lm_head"], "quant_method": "fp8"}`), "bfloat16", "config.json")
	if err != nil || s.FP8 == nil || s.FP8.BlockSize != nil || s.FP8.ActivationScheme != "static" {
		t.Errorf("AutoFP8 config: %+v, %v", s, err)
	}
}

func TestFP8MethodErrors(t *testing.T) {
	block := mustScheme(t, fp8BlockConfig)
	for _, c := range []struct {
		name, config string
		src          *memSrc
		want         string
	}{
		{"static block", `{"quant_method":"fp8","activation_scheme":"static","weight_block_size":[128,128]}`, nil, "block FP8 only has dynamic activations"},
		{"fmt", `{"quant_method":"fp8","fmt":"e5m2"}`, nil, `fmt "e5m2" is not supported`},
		{"block size", `{"quant_method":"fp8","weight_block_size":[128]}`, nil, "weight_block_size: want [rows, cols]"},
		{"scale_fmt", `{"quant_method":"fp8","scale_fmt":"e4m3"}`, nil, `scale_fmt "e4m3"`},
		{"scheme", `{"quant_method":"fp8","activation_scheme":"smooth"}`, nil, `activation_scheme "smooth"`},
		// AutoFP8 writes "static" (evaluated, kvcache_test.go); anything else is refused
		{"kv cache", `{"quant_method":"fp8","activation_scheme":"static","ignored_layers":["lm_head"],"kv_cache_scheme":"dynamic"}`, nil, `kv_cache_scheme "dynamic": this KV cache scheme is not evaluated by qppl`},
		{"scale shape", fp8BlockConfig, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "F32", []int{2, 2}, make([]byte, 16)), "shape [2 2], want [1 2]"},
		{"scale dtype", fp8BlockConfig, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "I32", []int{1, 2}, make([]byte, 8)), "dtype I32, want F32 or BF16 or F16"},
		{"zero scale", fp8BlockConfig, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 1, 0)), "scales must be finite and > 0"},
		{"NaN code", fp8BlockConfig, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, []byte{0, 0, 0, 0x7F, 0, 0, 0, 0}).
			add("m.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 1, 1)), "is NaN (0x7F)"},
		{"input groups", `{"quant_method":"fp8","weight_block_size":[2,3]}`, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 1, 1)), "input group_size 3 does not divide in_features 4"},
		{"inv without block", `{"quant_method":"fp8","activation_scheme":"static"}`, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 1, 1)), "has weight_scale_inv but quantization_config has no weight_block_size"},
		{"inv on dense", `null`, newMem().add("m.weight", "F8_E4M3", []int{2, 4}, make([]byte, 8)).
			add("m.weight_scale_inv", "F32", []int{1, 2}, floats("F32", 1, 1)), "has weight_scale_inv (fp8) but quant_method is dense"},
	} {
		var err error
		if c.src == nil {
			_, err = ParseJSON([]byte(c.config), "bfloat16", "x/config.json")
		} else {
			s := block
			if c.config != fp8BlockConfig {
				s = mustScheme(t, c.config)
			}
			_, err = s.Open(c.src, "m")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, err, c.want)
		}
	}
}
