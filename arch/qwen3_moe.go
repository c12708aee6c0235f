package arch

import "github.com/qppl/qppl/checkpoint"

// qwen3MoE declares Qwen3MoeForCausalLM: qwen3's attention (per-head q/k
// RMSNorm, head_dim from config.json) with a mixture-of-experts MLP on the
// sparse layers.
//
// transformers: models/qwen3_moe/configuration_qwen3_moe.py (Qwen3MoeConfig:
// num_key_value_heads 4, max_position_embeddings 32768, rms_norm_eps 1e-6,
// rope_theta 10000, tie_word_embeddings False, attention_bias False,
// use_sliding_window False, sliding_window 4096 — kept only when
// use_sliding_window, for every layer —, decoder_sparse_step 1,
// moe_intermediate_size 768, num_experts_per_tok 8, num_experts 128,
// norm_topk_prob False, mlp_only_layers None → []) and
// models/qwen3_moe/modeling_qwen3_moe.py:
//
//   - Qwen3MoeDecoderLayer.__init__: layer i has Qwen3MoeSparseMoeBlock when
//     i ∉ mlp_only_layers and num_experts > 0 and (i+1) % decoder_sparse_step
//     == 0, else Qwen3MoeMLP(intermediate_size);
//   - Qwen3MoeSparseMoeBlock.forward: router_logits = gate(x) (mlp.gate,
//     no bias); weights = softmax(router_logits) in float32; top-k of the
//     weights (torch.topk); when norm_topk_prob, divide by their sum; the
//     output is Σ weight_e · expert_e(x) over the chosen experts, each expert
//     a Qwen3MoeMLP(moe_intermediate_size) (down(silu(gate(x)) · up(x)));
//   - Qwen3MoeAttention: as Qwen3Attention (q_norm, k_norm on head_dim).
//
// Ties in torch.topk: its CPU kernel (aten TopKImpl.h, topk_impl_loop)
// runs std::partial_sort (k·64 ≤ experts) or std::nth_element then
// std::sort on (value, index) pairs with a comparator on values only, so
// equal probabilities come out in the order libstdc++'s algorithms leave
// them (zero logits over 8 experts, top 2: experts 6 and 5). qppl's
// backends and oracle choose as that CPU kernel does
// (internal/torchtopk, checked against torch's output); it matters only
// when two of a token's routing probabilities are exactly equal at the
// k-th place. torch's CUDA topk may order such ties otherwise.
//
// Experts are stored per expert as mlp.experts.{e}.{gate,up,down}_proj
// (the layout of the released checkpoints); transformers ≥ 5 merges them on
// load into mlp.experts.gate_up_proj [E, 2·I, hidden] (gate rows first) and
// mlp.experts.down_proj [E, hidden, I] (conversion_mapping.py, "qwen2_moe"
// entry copied to qwen3_moe: MergeModulelist(dim=0), Concatenate(dim=1)),
// and a checkpoint saved in that layout is read too (Spec.FusedExperts).
func qwen3MoE() Family {
	return Family{
		Name: "qwen3_moe", Class: "Qwen3MoeForCausalLM",
		Defaults: Defaults{KVHeads: 4, MaxPos: 32768, Eps: 1e-6, Theta: 10000},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			if r.Bool("use_sliding_window", false) && !r.IsNull("sliding_window") {
				c.SlidingWindow = r.Int("sliding_window", 4096)
			}
			m := &checkpoint.MoE{
				Experts:      r.Int("num_experts", 128),
				TopK:         r.Positive("num_experts_per_tok", 8),
				Intermediate: r.Positive("moe_intermediate_size", 768),
				NormTopK:     r.Bool("norm_topk_prob", false),
			}
			step := r.Positive("decoder_sparse_step", 1)
			only := r.Ints("mlp_only_layers", nil)
			if r.Err() != nil || m.Experts <= 0 {
				return // num_experts 0: every layer is dense
			}
			m.Sparse = make([]bool, c.NumHiddenLayers)
			for i := range m.Sparse {
				m.Sparse[i] = (i+1)%step == 0
			}
			for _, i := range only {
				if i >= 0 && i < len(m.Sparse) {
					m.Sparse[i] = false
				}
			}
			if m.TopK > m.Experts {
				r.Fail("num_experts_per_tok", "%d exceeds num_experts %d", m.TopK, m.Experts)
				return
			}
			c.MoE = m
		},
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true}
		},
		MoENames: MoENames{Block: "mlp", Router: "gate", Gate: "gate_proj", Up: "up_proj", Down: "down_proj"},
		Fixture: Fixture{
			HeadDim: 32, // heads·head_dim ≠ hidden
			// 8 experts (GPTQ packs a router of 8 rows), top 2 renormalised; the last layer dense
			// (mlp_only_layers), so both MLP kinds are present.
			Config: func(s FixtureShape) map[string]any {
				only := []int{}
				if s.Layers > 1 {
					only = append(only, s.Layers-1)
				}
				return map[string]any{
					"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "attention_bias": false,
					"use_sliding_window": false, "sliding_window": nil, "max_window_layers": s.Layers,
					"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
					"norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": only,
					"router_aux_loss_coef": 0.001, "output_router_logits": false,
				}
			},
		},
	}
}
