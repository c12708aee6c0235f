package quant

import "testing"

// TestPyRegexMatch: "re:" targets match as Python's re.match does (anchored
// at the start only), including the lookaround and Python-only spellings
// quantization tools write. Expectations are Python's.
func TestPyRegexMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		// msModelSlim's trailing negative lookahead: the module, not its children
		{`.*\.mlp\.down_proj(?![.\w])`, "model.layers.3.mlp.down_proj", true},
		{`.*\.mlp\.down_proj(?![.\w])`, "model.layers.3.mlp.down_proj_2", false},
		{`.*\.mlp\.down_proj(?![.\w])`, "model.layers.3.mlp.down_proj.lora", false},
		// negative lookbehind
		{`.*(?<!shared_expert)\.gate_proj$`, "model.layers.0.mlp.gate_proj", true},
		{`.*(?<!shared_expert)\.gate_proj$`, "model.layers.0.mlp.shared_expert.gate_proj", false},
		// positive lookahead
		{`model\.layers\.\d+\.(?=self_attn)`, "model.layers.7.self_attn.q_proj", true},
		{`model\.layers\.\d+\.(?=self_attn)`, "model.layers.7.mlp.up_proj", false},
		// Python named groups and backreferences
		{`model\.layers\.(?P<i>\d)\.mlp\.experts\.(?P=i)\.`, "model.layers.2.mlp.experts.2.up_proj", true},
		{`model\.layers\.(?P<i>\d)\.mlp\.experts\.(?P=i)\.`, "model.layers.2.mlp.experts.3.up_proj", false},
		// re.match anchors at the start only: a prefix matches
		{`model\.layers\.1`, "model.layers.10.mlp.up_proj", true},
		{`layers\.1`, "model.layers.1.mlp.up_proj", false},
		// \Z is the absolute end in Python
		{`.*q_proj\Z`, "model.layers.0.self_attn.q_proj", true},
		{`.*q_proj\Z`, "model.layers.0.self_attn.q_proj_a", false},
		// $ before the end
		{`.*lm_head$`, "lm_head", true},
	} {
		re, err := compilePyRegex(c.pattern)
		if err != nil {
			t.Errorf("%s: %v", c.pattern, err)
			continue
		}
		if got := re.match(c.name); got != c.want {
			t.Errorf("re.match(%q, %q) = %v, Python gives %v", c.pattern, c.name, got, c.want)
		}
	}
	// in a config: an ignore list with a lookahead (refused before: Go's
	// regexp has no lookaround)
	s := mustScheme(t, `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"W4A16":["Linear"]},
		"ignore":["lm_head","re:.*\\.mlp\\.down_proj(?![.\\w])"]}`)
	if s.groupFor("model.layers.0.mlp.down_proj") != nil || s.groupFor("model.layers.0.mlp.up_proj") == nil {
		t.Error("lookahead ignore pattern not applied")
	}
	if _, err := ParseJSON([]byte(`{"quant_method":"compressed-tensors","ignore":["re:(?<=x"]}`), "", "c.json"); err == nil {
		t.Error("an invalid pattern was accepted")
	}
}
