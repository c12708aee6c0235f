package gguf

import "github.com/qppl/qppl/arch"

// qwen2Arch declares general.architecture "qwen2" (convert_hf_to_gguf.py
// Qwen2Model: no Q/K permutation, llama.cpp applies NEOX RoPE; q, k and v
// always carry a bias, which Qwen2Config implies, so no attention_bias key
// is read).
func qwen2Arch() Arch {
	return Arch{
		Name:       "qwen2",
		ModelTypes: []string{"qwen2"},
		Config: func(_ *Model, cfg map[string]any) error {
			cfg["model_type"] = "qwen2"
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) { return nil, slidingWindowRefusal(s, "qwen2") },
	}
}
