package arch

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// The tests of this file moved here from checkpoint/config_test.go with the
// model defaults and quirks (see family.go): same cases, same assertions,
// now through arch.ParseConfig.

const baseCfg = `"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4`

func TestParseConfigDefaults(t *testing.T) {
	cases := []struct {
		json string
		want checkpoint.Config // only the compared fields
		eos  []int
	}{
		{`{"model_type":"llama",` + baseCfg + `}`,
			checkpoint.Config{ModelType: "llama", NumKeyValueHeads: 4, HeadDim: 16, MaxPositionEmbeddings: 2048, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", BOSTokenID: -1, EOSTokenID: -1}, nil},
		{`{"model_type":"mistral",` + baseCfg + `, "num_key_value_heads": null, "head_dim": null}`,
			checkpoint.Config{ModelType: "mistral", NumKeyValueHeads: 4, HeadDim: 16, MaxPositionEmbeddings: 131072, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", BOSTokenID: -1, EOSTokenID: -1, SlidingWindow: 4096}, nil},
		{`{"model_type":"qwen2",` + baseCfg + `, "num_key_value_heads": 2, "bos_token_id": 7, "eos_token_id": [3, 9], "sliding_window": 100}`,
			checkpoint.Config{ModelType: "qwen2", NumKeyValueHeads: 2, HeadDim: 16, MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", AttentionBias: true, BOSTokenID: 7, EOSTokenID: 3}, []int{3, 9}},
		{`{"model_type":"qwen3",` + baseCfg + `, "num_key_value_heads": 2, "tie_word_embeddings": true, "attention_bias": true, "rms_norm_eps": 1e-5, "rope_theta": 1000000, "max_position_embeddings": 40960, "eos_token_id": 5, "torch_dtype": "bfloat16", "use_sliding_window": true, "max_window_layers": 0}`,
			checkpoint.Config{ModelType: "qwen3", NumKeyValueHeads: 2, HeadDim: 128, MaxPositionEmbeddings: 40960, RMSNormEps: 1e-5, RopeTheta: 1e6, HiddenAct: "silu", AttentionBias: true, TieWordEmbeddings: true, BOSTokenID: -1, EOSTokenID: 5, TorchDtype: "bfloat16", SlidingWindow: 4096}, []int{5}},
		// use_sliding_window, but max_window_layers (default 28) ≥ the 2 layers: no layer slides.
		{`{"model_type":"qwen2",` + baseCfg + `, "num_key_value_heads": 2, "use_sliding_window": true, "sliding_window": 64}`,
			checkpoint.Config{ModelType: "qwen2", NumKeyValueHeads: 2, HeadDim: 16, MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", AttentionBias: true, BOSTokenID: -1, EOSTokenID: -1}, nil},
		{`{"model_type":"qwen2",` + baseCfg + `, "num_key_value_heads": 2, "use_sliding_window": true, "sliding_window": 64, "max_window_layers": 1}`,
			checkpoint.Config{ModelType: "qwen2", NumKeyValueHeads: 2, HeadDim: 16, MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", AttentionBias: true, BOSTokenID: -1, EOSTokenID: -1, SlidingWindow: 64}, nil},
		{`{"model_type":"mistral",` + baseCfg + `, "num_key_value_heads": 1, "head_dim": 32, "sliding_window": null, "attention_bias": true, "dtype": "float32"}`,
			checkpoint.Config{ModelType: "mistral", NumKeyValueHeads: 1, HeadDim: 32, MaxPositionEmbeddings: 131072, RMSNormEps: 1e-6, RopeTheta: 10000, HiddenAct: "silu", BOSTokenID: -1, EOSTokenID: -1, TorchDtype: "float32"}, nil},
	}
	for _, c := range cases {
		got, err := ParseConfig([]byte(c.json), "config.json")
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		w := c.want
		if got.ModelType != w.ModelType || got.VocabSize != 512 || got.HiddenSize != 64 || got.IntermediateSize != 128 ||
			got.NumHiddenLayers != 2 || got.NumAttentionHeads != 4 || got.NumKeyValueHeads != w.NumKeyValueHeads ||
			got.HeadDim != w.HeadDim || got.MaxPositionEmbeddings != w.MaxPositionEmbeddings || got.RMSNormEps != w.RMSNormEps ||
			got.RopeTheta != w.RopeTheta || got.HiddenAct != w.HiddenAct || got.AttentionBias != w.AttentionBias ||
			got.TieWordEmbeddings != w.TieWordEmbeddings || got.BOSTokenID != w.BOSTokenID || got.EOSTokenID != w.EOSTokenID ||
			got.TorchDtype != w.TorchDtype || got.SlidingWindow != w.SlidingWindow || got.RopeScaling != nil || got.QuantizationConfig != nil {
			t.Errorf("%s:\n got %+v\nwant %+v", c.json, *got, w)
		}
		if !slices.Equal(got.EOSTokenIDs, c.eos) {
			t.Errorf("%s: eos ids %v want %v", c.json, got.EOSTokenIDs, c.eos)
		}
	}
}

func TestParseConfigRopeAndQuant(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  checkpoint.RopeScaling
		theta float64
	}{
		{`"rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "rope_theta": 500000.0`,
			checkpoint.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}, 500000},
		{`"rope_scaling": {"type": "linear", "factor": 2}`, checkpoint.RopeScaling{Type: "linear", Factor: 2}, 10000},
		{`"rope_scaling": {"type": "llama3", "rope_type": "linear", "factor": 4}`, checkpoint.RopeScaling{Type: "linear", Factor: 4}, 10000},
		{`"rope_parameters": {"rope_type": "linear", "factor": 3, "rope_theta": 20000}`, checkpoint.RopeScaling{Type: "linear", Factor: 3}, 20000},
	} {
		cfg, err := ParseConfig([]byte(`{"model_type":"llama",`+baseCfg+`,`+c.extra+`}`), "config.json")
		if err != nil {
			t.Errorf("%s: %v", c.extra, err)
			continue
		}
		if cfg.RopeScaling == nil || *cfg.RopeScaling != c.want || cfg.RopeTheta != c.theta {
			t.Errorf("%s: got %+v theta %v", c.extra, cfg.RopeScaling, cfg.RopeTheta)
		}
	}
	for _, extra := range []string{`"rope_scaling": null`, `"rope_scaling": {"rope_type": "default"}`, `"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}`} {
		cfg, err := ParseConfig([]byte(`{"model_type":"llama",`+baseCfg+`,`+extra+`}`), "config.json")
		if err != nil || cfg.RopeScaling != nil {
			t.Errorf("%s: %v %+v", extra, err, cfg)
		}
	}
	for _, key := range []string{"quantization_config", "compression_config"} {
		cfg, err := ParseConfig([]byte(`{"model_type":"qwen3",`+baseCfg+`,"num_key_value_heads":1,"`+key+`": {"quant_method": "x"}}`), "config.json")
		if err != nil || string(cfg.QuantizationConfig) != `{"quant_method": "x"}` || cfg.QuantizationKey != key {
			t.Errorf("%s: %v %+v", key, err, cfg)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct{ json, want string }{
		{`not json`, "not a JSON object"},
		{`null`, "not a JSON object"},
		{`[1]`, "not a JSON object"},
		{`{"hidden_size": 64}`, "missing model_type (supported: llama, mistral, qwen2, qwen3"},
		{`{"model_type": "gpt2"}`, `unsupported model_type "gpt2" (supported: llama, mistral, qwen2, qwen3`},
		{`{"model_type": 3}`, "model_type: want a string"},
		{`{"model_type":"llama", "vocab_size": 512, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}`, "hidden_size: missing required key"},
		{`{"model_type":"llama", "vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}`, "intermediate_size: missing required key"},
		{`{"model_type":"llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}`, "vocab_size: missing required key"},
		{`{"model_type":"llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4}`, "num_hidden_layers: missing required key"},
		{`{"model_type":"llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}`, "num_attention_heads: missing required key"},
		{`{"model_type":"llama",` + strings.Replace(baseCfg, `"hidden_size": 64`, `"hidden_size": -64`, 1) + `}`, "hidden_size: must be positive, got -64"},
		{`{"model_type":"llama",` + strings.Replace(baseCfg, `"hidden_size": 64`, `"hidden_size": 64.5`, 1) + `}`, "hidden_size: want an integer, got 64.5"},
		{`{"model_type":"llama",` + strings.Replace(baseCfg, `"hidden_size": 64`, `"hidden_size": "64"`, 1) + `}`, `hidden_size: want an integer, got "64"`},
		{`{"model_type":"llama",` + strings.Replace(baseCfg, `"hidden_size": 64`, `"hidden_size": 66`, 1) + `}`, "hidden_size 66 is not divisible by num_attention_heads 4"},
		{`{"model_type":"llama",` + baseCfg + `, "num_key_value_heads": 3}`, "num_attention_heads 4 is not divisible by num_key_value_heads 3"},
		{`{"model_type":"mistral",` + baseCfg + `}`, "num_attention_heads 4 is not divisible by num_key_value_heads 8"},
		{`{"model_type":"llama",` + baseCfg + `, "num_key_value_heads": 0}`, "num_key_value_heads: must be positive, got 0"},
		{`{"model_type":"llama",` + baseCfg + `, "head_dim": 15}`, "head_dim 15 must be even"},
		{`{"model_type":"llama",` + baseCfg + `, "head_dim": -2}`, "head_dim must be positive"},
		{`{"model_type":"llama",` + strings.Replace(baseCfg, `"vocab_size": 512`, `"vocab_size": 1e12`, 1) + `}`, "vocab_size = 1000000000000 exceeds the limit"},
		{`{"model_type":"llama",` + baseCfg + `, "rms_norm_eps": 0}`, "rms_norm_eps must be positive"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_theta": -1}`, "rope_theta must be positive"},
		{`{"model_type":"llama",` + baseCfg + `, "tie_word_embeddings": "yes"}`, "tie_word_embeddings: want true or false"},
		{`{"model_type":"llama",` + baseCfg + `, "eos_token_id": [1, "x"]}`, "eos_token_id: want an integer"},
		{`{"model_type":"llama",` + baseCfg + `, "bos_token_id": -3}`, "bos_token_id: must not be negative"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "longrope", "factor": 4}}`, `unsupported rope_scaling type "longrope" (supported: default, linear, llama3, yarn)`},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "yarn", "factor": 4, "mscale": 1}}`, `yarn with mscale/mscale_all_dim is not supported`},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "yarn"}}`, `factor: missing required key`},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "dynamic", "factor": 4}}`, `unsupported rope_scaling type "dynamic"`},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": 5}`, "rope_scaling must be an object"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "linear"}}`, "rope_scaling.factor: missing required key"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"type": "linear", "factor": 0}}`, "rope_scaling.factor must be positive"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}`, "rope_scaling.original_max_position_embeddings: missing required key"},
		{`{"model_type":"llama",` + baseCfg + `, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4, "original_max_position_embeddings": 8192}}`, "must exceed low_freq_factor"},
		{`{"model_type":"llama",` + baseCfg + `, "quantization_config": [1]}`, "quantization_config must be a JSON object"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.json), "dir/config.json")
		if err == nil {
			t.Errorf("%s: accepted", c.json)
			continue
		}
		if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), "dir/config.json") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n error %q\n want ErrConfig naming dir/config.json with %q", c.json, err, c.want)
		}
	}
}

// TestOpenDirUnsupported moved here from checkpoint's TestOpenDirErrors:
// an unsupported model_type fails when the directory is opened.
func TestOpenDirUnsupported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpoint.ConfigFile), []byte(`{"model_type":"bert"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteFile(filepath.Join(dir, checkpoint.SafetensorsFile), []checkpoint.WriteTensor{{Name: "a", DType: checkpoint.F32, Shape: []int{1}, Data: make([]byte, 4)}}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := OpenDir(dir)
	if err == nil {
		m.Close()
		t.Fatal("accepted")
	}
	if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), `unsupported model_type "bert"`) {
		t.Errorf("error %v", err)
	}
}

// TestFamilyQuirks pins the defaults and quirks of the families added after
// the first four (transformers' config classes, see each family's file).
func TestFamilyQuirks(t *testing.T) {
	const sizes = `"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 8`
	parse := func(js string) (*checkpoint.Config, *Spec, error) {
		c, err := ParseConfig([]byte(js), "config.json")
		if err != nil {
			return nil, nil, err
		}
		s, err := For(c)
		return c, s, err
	}
	// qwen3_moe: Qwen3MoeConfig defaults; every layer sparse by default.
	c, s, err := parse(`{"model_type":"qwen3_moe",` + sizes + `}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumKeyValueHeads != 4 || c.HeadDim != 8 || c.RMSNormEps != 1e-6 || c.RopeTheta != 10000 || c.MaxPositionEmbeddings != 32768 ||
		c.MoE.Experts != 128 || c.MoE.TopK != 8 || c.MoE.Intermediate != 768 || c.MoE.NormTopK || !slices.Equal(c.MoE.Sparse, []bool{true, true, true, true}) || !s.QKNorm {
		t.Errorf("qwen3_moe defaults: %+v %+v", c, c.MoE)
	}
	if s.Layer(0).Router != "model.layers.0.mlp.gate" || s.Layer(0).Gate != "" {
		t.Errorf("qwen3_moe layer 0 names %+v", s.Layer(0))
	}
	if g, u, d := s.Expert(2, 5); g != "model.layers.2.mlp.experts.5.gate_proj" || u != "model.layers.2.mlp.experts.5.up_proj" || d != "model.layers.2.mlp.experts.5.down_proj" {
		t.Errorf("qwen3_moe expert names %s %s %s", g, u, d)
	}
	if n := len(s.LayerLinears(0)); n != 4+1+3*128 {
		t.Errorf("qwen3_moe layer 0: %d linears", n)
	}
	// decoder_sparse_step 2 and mlp_only_layers: layers 1 and 3 would be
	// sparse, 3 is listed dense.
	c, s, err = parse(`{"model_type":"qwen3_moe",` + sizes + `,"decoder_sparse_step":2,"mlp_only_layers":[3],"num_experts":4,"num_experts_per_tok":2}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.MoE.Sparse, []bool{false, true, false, false}) || s.Layer(0).Gate != "model.layers.0.mlp.gate_proj" || len(s.LayerLinears(1)) != 4+1+3*4 {
		t.Errorf("sparse pattern %v, layer 0 %+v", c.MoE.Sparse, s.Layer(0))
	}
	// num_experts 0: every layer dense.
	if c, _, err = parse(`{"model_type":"qwen3_moe",` + sizes + `,"num_experts":0}`); err != nil || c.MoE != nil {
		t.Errorf("num_experts 0: %v %+v", err, c)
	}
	// mixtral: MixtralConfig defaults, every layer sparse of intermediate_size, renormalised.
	c, s, err = parse(`{"model_type":"mixtral",` + sizes + `}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumKeyValueHeads != 8 || c.RMSNormEps != 1e-5 || c.RopeTheta != 1e6 || c.MaxPositionEmbeddings != 131072 || c.SlidingWindow != 0 ||
		c.MoE.Experts != 8 || c.MoE.TopK != 2 || c.MoE.Intermediate != 128 || !c.MoE.NormTopK || s.QKVBias {
		t.Errorf("mixtral defaults: %+v %+v", c, c.MoE)
	}
	if g, u, d := s.Expert(0, 7); s.Layer(0).Router != "model.layers.0.block_sparse_moe.gate" || g != "model.layers.0.block_sparse_moe.experts.7.w1" ||
		u != "model.layers.0.block_sparse_moe.experts.7.w3" || d != "model.layers.0.block_sparse_moe.experts.7.w2" {
		t.Errorf("mixtral names %s %s %s %s", s.Layer(0).Router, g, u, d)
	}
	// phi3: fused names and shapes.
	c, s, err = parse(`{"model_type":"phi3",` + sizes + `}`)
	if err != nil {
		t.Fatal(err)
	}
	l := s.Layer(1)
	lin := s.LayerLinears(1)
	if c.NumKeyValueHeads != 8 || c.RMSNormEps != 1e-5 || c.MaxPositionEmbeddings != 4096 || l.QKV != "model.layers.1.self_attn.qkv_proj" || l.Q != "" ||
		l.GateUp != "model.layers.1.mlp.gate_up_proj" || l.Gate != "" || len(lin) != 4 || lin[0].Out != 64+2*64 || lin[2].Out != 256 || lin[0].Proj != ProjQKV || lin[2].Proj != ProjGateUp {
		t.Errorf("phi3: %+v %+v", l, lin)
	}
	for _, bad := range []struct{ js, want string }{
		{`{"model_type":"qwen3_moe",` + sizes + `,"num_experts":4,"num_experts_per_tok":5}`, "num_experts_per_tok: 5 exceeds num_experts 4"},
		{`{"model_type":"qwen3_moe",` + sizes + `,"decoder_sparse_step":0}`, "decoder_sparse_step: must be positive"},
		{`{"model_type":"qwen3_moe",` + sizes + `,"mlp_only_layers":[1.5]}`, "mlp_only_layers: want an integer"},
		{`{"model_type":"mixtral",` + sizes + `,"num_local_experts":2,"num_experts_per_tok":3}`, "num_experts_per_tok: 3 exceeds num_local_experts 2"},
		{`{"model_type":"phi3",` + sizes + `,"partial_rotary_factor":0.75}`, "partial_rotary_factor: 0.75: only full rotary embeddings"},
		{`{"model_type":"phi3",` + sizes + `,"rope_scaling":{"type":"longrope","short_factor":[1],"long_factor":[1]}}`, `unsupported rope_scaling type "longrope"`},
	} {
		_, err := ParseConfig([]byte(bad.js), "config.json")
		if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.js, err, bad.want)
		}
	}
}

// TestWindowsAndGemma2 pins the per-layer windows of qwen2/qwen3
// (use_sliding_window, max_window_layers, layer_types) and Gemma2Config's
// defaults: alternating windows starting with a sliding layer 0, the
// scalar 256, caps 50 and 30 (null: none), the tanh gelu and gemma's
// tensor names.
func TestWindowsAndGemma2(t *testing.T) {
	const sizes = `"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4`
	windows := func(js string) []int {
		t.Helper()
		c, err := ParseConfig([]byte(js), "config.json")
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		s, err := For(c)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		out := make([]int, s.Layers)
		for i := range out {
			out[i] = s.Window(i)
		}
		return out
	}
	for _, c := range []struct {
		js   string
		want []int
	}{
		{`{"model_type":"qwen2",` + sizes + `,"use_sliding_window":true,"sliding_window":16,"max_window_layers":2}`, []int{0, 0, 16, 16}},
		{`{"model_type":"qwen2",` + sizes + `,"use_sliding_window":false,"sliding_window":16,"max_window_layers":0}`, []int{0, 0, 0, 0}},
		{`{"model_type":"qwen3",` + sizes + `,"use_sliding_window":true,"sliding_window":16,"max_window_layers":0,
			"layer_types":["full_attention","sliding_attention","full_attention","sliding_attention"]}`, []int{0, 16, 0, 16}},
		{`{"model_type":"qwen2",` + sizes + `,"use_sliding_window":true}`, []int{0, 0, 0, 0}}, // max_window_layers 28
		{`{"model_type":"mistral",` + sizes + `}`, []int{4096, 4096, 4096, 4096}},
		{`{"model_type":"mistral",` + sizes + `,"sliding_window":null}`, []int{0, 0, 0, 0}},
		{`{"model_type":"gemma2",` + sizes + `}`, []int{4096, 0, 4096, 0}},
		{`{"model_type":"gemma2",` + sizes + `,"sliding_window":null}`, []int{0, 0, 0, 0}},
		{`{"model_type":"gemma2",` + sizes + `,"sliding_window":8,"layer_types":["full_attention","full_attention","sliding_attention","full_attention"]}`, []int{0, 0, 8, 0}},
	} {
		if got := windows(c.js); !slices.Equal(got, c.want) {
			t.Errorf("%s: windows %v, want %v", c.js, got, c.want)
		}
	}
	if _, err := ParseConfig([]byte(`{"model_type":"qwen2",`+sizes+`,"use_sliding_window":true,"layer_types":["full_attention"]}`), "config.json"); err == nil || !strings.Contains(err.Error(), "layer_types: 1 entries for 4 layers") {
		t.Errorf("short layer_types: %v", err)
	}
	c, err := ParseConfig([]byte(`{"model_type":"gemma2",`+sizes+`}`), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := For(c)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumKeyValueHeads != 4 || c.HeadDim != 256 || !c.TieWordEmbeddings || c.MaxPositionEmbeddings != 8192 || s.AttnScale != 1.0/16 ||
		s.AttnSoftcap != 50 || s.FinalSoftcap != 30 || !s.GeluTanh || !s.NormOffset || !s.EmbedScale || !s.SandwichNorms || s.QKVBias {
		t.Errorf("gemma2 defaults: %+v %+v", c, s)
	}
	l := s.Layer(1)
	if l.MLPNorm != "model.layers.1.pre_feedforward_layernorm.weight" || l.PostAttnNorm != "model.layers.1.post_attention_layernorm.weight" ||
		l.PostMLPNorm != "model.layers.1.post_feedforward_layernorm.weight" {
		t.Errorf("gemma2 norms %+v", l)
	}
	c, _ = ParseConfig([]byte(`{"model_type":"gemma2",`+sizes+`,"attn_logit_softcapping":null,"final_logit_softcapping":null,"query_pre_attn_scalar":144}`), "config.json")
	if s, err = For(c); err != nil || s.AttnSoftcap != 0 || s.FinalSoftcap != 0 || s.AttnScale != 1/math.Sqrt(144) {
		t.Errorf("gemma2 without caps: %+v %v", s, err)
	}
}
