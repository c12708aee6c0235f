package arch

import "github.com/qppl/qppl/checkpoint"

// qwen2 declares Qwen2ForCausalLM: llama with a bias on q, k and v (never
// on o) and Qwen's sliding-window rule.
//
// transformers: models/qwen2/configuration_qwen2.py (Qwen2Config:
// num_key_value_heads 32, max_position_embeddings 32768, rms_norm_eps
// 1e-6, rope_theta 10000, use_sliding_window False, sliding_window 4096,
// max_window_layers 28; layer i slides only when use_sliding_window and
// i >= max_window_layers) and models/qwen2/modeling_qwen2.py
// (Qwen2Attention: q, k, v_proj with bias=True, o_proj bias=False; head_dim
// from getattr(config, "head_dim", hidden_size // num_attention_heads)).
func qwen2() Family {
	return Family{
		Name: "qwen2", Class: "Qwen2ForCausalLM",
		Defaults: Defaults{KVHeads: 32, MaxPos: 32768, Eps: 1e-6, Theta: 10000, AttnBias: true},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.AttentionBias = true // Qwen2Attention: q/k/v always have a bias
			c.SlidingWindow = qwenSlidingWindow(r, c)
		},
		Layout: func(*checkpoint.Config) Layout { return Layout{QKVBias: true} },
		Fixture: Fixture{
			OmitStandardHeadDim: true,
			Config:              qwenFixtureConfig,
		},
	}
}

// qwenSlidingWindow is the window of Qwen2Config and Qwen3Config: layer i
// uses it only when use_sliding_window and i >= max_window_layers (default
// 28), so with max_window_layers >= num_hidden_layers no layer does.
func qwenSlidingWindow(r *checkpoint.ConfigReader, c *checkpoint.Config) int {
	if r.Bool("use_sliding_window", false) && !r.IsNull("sliding_window") &&
		r.Int("max_window_layers", 28) < c.NumHiddenLayers {
		return r.Int("sliding_window", 4096)
	}
	return 0
}

// qwenFixtureConfig is the config of Qwen2/Qwen3 releases: eps 1e-6, theta
// 1e6, the window keys present but unused.
func qwenFixtureConfig(s FixtureShape) map[string]any {
	return map[string]any{
		"rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"use_sliding_window": false, "sliding_window": s.MaxPos, "max_window_layers": s.Layers,
	}
}
