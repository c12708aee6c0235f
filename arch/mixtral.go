package arch

import "github.com/qppl/qppl/checkpoint"

// mixtral declares MixtralForCausalLM: mistral's attention with a mixture
// of experts on every layer.
//
// transformers: models/mixtral/configuration_mixtral.py (MixtralConfig:
// num_key_value_heads 8 (None → num_attention_heads), head_dim None →
// hidden_size // num_attention_heads, max_position_embeddings 4096*32,
// rms_norm_eps 1e-5, rope_theta 1e6, tie_word_embeddings False,
// sliding_window None, num_experts_per_tok 2, num_local_experts 8) and
// models/mixtral/modular_mixtral.py:
//
//   - MixtralDecoderLayer: every layer's MLP is block_sparse_moe;
//   - MixtralSparseMoeBlock.forward: router_logits = gate(x) (no bias);
//     weights = softmax(router_logits) in float32; torch.topk(weights, k);
//     weights /= their sum (always); output Σ weight_e · expert_e(x);
//   - MixtralBlockSparseTop2MLP: w2(silu(w1(x)) · w3(x)), of width
//     intermediate_size;
//   - MixtralAttention = MistralAttention (no bias, no q/k norm).
//
// Ties in torch.topk are broken as for qwen3_moe (see qwen3_moe.go). The
// tensors are the released checkpoints' layout:
// block_sparse_moe.gate and block_sparse_moe.experts.{e}.w{1,2,3}.
func mixtral() Family {
	return Family{
		Name: "mixtral", Class: "MixtralForCausalLM",
		Defaults: Defaults{KVHeads: 8, MaxPos: 4096 * 32, Eps: 1e-5, Theta: 1e6},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.AttentionBias = false // MistralAttention has no bias
			c.SlidingWindow = r.Int("sliding_window", 0)
			m := &checkpoint.MoE{
				Experts:      r.Positive("num_local_experts", 8),
				TopK:         r.Positive("num_experts_per_tok", 2),
				Intermediate: c.IntermediateSize,
				NormTopK:     true,
				Sparse:       make([]bool, c.NumHiddenLayers),
			}
			for i := range m.Sparse {
				m.Sparse[i] = true
			}
			if r.Err() == nil && m.TopK > m.Experts {
				r.Fail("num_experts_per_tok", "%d exceeds num_local_experts %d", m.TopK, m.Experts)
				return
			}
			c.MoE = m
		},
		Layout:   func(*checkpoint.Config) Layout { return Layout{} },
		MoENames: MoENames{Block: "block_sparse_moe", Router: "gate", Gate: "w1", Up: "w3", Down: "w2"},
		Fixture: Fixture{
			// 8 experts, top 2: Mixtral-8x7B's routing and keys.
			Config: func(FixtureShape) map[string]any {
				return map[string]any{
					"rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": nil,
					"num_local_experts": 8, "num_experts_per_tok": 2,
					"router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0, "output_router_logits": false,
				}
			},
		},
	}
}
