package gguf

import (
	"fmt"

	"github.com/qppl/qppl/arch"
)

// phi3Arch declares general.architecture "phi3": Hugging Face phi3
// (convert_hf_to_gguf.py Phi3MiniModel: no Q/K permutation; qkv_proj
// stored as attn_qkv and gate_up_proj as ffn_up, both as they are — q, k,
// v rows and gate then up rows; phi3.attention.sliding_window =
// sliding_window, 0 for none; rope_factors_long/short only for a
// longrope rope_scaling).
//
// llama.cpp src/models/phi3.cpp: attn_qkv (or attn_q/k/v) of
// n_embd + 2·n_embd_gqa rows, ffn_up of 2·n_ff rows run as
// LLM_FFN_SWIGLU (silu of the first half times the second: Phi3MLP's
// up · silu(gate)), NEOX RoPE (llama_model_rope_type), Q scaled by
// 1/sqrt(head_dim). llama.cpp disables Phi's sliding window ("Phi SWA is
// currently disabled": n_swa = 0, full attention); qppl reads the key as
// transformers' sliding_window (the Hugging Face model's attention), so
// the converter refuses a window shorter than the context, and a file
// with one is scored as the original model, not as llama.cpp runs it.
// longrope (rope_factors_long/short, rope.scaling.attn_factor) is
// refused as qppl's phi3 refuses it.
func phi3Arch() Arch {
	return Arch{
		Name:       "phi3",
		ModelTypes: []string{"phi3"},
		Config: func(m *Model, cfg map[string]any) error {
			cfg["model_type"] = "phi3"
			for _, n := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
				if _, ok := m.tensors[n]; ok {
					return fmt.Errorf("%w: %s: tensor %q: longrope RoPE scaling (phi3's long-context rope_scaling) is not supported", ErrUnsupported, m.Files[0].Path, n)
				}
			}
			if _, ok := m.meta("phi3.rope.scaling.attn_factor"); ok {
				f, err := m.metaFloat("phi3.rope.scaling.attn_factor", 1)
				if err != nil {
					return err
				}
				if f != 1 {
					return fmt.Errorf("%w: %s: metadata %q = %v: longrope attention scaling is not supported", ErrUnsupported, m.Files[0].Path, "phi3.rope.scaling.attn_factor", f)
				}
			}
			w, err := m.metaInt("phi3.attention.sliding_window", 0)
			if err != nil {
				return err
			}
			if w > 0 {
				cfg["sliding_window"] = w
			}
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) {
			if err := slidingWindowRefusal(s, "phi3"); err != nil {
				return nil, err
			}
			return []KV{{"phi3.attention.sliding_window", Uint32Value(uint32(s.SlidingWindow))}}, nil
		},
	}
}
