package arch

import "github.com/qppl/qppl/checkpoint"

// phi3 declares Phi3ForCausalLM: mistral's decoder with fused projections —
// one qkv_proj for q, k and v, one gate_up_proj for the MLP's gate and up.
//
// transformers: models/phi3/configuration_phi3.py (Phi3Config:
// num_key_value_heads None → num_attention_heads, max_position_embeddings
// 4096, rms_norm_eps 1e-5, rope_theta 10000, tie_word_embeddings False,
// sliding_window None, partial_rotary_factor 1.0; rope type default or
// longrope, which qppl refuses) and models/phi3/modular_phi3.py:
//
//   - Phi3Attention: qkv = qkv_proj(x) (no bias) of width
//     (heads + 2·kv_heads)·head_dim; q = qkv[:heads·head_dim], k the next
//     kv_heads·head_dim columns, v the rest; head_dim = getattr(config,
//     "head_dim", hidden // heads); RoPE over the first
//     head_dim·partial_rotary_factor dimensions (qppl: factor 1 only);
//   - Phi3MLP: gate, up = gate_up_proj(x).chunk(2) (gate first);
//     down_proj(up · silu(gate));
//   - Phi3DecoderLayer: as Mistral's (dropouts are inference no-ops).
func phi3() Family {
	return Family{
		Name: "phi3", Class: "Phi3ForCausalLM",
		Defaults: Defaults{MaxPos: 4096, Eps: 1e-5, Theta: 10000},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.AttentionBias = false // Phi3Attention: bias=False
			c.SlidingWindow = r.Int("sliding_window", 0)
			f := r.Float("partial_rotary_factor", 1)
			if rp := r.Sub("rope_parameters"); rp != nil {
				f = rp.Float("partial_rotary_factor", f)
			}
			if r.Err() == nil && f != 1 {
				r.Fail("partial_rotary_factor", "%v: only full rotary embeddings (1.0) are supported", f)
			}
		},
		Layout: func(*checkpoint.Config) Layout { return Layout{FusedQKV: true, FusedGateUp: true} },
		Fixture: Fixture{
			// Phi-3-mini's keys (its 2047-token window left out: qppl
			// evaluates windowed attention only up to the window).
			Config: func(s FixtureShape) map[string]any {
				return map[string]any{
					"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": nil,
					"original_max_position_embeddings": s.MaxPos, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
					"rope_scaling": nil, "pad_token_id": nil,
				}
			},
		},
	}
}
