package arch

import "github.com/qppl/qppl/checkpoint"

// mistral declares MistralForCausalLM: llama without biases, with its own
// defaults and a sliding attention window.
//
// transformers: models/mistral/configuration_mistral.py (MistralConfig:
// num_key_value_heads 8, max_position_embeddings 4096*32, rms_norm_eps
// 1e-6, rope_theta 10000, sliding_window 4096; a null sliding_window means
// full attention) and models/mistral/modeling_mistral.py (MistralAttention:
// q, k, v, o_proj with bias=False whatever attention_bias says).
func mistral() Family {
	return Family{
		Name: "mistral", Class: "MistralForCausalLM",
		Defaults: Defaults{KVHeads: 8, MaxPos: 4096 * 32, Eps: 1e-6, Theta: 10000},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.AttentionBias = false // MistralAttention has no bias
			c.SlidingWindow = r.Int("sliding_window", 4096)
			if r.IsNull("sliding_window") {
				c.SlidingWindow = 0
			}
		},
		Layout: func(*checkpoint.Config) Layout { return Layout{} },
		Fixture: Fixture{
			// Mistral-7B-v0.1's keys, with a window (32) shorter than the
			// contexts the tests evaluate (70, 80, 256 tokens).
			Config: func(FixtureShape) map[string]any {
				return map[string]any{"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 32}
			},
		},
	}
}
