package gguf

import (
	"fmt"

	"github.com/qppl/qppl/arch"
)

// llamaArch declares general.architecture "llama": Hugging Face llama and
// mistral (convert_hf_to_gguf.py LlamaModel, model_arch LLAMA; Mistral
// checkpoints are converted by the same class). The converter permutes the
// rows of q_proj and k_proj (LlamaModel.modify_tensors → permute, for
// llama.cpp's interleaved RoPE); the reader undoes it. Attention biases
// are read from blk.0.attn_q.bias being present (llama.cpp
// llama-model.cpp LLM_ARCH_LLAMA: bq/bk/bv/bo are TENSOR_NOT_REQUIRED).
//
// Mixtral is converted by the same class (convert_hf_to_gguf.py
// LlamaModel registers MixtralForCausalLM: expert_count =
// num_local_experts, expert_used_count = num_experts_per_tok, the
// block_sparse_moe.experts.{e}.w1/w3/w2 stacked into
// ffn_gate_exps/ffn_up_exps/ffn_down_exps, the router as ffn_gate_inp,
// Q/K permuted as for llama). llama.cpp src/models/llama.cpp: with
// n_expert > 0 every layer has ffn_gate_inp and the stacked experts of
// width n_ff (feed_forward_length), run by build_moe_ffn(…, LLM_FFN_SILU,
// norm_w = true, expert_weights_scale, SOFTMAX) — Mixtral's routing
// (softmax, top-k, renormalised). A llama file with expert_count > 0 is
// read as model_type mixtral; Granite's shared expert
// (expert_shared_feed_forward_length) is refused.
func llamaArch() Arch {
	return Arch{
		Name:       "llama",
		ModelTypes: []string{"llama", "mistral", "mixtral"},
		PermuteQK:  true,
		Config: func(m *Model, cfg map[string]any) error {
			cfg["model_type"] = "llama"
			_, bias := m.tensors["blk.0.attn_q.bias"]
			cfg["attention_bias"] = bias
			e, k, err := m.expertCounts()
			if err != nil || e == 0 {
				return err
			}
			if n, err := m.metaInt("llama.expert_shared_feed_forward_length", 0); err != nil {
				return err
			} else if n > 0 {
				return fmt.Errorf("%w: %s: metadata %q = %d: a shared expert (Granite MoE) is not supported", ErrUnsupported, m.Files[0].Path, "llama.expert_shared_feed_forward_length", n)
			}
			// Mixtral: the experts' width is intermediate_size
			// (feed_forward_length); MistralAttention has no bias.
			cfg["model_type"] = "mixtral"
			delete(cfg, "attention_bias")
			cfg["num_local_experts"], cfg["num_experts_per_tok"] = e, k
			return m.checkExpertScale()
		},
		Convert: func(s *arch.Spec) ([]KV, error) {
			if err := slidingWindowRefusal(s, "llama"); err != nil {
				return nil, err
			}
			if s.MoE == nil {
				return nil, nil
			}
			if s.MoE.SharedIntermediate > 0 || !s.MoE.NormTopK || s.MoE.Intermediate != s.Intermediate {
				return nil, fmt.Errorf("%w: convert: %s's mixture of experts is not llama.cpp's llama MoE (renormalised top-k, experts of width feed_forward_length, no shared expert)", ErrUnsupported, s.Name)
			}
			if err := everyLayerSparse(s, "llama", "num_local_experts"); err != nil {
				return nil, err
			}
			return expertKVs("llama", s), nil
		},
	}
}
