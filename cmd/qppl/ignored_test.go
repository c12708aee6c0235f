package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

// TestEvalIgnoredVisionTower: a multimodal qwen3_5 checkpoint evaluates on
// both backends; its vision tower is reported as ignored (a stderr line and
// ignored_tensors in the JSON), never as unused (not even with
// --allow-unused-tensors).
func TestEvalIgnoredVisionTower(t *testing.T) {
	_, tokens := evalFixture(t, 1, 40)
	o, err := fixtures.Defaults("qwen3_5")
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
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(stderr, "qppl: ignored: vision tower 5 tensors (model.visual.*)") {
			t.Errorf("%v: no ignored line: %s", args, stderr)
		}
		_, m := readResult(t, out)
		g, _ := m["ignored_tensors"].([]any)
		if len(g) != 1 || m["unused_tensors"] != nil {
			t.Errorf("%v: ignored_tensors %v, unused_tensors %v", args, m["ignored_tensors"], m["unused_tensors"])
		} else if e := g[0].(map[string]any); e["what"] != "vision tower" || e["prefix"] != "model.visual." || e["tensors"] != 5.0 {
			t.Errorf("%v: ignored_tensors %v", args, e)
		}
	}
}
