package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

func TestQuantizeInspectCLI(t *testing.T) {
	dir := t.TempDir()
	base, q := filepath.Join(dir, "base"), filepath.Join(dir, "q")
	o, _ := fixtures.Defaults("llama")
	if err := fixtures.Write(base, o); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runQPPL(t, "quantize", "--model", base, "--scheme", "W4A16", "--out", q)
	if code != 0 || !strings.Contains(stdout, "ct-int4-g128-sym, 4.4688 bpw") {
		t.Fatalf("quantize: code %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runQPPL(t, "inspect", "--model", q)
	if code != 0 || !strings.Contains(stdout, "model.layers.1.mlp.down_proj") || !strings.Contains(stdout, "decoder layers: 4.4688 bpw (41184 bytes / 73728 weights)") {
		t.Fatalf("inspect: code %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runQPPL(t, "inspect", "--model", q, "--json")
	var r map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || r["bpw_head"].(float64) != 32 || r["head"] != "model.embed_tokens" {
		t.Fatalf("inspect --json: %d %s", code, stdout)
	}
	// Mistakes: unknown scheme, AWQ group not dividing, already quantized.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", "--model", base, "--scheme", "W3A3", "--out", filepath.Join(dir, "x")}, `unknown scheme "W3A3"`},
		{[]string{"quantize", "--model", base, "--scheme", "Q4_K_M", "--out", filepath.Join(dir, "x")}, `qppl convert --model ` + base + ` --to gguf --type Q4_K_M`},
		{[]string{"quantize", "--model", base, "--scheme", "AWQ", "--out", filepath.Join(dir, "y")}, "AWQ group_size 128 does not divide in_features 64"},
		{[]string{"quantize", "--model", q, "--scheme", "FP8", "--out", filepath.Join(dir, "z")}, "already quantized"},
		{[]string{"quantize", "--model", base, "--scheme", "FP8", "--out", filepath.Join(dir, "w"), "--quantize-head"}, "no lm_head.weight"},
		{[]string{"inspect", "--model", filepath.Join(dir, "nothing")}, "config.json"},
	} {
		code, _, stderr := runQPPL(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: code %d, stderr %q, want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
