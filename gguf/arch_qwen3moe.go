package gguf

import (
	"fmt"

	"github.com/qppl/qppl/arch"
)

// qwen3MoEArch declares general.architecture "qwen3moe": Hugging Face
// qwen3_moe (convert_hf_to_gguf.py Qwen3MoeModel ← Qwen2MoeModel: no Q/K
// permutation; expert_count, expert_used_count, expert_feed_forward_length
// = moe_intermediate_size; the experts of each layer stacked into
// ffn_{gate,up,down}_exps, the router as ffn_gate_inp).
//
// llama.cpp src/models/qwen3moe.cpp: n_ff_exp = expert_feed_forward_length,
// else feed_forward_length / expert_used_count; every layer has the router
// and the three stacked tensors (n_expert and n_expert_used must be > 0);
// attention as qwen3 (attn_q_norm, attn_k_norm, NEOX RoPE); the MoE is
// build_moe_ffn(…, LLM_FFN_SILU, norm_w = true, expert_weights_scale,
// LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX): softmax over all experts, top-k,
// the k weights always renormalised. So a qwen3moe file is read as
// norm_topk_prob true with every layer sparse, and the converter refuses a
// model llama.cpp would compute differently (norm_topk_prob false,
// mlp_only_layers, decoder_sparse_step > 1).
func qwen3MoEArch() Arch {
	return Arch{
		Name:              "qwen3moe",
		ModelTypes:        []string{"qwen3_moe"},
		KeyLengthRequired: true,
		Config: func(m *Model, cfg map[string]any) error {
			cfg["model_type"] = "qwen3_moe"
			_, bias := m.tensors["blk.0.attn_q.bias"]
			cfg["attention_bias"] = bias
			e, k, err := m.expertCounts()
			if err != nil {
				return err
			}
			if e == 0 {
				return fmt.Errorf("%w: %s: metadata %q is missing or 0 (llama.cpp: n_expert must be > 0 for QWEN3MOE)", ErrFormat, m.Files[0].Path, m.Arch+".expert_count")
			}
			ff, _ := cfg["intermediate_size"].(int64)
			w, err := m.metaInt(m.Arch+".expert_feed_forward_length", ff/k)
			if err != nil {
				return err
			}
			if w == 0 {
				return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, m.Files[0].Path, m.Arch+".expert_feed_forward_length")
			}
			cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"] = e, k, w
			cfg["norm_topk_prob"] = true // build_moe_ffn(…, norm_w = true, …)
			cfg["decoder_sparse_step"], cfg["mlp_only_layers"] = 1, []int{}
			return m.checkExpertScale()
		},
		Convert: func(s *arch.Spec) ([]KV, error) {
			if err := slidingWindowRefusal(s, "qwen3moe"); err != nil {
				return nil, err
			}
			if s.MoE == nil {
				return nil, fmt.Errorf("%w: convert: num_experts 0 (every layer dense): llama.cpp's qwen3moe graph needs experts", ErrUnsupported)
			}
			if err := everyLayerSparse(s, "qwen3moe", "mlp_only_layers / decoder_sparse_step"); err != nil {
				return nil, err
			}
			if !s.MoE.NormTopK {
				return nil, fmt.Errorf("%w: convert: config.json norm_topk_prob is false, but llama.cpp's qwen3moe graph always renormalises the top-k routing weights (build_moe_ffn norm_w = true)", ErrUnsupported)
			}
			return append(expertKVs("qwen3moe", s), KV{"qwen3moe.expert_feed_forward_length", Uint32Value(uint32(s.MoE.Intermediate))}), nil
		},
	}
}
