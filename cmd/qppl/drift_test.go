package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/tokenizer"
)

// compareOne runs `qppl compare --model model` with args and returns its
// only result.
func compareOne(t *testing.T, model string, args ...string) suite.ResultSet {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	code, _, stderr := runQPPL(t, append([]string{"compare", "--model", model, "--cache-dir", filepath.Join(dir, "c"), "--json", out}, args...)...)
	if code != 0 {
		t.Fatalf("compare %v: exit %d: %s", args, code, stderr)
	}
	rs, err := suite.LoadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	return *rs
}

// evalOne runs `qppl eval --model model` with args and returns the result.
func evalOne(t *testing.T, model string, args ...string) suite.ResultSet {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runQPPL(t, append([]string{"eval", "--model", model, "--json", out}, args...)...)
	if code != 0 {
		t.Fatalf("eval %v: exit %d: %s", args, code, stderr)
	}
	rs, err := suite.LoadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	return *rs
}

// The drift issue 10 names: compare's suite prepared data its own way.
// Both commands now go through eval.Prepare, so the same data options give
// the same token stream, windows and numbers.
func TestCompareDataAsEval(t *testing.T) {
	model, tokens := evalFixture(t, 3, 400)
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	bos, ok := tok.BOS()
	if !ok {
		t.Fatal("fixture tokenizer has no BOS")
	}
	ids, err := dataset.ReadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == bos || ids[64] == bos {
		t.Fatalf("token stream already starts its chunks with BOS %d: the test could not see a missing BOS", bos)
	}
	// A text whose trailing newline llama.cpp drops (llama-perplexity -f).
	text := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("the cat sat on the mat and the dog ran off\n", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		eval, compare []string
	}{
		// --tokens with llamacpp: each chunk's first token becomes the BOS
		// of the model's tokenizer (eval's rule; compare had none).
		{"tokens llamacpp BOS", []string{"--tokens", tokens, "--method", "llamacpp", "--ctx", "64", "--rows", "3"},
			[]string{"--tokens", tokens, "--method", "llamacpp", "--ctx", "64", "--rows", "3"}},
		// --text with llamacpp: one trailing "\n" dropped whatever the row
		// join (compare kept it under --join compare_q).
		{"text llamacpp trim", []string{"--text", text, "--method", "llamacpp", "--ctx", "64", "--rows", "2"},
			[]string{"--text", text, "--method", "llamacpp", "--join", "compare_q", "--ctx", "64", "--rows", "2"}},
	}
	for _, tc := range cases {
		e, c := evalOne(t, model, tc.eval...).Results[0], compareOne(t, model, tc.compare...).Results[0]
		if e.TokensHash != c.TokensHash || e.DataSpecHash != c.DataSpecHash || e.PPL != c.PPL || e.TokensScored != c.TokensScored {
			t.Errorf("%s: eval PPL %v over %d tokens (stream %.8s), compare PPL %v over %d (stream %.8s)",
				tc.name, e.PPL, e.TokensScored, e.TokensHash, c.PPL, c.TokensScored, c.TokensHash)
		}
	}
}

// compare takes the backend flags eval takes (declared once): --gpus and
// --gpu-split reach the backend, and --ctx is the backend's maximum window
// (the memory plan is made for windows of --ctx tokens, not 2048).
func TestCompareBackendFlags(t *testing.T) {
	if _, err := emu.New(emu.Options{}); errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	model, tokens := evalFixture(t, 4, 200)
	dir := t.TempDir()
	args := []string{"compare", "--model", model, "--tokens", tokens, "--ctx", "24", "--stride", "24", "--rows", "2",
		"--backend", "emu", "--precision", "fp32", "--gpus", "0,1", "--gpu-split", "1,1", "--cache-dir", filepath.Join(dir, "c")}
	code, _, stderr := runQPPL(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "windows up to 24 tokens") || strings.Count(stderr, "emu:1") == 0 {
		t.Errorf("the memory plan should be made for --ctx 24 on devices emu:0 and emu:1; stderr:\n%s", stderr)
	}
	code, _, stderr = runQPPL(t, append(args[:len(args)-2:len(args)-2], "--gpu-split", "1", "--no-cache", "--cache-dir", filepath.Join(dir, "c"))...)
	if code != exitUsage || !strings.Contains(stderr, "--gpu-split has 1 values for 2 devices") {
		t.Errorf("--gpu-split with one value for two devices: exit %d, %s", code, stderr)
	}
}
