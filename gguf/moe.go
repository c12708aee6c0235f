package gguf

import (
	"fmt"

	"github.com/qppl/qppl/arch"
)

// expertCounts reads <arch>.expert_count and <arch>.expert_used_count
// (llama.cpp LLM_KV_EXPERT_COUNT, LLM_KV_EXPERT_USED_COUNT): both
// positive, the second at most the first. An expert_count of 0 or absent
// returns 0, 0 (a dense model).
func (m *Model) expertCounts() (experts, used int64, err error) {
	a := m.Arch
	if experts, err = m.metaInt(a+".expert_count", 0); err != nil || experts == 0 {
		return 0, 0, err
	}
	if used, err = m.metaInt(a+".expert_used_count", -1); err != nil {
		return 0, 0, err
	}
	if used == 0 || used > experts {
		return 0, 0, fmt.Errorf("%w: %s: metadata %q = %d: want 1 … %q = %d", ErrFormat, m.Files[0].Path, a+".expert_used_count", used, a+".expert_count", experts)
	}
	return experts, used, nil
}

// checkExpertScale refuses <arch>.expert_weights_scale other than 0 or 1:
// llama.cpp's build_moe_ffn (llama-graph.cpp) multiplies the routing
// weights by it then, which no Hugging Face family qppl reads does.
func (m *Model) checkExpertScale() error {
	key := m.Arch + ".expert_weights_scale"
	if _, ok := m.meta(key); !ok {
		return nil
	}
	w, err := m.metaFloat(key, 0)
	if err != nil {
		return err
	}
	if w != 0 && w != 1 {
		return fmt.Errorf("%w: %s: metadata %q = %v: scaled routing weights are not supported", ErrUnsupported, m.Files[0].Path, key, w)
	}
	return nil
}

// expertKVs are what convert_hf_to_gguf.py's TextModel.set_gguf_parameters
// writes for a mixture of experts: expert_count (num_local_experts /
// num_experts) and expert_used_count (num_experts_per_tok).
func expertKVs(a string, s *arch.Spec) []KV {
	return []KV{
		{a + ".expert_count", Uint32Value(uint32(s.MoE.Experts))},
		{a + ".expert_used_count", Uint32Value(uint32(s.MoE.TopK))},
	}
}

// everyLayerSparse refuses a model with a dense layer: llama.cpp's graphs
// of the MoE architectures qppl writes give every layer experts
// (llama-model.cpp: ffn_gate_inp and ffn_*_exps are required per layer).
func everyLayerSparse(s *arch.Spec, a, keys string) error {
	for i := 0; i < s.Layers; i++ {
		if !s.Sparse(i) {
			return fmt.Errorf("%w: convert: layer %d is a dense MLP (config.json %s), which llama.cpp's %s graph cannot hold: it gives every layer experts", ErrUnsupported, i, keys, a)
		}
	}
	return nil
}
