package main

import (
	"strings"

	"github.com/qppl/qppl/compare"
)

// ignoredTensors counts the checkpoint's tensors that the architecture
// leaves alone on purpose (arch: a multimodal qwen3_5 checkpoint's vision
// tower under model.visual.), per prefix; nil for GGUF or when none.
func (m *evalModel) ignoredTensors() []compare.IgnoredTensors {
	if m.ckpt == nil || m.Config == nil {
		return nil
	}
	var out []compare.IgnoredTensors
	for _, g := range m.ckpt.IgnoredTensors(m.Config.IgnoredPrefixes) {
		out = append(out, compare.IgnoredTensors{What: g.What, Prefix: g.Prefix, Tensors: g.Tensors})
	}
	return out
}

// withoutIgnored drops the ignored tensors from a list of unused ones.
func (m *evalModel) withoutIgnored(names []string) []string {
	if m.Config == nil || len(m.Config.IgnoredPrefixes) == 0 {
		return names
	}
	var out []string
	for _, n := range names {
		ignored := false
		for _, p := range m.Config.IgnoredPrefixes {
			ignored = ignored || strings.HasPrefix(n, p.Prefix)
		}
		if !ignored {
			out = append(out, n)
		}
	}
	return out
}
