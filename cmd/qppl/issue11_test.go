package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

// Issue 11 item 3: no token goes unscored silently, and no flag is
// silently ignored.
func TestStrideDefaultsAndIgnoredFlags(t *testing.T) {
	model, tokens := evalFixture(t, 5, 80)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	// --ctx 16 alone: stride ctx/4 = 4, (80-16)/4 = 16 windows; the old
	// default stride 512 scored one window and left 64 tokens out.
	code, _, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r, _ := readResult(t, out)
	if r.Stride != 4 || r.Windows != 16 {
		t.Errorf("--ctx 16: stride %d, %d windows; want stride 4 and 16 windows", r.Stride, r.Windows)
	}
	rs := compareOne(t, model, "--tokens", tokens, "--ctx", "16")
	if c := rs.Results[0]; c.Stride != 4 || c.Windows != 16 || c.PPL != r.PPL {
		t.Errorf("compare --ctx 16: stride %d, %d windows, PPL %v; eval: stride 4, 16 windows, PPL %v", c.Stride, c.Windows, c.PPL, r.PPL)
	}
	// A stride larger than the window only with --allow-gaps.
	if code, _, _ := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "20", "--allow-gaps"); code != 0 {
		t.Errorf("--allow-gaps: exit %d", code)
	}
	base := []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16"}
	cases := []struct {
		args []string
		want string
	}{
		{append(base, "--stride", "20"), "eval: --stride 20 is larger than --ctx 16: the 4 tokens between windows would never be scored (--allow-gaps to accept)"},
		{append(base, "--method", "llamacpp", "--stride", "8"), "eval: --stride: method llamacpp does not use a stride"},
		{append(base, "--join", "llamacpp"), "eval: --join joins the rows of --dataset"},
		{append(base, "--logits-format", "f32"), "eval: --logits-format is the encoding of --save-logits"},
		{append(base, "--kld-mode", "compare_q"), "eval: --kld-mode goes with --save-logits"},
		{append(base, "--kld-rows", "3"), "eval: --kld-rows goes with --save-logits"},
		{append(base, "--gpus", "0,1"), "the reference backend runs on the CPU"},
		{[]string{"compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "17"}, "compare: --stride 17 is larger than --ctx 16"},
		{[]string{"compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--method", "exl3-ppl", "--stride", "4"}, "compare: --stride: method exl3-ppl does not use a stride"},
		{[]string{"compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--join", "filtered"}, "compare: --join joins the rows of the data"},
		{[]string{"compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--gpu-split", "2"}, "the reference backend runs on the CPU"},
	}
	for _, c := range cases {
		code, stdout, stderr := runQPPL(t, c.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args[1:], code, stderr, c.want)
		}
	}
	// Windows longer than the trained positions: a warning.
	_, _, stderr = runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16")
	if strings.Contains(stderr, "max_position_embeddings") {
		t.Errorf("warning without cause: %s", stderr)
	}
	short := filepath.Join(dir, "short")
	o, _ := fixtures.Defaults("llama")
	o.MaxPos = 12
	if err := fixtures.Write(short, o); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runQPPL(t, "eval", "--model", short, "--tokens", tokens, "--ctx", "16", "--stride", "16")
	if code != 0 || !strings.Contains(stderr, "qppl: warning: --ctx 16 is longer than the model's max_position_embeddings 12") {
		t.Errorf("--ctx beyond max_position_embeddings: exit %d, stderr %s", code, stderr)
	}
}

// Issue 11 item 6: an output that cannot be written is found before any
// work (exit 2, nothing on stdout), in every command that writes one.
func TestUnwritableOutputFirst(t *testing.T) {
	ro := "/proc/self" // exists, and nobody (root included) can create a file in it
	if err := probeWritable(ro); err == nil {
		t.Skipf("%s is writable here", ro)
	}
	model, tokens := evalFixture(t, 6, 80)
	text := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(text, []byte("the cat sat on the mat"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(ro, "out.json")
	cases := [][]string{
		{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--json", out},
		{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--nll-out", filepath.Join(ro, "n.f64")},
		{"compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--cache-dir", t.TempDir(), "--json", out},
		{"verify", "--model", model, "--ctx", "8", "--windows", "1", "--backends", "reference,reference", "--json", out},
		{"tokenize", "--tokenizer", model, "--text", text, "--out", filepath.Join(ro, "t.i32")},
	}
	for _, args := range cases {
		code, stdout, stderr := runQPPL(t, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "cannot write in directory "+ro) || strings.Contains(stderr, ".qppl-write-check") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming the directory before any work", args[0], code, stdout, stderr)
		}
		if strings.Contains(stderr, "data:") || strings.Contains(stderr, "evaluating") {
			t.Errorf("%s: work was done before the output check: %s", args[0], stderr)
		}
	}
}
