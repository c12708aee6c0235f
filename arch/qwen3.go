package arch

import "github.com/qppl/qppl/checkpoint"

// qwen3 declares Qwen3ForCausalLM: llama plus an RMSNorm over each head of
// q and k before RoPE, head_dim read from config.json, and Qwen's
// sliding-window rule.
//
// transformers: models/qwen3/configuration_qwen3.py (Qwen3Config:
// num_key_value_heads 32, head_dim 128, max_position_embeddings 32768,
// rms_norm_eps 1e-6, rope_theta 10000, attention_bias False,
// use_sliding_window False, sliding_window 4096, max_window_layers 28) and
// models/qwen3/modeling_qwen3.py (Qwen3Attention: q_norm and k_norm are
// Qwen3RMSNorm(head_dim) applied to q and k per head before
// apply_rotary_pos_emb; bias=config.attention_bias on q, k, v and o_proj).
func qwen3() Family {
	return Family{
		Name: "qwen3", Class: "Qwen3ForCausalLM",
		Defaults: Defaults{KVHeads: 32, HeadDim: 128, MaxPos: 32768, Eps: 1e-6, Theta: 10000},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			qwenSlidingWindow(r, c)
		},
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true}
		},
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 32, // heads·head_dim ≠ hidden
			Config: func(s FixtureShape) map[string]any {
				// The windowed layers named by layer_types instead:
				// full, sliding, full, ...
				c := qwenFixtureConfig(s)
				c["attention_bias"] = false
				types := make([]string, s.Layers)
				for i := range types {
					types[i] = "full_attention"
					if i%2 == 1 {
						types[i] = "sliding_attention"
					}
				}
				c["layer_types"] = types
				return c
			},
		},
	}
}
