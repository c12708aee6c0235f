package gguf

import "github.com/qppl/qppl/arch"

// llamaArch declares general.architecture "llama": Hugging Face llama and
// mistral (convert_hf_to_gguf.py LlamaModel, model_arch LLAMA; Mistral
// checkpoints are converted by the same class). The converter permutes the
// rows of q_proj and k_proj (LlamaModel.modify_tensors → permute, for
// llama.cpp's interleaved RoPE); the reader undoes it. Attention biases
// are read from blk.0.attn_q.bias being present (llama.cpp
// llama-model.cpp LLM_ARCH_LLAMA: bq/bk/bv/bo are TENSOR_NOT_REQUIRED).
func llamaArch() Arch {
	return Arch{
		Name:       "llama",
		ModelTypes: []string{"llama", "mistral"},
		PermuteQK:  true,
		Config: func(m *Model, cfg map[string]any) error {
			cfg["model_type"] = "llama"
			_, bias := m.tensors["blk.0.attn_q.bias"]
			cfg["attention_bias"] = bias
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) { return nil, slidingWindowRefusal(s, "llama") },
	}
}
