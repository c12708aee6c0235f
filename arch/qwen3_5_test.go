package arch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestQwen35Config pins the qwen3_5 reading of config.json: text_config
// nesting and its prefix, the wrapper's tie_word_embeddings winning,
// Qwen3_5TextConfig's defaults (full_attention_interval 4,
// partial_rotary_factor 0.25, head_dim 256), legacy layer-type names, and
// the MoE family without intermediate_size.
func TestQwen35Config(t *testing.T) {
	text := map[string]any{"vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 8,
		"num_attention_heads": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4}
	parse := func(t *testing.T, c map[string]any) (*Spec, error) {
		t.Helper()
		js, _ := json.Marshal(c)
		cfg, err := ParseConfig(js, "config.json")
		if err != nil {
			return nil, err
		}
		return For(cfg)
	}
	s, err := parse(t, map[string]any{"model_type": "qwen3_5", "tie_word_embeddings": true,
		"text_config": merge(text, map[string]any{"tie_word_embeddings": false, "eos_token_id": 7})})
	if err != nil {
		t.Fatal(err)
	}
	var lin []bool
	for i := 0; i < s.Layers; i++ {
		lin = append(lin, s.LinearLayer(i))
	}
	switch {
	case s.Prefix != "model.language_model." || s.EmbedTensor() != "model.language_model.embed_tokens.weight":
		t.Errorf("prefix %q", s.Prefix)
	case !s.TiedHead:
		t.Errorf("the wrapper's tie_word_embeddings true did not win")
	case s.HeadDim != 256 || s.RotaryDim != 64 || s.KVHeads != 4:
		t.Errorf("head_dim %d, rotary %d, kv heads %d; want 256, 64, 4", s.HeadDim, s.RotaryDim, s.KVHeads)
	case !slices.Equal(lin, []bool{true, true, true, false, true, true, true, false}):
		t.Errorf("linear layers %v, want full attention every 4th", lin)
	case s.Config.EOSTokenID != 7:
		t.Errorf("eos %d from text_config, want 7", s.Config.EOSTokenID)
	case s.Layer(3).Q != "model.language_model.layers.3.self_attn.q_proj" || s.Layer(0).InQKV != "model.language_model.layers.0.linear_attn.in_proj_qkv" || s.Layer(0).Q != "":
		t.Errorf("layer names %+v / %+v", s.Layer(3), s.Layer(0))
	}
	if ls := s.LayerLinears(3); ls[0].Out != 2*8*256 {
		t.Errorf("q_proj rows %d, want 2·heads·head_dim (query and gate)", ls[0].Out)
	}
	// Text-only, legacy layer names, partial rotary in rope_parameters.
	s, err = parse(t, merge(text, map[string]any{"model_type": "qwen3_5_text", "num_hidden_layers": 2, "head_dim": 8,
		"layer_types": []string{"mamba", "attention"}, "rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5}}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Prefix != "" || s.EmbedTensor() != EmbedName || !s.LinearLayer(0) || s.LinearLayer(1) || s.RotaryDim != 4 || len(s.RopeInvFreq()) != 2 || s.Config.RopeTheta != 1e6 {
		t.Errorf("text-only: prefix %q, layers %v %v, rotary %d, theta %v", s.Prefix, s.LinearLayer(0), s.LinearLayer(1), s.RotaryDim, s.Config.RopeTheta)
	}
	// A layer type Qwen3_5DecoderLayer has no mixer for is refused.
	if _, err := parse(t, merge(text, map[string]any{"model_type": "qwen3_5_text", "num_hidden_layers": 2,
		"layer_types": []string{"sliding_attention", "full_attention"}})); err == nil || !strings.Contains(err.Error(), "layer_types") {
		t.Errorf("sliding_attention layer: %v", err)
	}
	// qwen3_5_moe: no intermediate_size, every layer sparse with a shared expert.
	moe := merge(text, map[string]any{"model_type": "qwen3_5_moe_text", "num_experts": 4, "num_experts_per_tok": 2})
	delete(moe, "intermediate_size")
	s, err = parse(t, moe)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.MoE; m == nil || m.Intermediate != 512 || m.SharedIntermediate != 512 || !m.NormTopK || !s.Sparse(0) || !s.Sparse(7) || s.KVHeads != 2 {
		t.Errorf("moe %+v, kv heads %d", s.MoE, s.KVHeads)
	}
	if l := s.Layer(0); l.SharedExpertGate != "model.layers.0.mlp.shared_expert_gate" || l.SharedGate != "model.layers.0.mlp.shared_expert.gate_proj" {
		t.Errorf("shared expert names %+v", l)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
