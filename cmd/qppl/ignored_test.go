package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

// TestEvalIgnoredVisionTower: a multimodal qwen3_5 or gemma3 checkpoint
// evaluates on both backends; its vision tower (and gemma3's multimodal
// projector) is reported as ignored (a stderr line and ignored_tensors in
// the JSON), never as unused (not even with --allow-unused-tensors).
func TestEvalIgnoredVisionTower(t *testing.T) {
	_, tokens := evalFixture(t, 1, 40)
	type ignored struct {
		what, prefix string
		n            int
	}
	for _, c := range []struct {
		arch string
		want []ignored
	}{
		{"qwen3_5", []ignored{{"vision tower", "model.visual.", 5}}},
		{"gemma3", []ignored{{"vision tower", "model.vision_tower.", 7}, {"multimodal projector", "model.multi_modal_projector.", 2}}},
	} {
		o, err := fixtures.Defaults(c.arch)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		model := filepath.Join(dir, "m")
		if err := fixtures.Write(model, o); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "r.json")
		for _, args := range [][]string{{"--backend", "reference"}, {"--backend", "emu", "--precision", "fp32"}, {"--allow-unused-tensors"}} {
			code, _, stderr := runQPPL(t, append([]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--json", out}, args...)...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d: %s", c.arch, args, code, stderr)
			}
			_, m := readResult(t, out)
			g, _ := m["ignored_tensors"].([]any)
			if len(g) != len(c.want) || m["unused_tensors"] != nil {
				t.Errorf("%s %v: ignored_tensors %v, unused_tensors %v", c.arch, args, m["ignored_tensors"], m["unused_tensors"])
				continue
			}
			for k, w := range c.want {
				if line := fmt.Sprintf("qppl: ignored: %s %d tensors (%s*)", w.what, w.n, w.prefix); !strings.Contains(stderr, line) {
					t.Errorf("%s %v: no line %q: %s", c.arch, args, line, stderr)
				}
				if e := g[k].(map[string]any); e["what"] != w.what || e["prefix"] != w.prefix || e["tensors"] != float64(w.n) {
					t.Errorf("%s %v: ignored_tensors[%d] %v", c.arch, args, k, e)
				}
			}
		}
	}
}
