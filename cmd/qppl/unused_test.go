package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

// issue 11 item 1 at the command line: eval (reference and emu) and compare
// stop with exit 2 before any window runs, naming the unused tensors;
// --allow-unused-tensors runs and records them in the JSON.
func TestEvalUnusedTensors(t *testing.T) {
	_, tokens := evalFixture(t, 1, 80)
	for _, k := range fixtures.Mislabels() {
		t.Run(k.String(), func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, "m")
			want, err := fixtures.WriteMislabelled(model, k)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "r.json")
			for _, be := range []string{"reference", "emu"} {
				args := []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--backend", be, "--json", out}
				code, stdout, stderr := runQPPL(t, args...)
				if code != 2 || stdout != "" || !strings.Contains(stderr, want[0]) || !strings.Contains(stderr, want[len(want)-1]) || !strings.Contains(stderr, "--allow-unused-tensors") {
					t.Errorf("%s: exit %d, stdout %q, stderr %q", be, code, stdout, stderr)
				}
			}
			code, _, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--allow-unused-tensors", "--json", out)
			if code != 0 {
				t.Fatalf("--allow-unused-tensors: exit %d: %s", code, stderr)
			}
			r, m := readResult(t, out)
			if !r.AllowUnusedTensors || !slices.Equal(r.UnusedTensors, want) || m["allow_unused_tensors"] != true {
				t.Errorf("JSON records allow %v unused %v, want %v", r.AllowUnusedTensors, r.UnusedTensors, want)
			}
			if !strings.Contains(stderr, want[0]) {
				t.Errorf("no warning naming the unused tensors: %s", stderr)
			}
		})
	}
}

// A complete checkpoint records nothing.
func TestEvalNoUnusedTensors(t *testing.T) {
	model, tokens := evalFixture(t, 1, 80)
	out := filepath.Join(t.TempDir(), "r.json")
	if code, _, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--allow-unused-tensors", "--json", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, m := readResult(t, out); m["unused_tensors"] != nil {
		t.Errorf("unused_tensors %v for a complete checkpoint", m["unused_tensors"])
	}
}
