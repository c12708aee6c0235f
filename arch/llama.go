package arch

import "github.com/qppl/qppl/checkpoint"

// llama declares LlamaForCausalLM.
//
// transformers: models/llama/configuration_llama.py (LlamaConfig.__init__
// defaults: num_key_value_heads None → num_attention_heads, head_dim None →
// hidden_size // num_attention_heads, max_position_embeddings 2048,
// rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings False,
// attention_bias False, mlp_bias False) and models/llama/modeling_llama.py
// (LlamaAttention: bias=config.attention_bias on q, k, v and o_proj;
// LlamaMLP: bias=config.mlp_bias, which qppl refuses).
func llama() Family {
	return Family{
		Name: "llama", Class: "LlamaForCausalLM",
		Defaults: Defaults{MaxPos: 2048, Eps: 1e-6, Theta: 10000},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.MLPBias = r.Bool("mlp_bias", false)
		},
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias}
		},
		Fixture: Fixture{
			Tied: true,
			// Llama 3.1's RoPE scaling shape (factor 8, low 1, high 4) with
			// original_max_position_embeddings 256, so that the 8
			// frequencies of head_dim 16 fall in all three regimes (kept,
			// smoothed, divided by the factor).
			Config: func(FixtureShape) map[string]any {
				return map[string]any{
					"rms_norm_eps": 1e-5, "rope_theta": 500000.0,
					"rope_scaling": map[string]any{
						"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
						"high_freq_factor": 4.0, "original_max_position_embeddings": 256,
					},
					"attention_bias": false, "mlp_bias": false, "pretraining_tp": 1,
				}
			},
		},
	}
}
