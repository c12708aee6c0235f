package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// sharedDir is ../shared seen from this package (cmd/qppl).
var sharedDir = filepath.Join("..", "..", "..", "shared")

func sharedPath(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{sharedDir}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data not found: %v", err)
	}
	return p
}

// TestEvalWikiTextOnSharedModel runs issue 3's end-to-end command on the
// trained model in ../shared: `qppl eval --dataset wikitext2 --data
// test.rows.jsonl`. The token stream qppl builds (compare_q join, the
// model's Mistral tokenizer, add_special_tokens=true) must be exactly the
// one the Hugging Face tokenizers library produced: its sha256 equals that
// of golden/tokens/mistral.test-joined.special1.i32.
func TestEvalWikiTextOnSharedModel(t *testing.T) {
	model := sharedPath(t, "models", "tiny-wt2-mistral")
	rows := sharedPath(t, "data", "wikitext-2-raw-v1", "test.rows.jsonl")
	golden, err := os.ReadFile(sharedPath(t, "golden", "tokens", "mistral.test-joined.special1.i32"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(golden)

	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runQPPL(t, "eval", "--model", model, "--dataset", "wikitext2", "--data", rows,
		"--ctx", "128", "--stride", "64", "--rows", "2", "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r, _ := readResult(t, out)
	if r.Data.NumTokens != len(golden)/4 || r.TokensHash != hex.EncodeToString(sum[:]) {
		t.Fatalf("token stream: %d tokens, sha256 %s; golden has %d tokens, sha256 %x", r.Data.NumTokens, r.TokensHash, len(golden)/4, sum)
	}
	if r.Windows != 2 || r.TokensScored != 2*127 {
		t.Fatalf("windows %d, scored %d; want 2 and 254", r.Windows, r.TokensScored)
	}
	// The model is trained (PPL ≈ 330 on this text) and far from uniform
	// over its 32000 tokens.
	if !(r.PPL > 50 && r.PPL < 3000) {
		t.Fatalf("PPL %v of the trained model is implausible", r.PPL)
	}
	if stdout == "" {
		t.Fatal("no summary on stdout")
	}
}
