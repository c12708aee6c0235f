package arch

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

func gemma4Spec(t *testing.T, extra map[string]any) (*Spec, error) {
	t.Helper()
	c := map[string]any{"model_type": "gemma4_text", "vocab_size": 40, "hidden_size": 32, "intermediate_size": 24,
		"num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}
	for k, v := range extra {
		c[k] = v
	}
	js, _ := json.Marshal(c)
	cfg, err := ParseConfig(js, "config.json")
	if err != nil {
		return nil, err
	}
	return For(cfg)
}

// TestGemma4Config pins Gemma4TextConfig's defaults and __post_init__ as
// arch reads them, the per-layer shapes and names, and the refusals.
func TestGemma4Config(t *testing.T) {
	s, err := gemma4Spec(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Gemma4
	// Sliding unless (i+1) % 6 == 0, and the last layer forced full.
	if want := []bool{false, false, false, false, false, true, true}; !slices.Equal(g.Full, want) {
		t.Errorf("full layers %v, want %v", g.Full, want)
	}
	if s.Window(0) != 512 || s.Window(5) != 0 || s.AttnScale != 1 || s.NormOffset || !s.EmbedScale || !s.GeluTanh || !s.TiedHead || s.FinalSoftcap != 0 {
		t.Errorf("window %d/%d, scale %v, offset %v, embed scale %v, gelu %v, tied %v, cap %v", s.Window(0), s.Window(5), s.AttnScale, s.NormOffset, s.EmbedScale, s.GeluTanh, s.TiedHead, s.FinalSoftcap)
	}
	if g.GlobalHeadDim != 512 || s.LayerHeadDim(6) != 512 || s.LayerHeadDim(0) != 8 || g.PLE != 256 || g.PLEVocab != 262144 || g.Shared != 7 || g.KEqV {
		t.Errorf("%+v", g)
	}
	// Proportional RoPE on the full layers: 0.25·512/2 = 64 frequencies
	// θ^(-2j/512), then 192 zeros.
	inv := s.LayerInvFreq(6)
	if len(inv) != 256 || inv[0] != 1 || inv[63] == 0 || inv[64] != 0 || inv[255] != 0 {
		t.Errorf("full-layer inv_freq: len %d, [0] %v, [63] %v, [64] %v", len(inv), inv[0], inv[63], inv[64])
	}
	if got, want := inv[1], RopeInvFreq(512, 1e6, nil)[1]; got != want {
		t.Errorf("full-layer inv_freq[1] = %v, want %v (denominator global_head_dim)", got, want)
	}
	if got, want := s.LayerInvFreq(0), RopeInvFreq(8, 1e4, nil); !slices.Equal(got, want) {
		t.Errorf("sliding inv_freq %v, want %v", got, want)
	}

	// KV sharing, k = v and double-wide: the fixture's 4 layers.
	fc := gemma4FixtureConfig(FixtureShape{Layers: 4, Vocab: 40})
	fc["num_hidden_layers"] = 4
	s, err = gemma4Spec(t, fc)
	if err != nil {
		t.Fatal(err)
	}
	g = s.Gemma4
	for i, want := range []int{0, 1, 0, 1} {
		if g.KVSource(i) != want {
			t.Errorf("KVSource(%d) = %d, want %d", i, g.KVSource(i), want)
		}
	}
	l1, l3 := s.Layer(1), s.Layer(3)
	if l1.V != "" || l1.K == "" || l3.K != "" || l3.KNorm != "" || l1.LayerScalar != "model.layers.1.layer_scalar" || l1.PLEGate != "model.layers.1.per_layer_input_gate" {
		t.Errorf("layer names %+v / %+v", l1, l3)
	}
	if s.LayerKVHeads(1) != 1 || s.LayerKVHeads(0) != 2 || s.LayerIntermediate(2) != 48 || s.LayerIntermediate(1) != 24 {
		t.Errorf("kv heads %d/%d, widths %d/%d", s.LayerKVHeads(1), s.LayerKVHeads(0), s.LayerIntermediate(2), s.LayerIntermediate(1))
	}
	var mods []string
	for _, l := range s.LayerLinears(3) {
		mods = append(mods, l.Proj.String())
	}
	if want := []string{"q_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "per_layer_input_gate", "per_layer_projection"}; !slices.Equal(mods, want) {
		t.Errorf("shared layer linears %v, want %v", mods, want)
	}

	// enable_moe_block: every layer keeps its dense MLP and adds the router
	// and experts (Gemma4TextDecoderLayer.__init__).
	ms, err := gemma4Spec(t, map[string]any{"enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 8})
	if err != nil {
		t.Fatal(err)
	}
	mods = nil
	for _, l := range ms.LayerLinears(3) {
		if l.Expert <= 0 {
			mods = append(mods, l.Module)
		}
	}
	if want := []string{"model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj", "model.layers.3.self_attn.v_proj", "model.layers.3.self_attn.o_proj", "model.layers.3.mlp.gate_proj", "model.layers.3.mlp.up_proj", "model.layers.3.mlp.down_proj",
		"model.layers.3.router.proj", "model.layers.3.experts.0.gate_proj", "model.layers.3.experts.0.up_proj", "model.layers.3.experts.0.down_proj",
		"model.layers.3.per_layer_input_gate", "model.layers.3.per_layer_projection"}; !slices.Equal(mods, want) {
		t.Errorf("MoE layer linears %v, want %v", mods, want)
	}
	if gu, dn := ms.FusedExperts(0); gu != "model.layers.0.experts.gate_up_proj" || dn != "model.layers.0.experts.down_proj" {
		t.Errorf("fused experts %s, %s", gu, dn)
	}
	if l := ms.Layer(1); l.RouterScale != "model.layers.1.router.scale" || l.PerExpertScale != "model.layers.1.router.per_expert_scale" ||
		l.PreMoENorm != "model.layers.1.pre_feedforward_layernorm_2.weight" || l.PostMLPNorm1 != "model.layers.1.post_feedforward_layernorm_1.weight" ||
		l.PostMoENorm != "model.layers.1.post_feedforward_layernorm_2.weight" || !ms.Sparse(0) || !ms.Sparse(3) || !ms.MoE.NormTopK {
		t.Errorf("MoE layer %+v", l)
	}

	for _, c := range []struct {
		extra map[string]any
		key   string
	}{
		{map[string]any{"enable_moe_block": true}, "num_experts"}, // Gemma4TextConfig's default None
		{map[string]any{"enable_moe_block": true, "num_experts": 4, "top_k_experts": 5, "moe_intermediate_size": 8}, "top_k_experts"},
		{map[string]any{"enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": nil}, "moe_intermediate_size"},
		{map[string]any{"hidden_activation": "silu"}, "hidden_activation"},
		{map[string]any{"use_bidirectional_attention": "all"}, "use_bidirectional_attention"},
		{map[string]any{"attention_k_eq_v": true}, "num_global_key_value_heads"},
		{map[string]any{"vocab_size_per_layer_input": 20}, "vocab_size_per_layer_input"},
		{map[string]any{"head_dim": nil}, "head_dim"},
		{map[string]any{"global_head_dim": nil, "head_dim": 16}, "global_head_dim"}, // RoPE over hidden/heads = 8 ≠ 16
		{map[string]any{"num_kv_shared_layers": 2}, "num_kv_shared_layers"},         // shared layer 5 is full: no full layer before 5
		{map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e4}}, "rope_parameters"},
		{map[string]any{"rope_parameters": map[string]any{"sliding_attention": map[string]any{"rope_type": "default"}, "full_attention": map[string]any{"rope_type": "yarn"}}}, "rope_parameters"},
	} {
		_, err := gemma4Spec(t, c.extra)
		if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%v: %v, want a config error naming %s", c.extra, err, c.key)
		}
	}
}
