package gguf

import "github.com/qppl/qppl/arch"

// qwen3Arch declares general.architecture "qwen3" (convert_hf_to_gguf.py
// Qwen3Model: no Q/K permutation; attn_q_norm and attn_k_norm per head).
// The head size is qwen3's head_dim, never hidden/heads by default:
// <arch>.attention.key_length is required.
func qwen3Arch() Arch {
	return Arch{
		Name:              "qwen3",
		ModelTypes:        []string{"qwen3"},
		KeyLengthRequired: true,
		Config: func(m *Model, cfg map[string]any) error {
			cfg["model_type"] = "qwen3"
			_, bias := m.tensors["blk.0.attn_q.bias"]
			cfg["attention_bias"] = bias
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) { return nil, slidingWindowRefusal(s, "qwen3") },
	}
}
