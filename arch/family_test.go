package arch

import (
	"encoding/json"
	"testing"
)

// TestFamiliesDeclared: every declaration is complete, names are unique,
// Lookup finds each, and each family's fixture config parses into a Spec of
// that family (so a new family's file is all the registry needs).
func TestFamiliesDeclared(t *testing.T) {
	seen := map[string]bool{}
	fs := Families()
	if len(fs) != len(Names()) {
		t.Fatalf("%d families, %d names", len(fs), len(Names()))
	}
	for i, f := range fs {
		if f.Name == "" || f.Class == "" || f.Layout == nil || f.Fixture.Config == nil {
			t.Errorf("family %d (%q): incomplete declaration", i, f.Name)
			continue
		}
		if seen[f.Name] {
			t.Errorf("family %q declared twice", f.Name)
		}
		seen[f.Name] = true
		if Names()[i] != f.Name {
			t.Errorf("Names()[%d] = %q, want %q", i, Names()[i], f.Name)
		}
		if g, ok := Lookup(f.Name); !ok || g.Name != f.Name {
			t.Errorf("Lookup(%q) = %q, %v", f.Name, g.Name, ok)
		}
		c := f.Fixture.Config(FixtureShape{Layers: 2, MaxPos: 128, Vocab: 300})
		for k, v := range map[string]any{"model_type": f.Name, "architectures": []string{f.Class}, "vocab_size": 300,
			"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2} {
			c[k] = v
		}
		if f.Fixture.Nest != nil { // a multimodal wrapper: the decoder's keys under text_config
			c = f.Fixture.Nest(c)
		}
		js, _ := json.Marshal(c)
		cfg, err := ParseConfig(js, "config.json")
		if err != nil {
			t.Errorf("%s: fixture config: %v", f.Name, err)
			continue
		}
		s, err := For(cfg)
		if err != nil || s.Family.Name != f.Name || s.Name != f.Name {
			t.Errorf("%s: fixture config resolves to %v, %v", f.Name, s, err)
		}
	}
	if _, ok := Lookup("gpt2"); ok {
		t.Error("Lookup(gpt2) found a family")
	}
}
