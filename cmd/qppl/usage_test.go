package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: every kind of command-line mistake exits 2 (README's
// table) with one line on stderr naming the problem and nothing on stdout;
// urfave/cli's defaults would exit 1 (unknown flag, missing required flag,
// with the help text on stdout) or 3 (unknown command: the regression code).
func TestUsageErrors(t *testing.T) {
	missingDir := filepath.Join(t.TempDir(), "nosuch", "out.json")
	model, tokens := evalFixture(t, 1, 40)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `qppl: unknown command "nosuch" (see qppl --help)`},
		{[]string{"help", "nosuch"}, "qppl: No help topic for 'nosuch'"},
		{[]string{"--nosuch"}, "qppl: flag provided but not defined: -nosuch (see qppl --help)"},
		{[]string{"eval", "--model", "m", "--nosuch"}, "qppl: eval: flag provided but not defined: -nosuch (see qppl eval --help)"},
		{[]string{"eval", "--ctx", "x", "--model", "m"}, `qppl: eval: invalid value "x" for flag -ctx`},
		{[]string{"eval", "--text", "t.txt"}, "qppl: eval: --model required (see qppl eval --help)"},
		{[]string{"inspect"}, "qppl: inspect: --model required (see qppl inspect --help)"},
		{[]string{"quantize", "--model", "m"}, "qppl: quantize: --scheme, --out required (see qppl quantize --help)"},
		{[]string{"fixture"}, "qppl: fixture: --out required (see qppl fixture --help)"},
		{[]string{"verify"}, "qppl: verify: --model required (see qppl verify --help)"},
		{[]string{"plot", "r.json", "--nosuch"}, "qppl: plot: flag provided but not defined: -nosuch (see qppl plot --help)"},
		{[]string{"merge", "--nosuch", "d"}, "qppl: merge: flag provided but not defined: -nosuch (see qppl merge --help)"},
		{[]string{"compare", "--nosuch"}, "qppl: compare: flag provided but not defined: -nosuch (see qppl compare --help)"},
		// Checked before the model, the data or the run: a long run must not
		// end in an error about its flags.
		{[]string{"eval", "--model", "m", "--text", "t", "--backend", "gpu"}, `qppl: eval: unknown backend "gpu" (want reference, emu or cuda)`},
		{[]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--json", missingDir}, "qppl: eval: --json " + missingDir + ": directory " + filepath.Dir(missingDir) + ": stat "},
		{[]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--nll-out", missingDir}, "qppl: eval: --nll-out " + missingDir + ": directory "},
		{[]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--save-logits", missingDir}, "qppl: eval: --save-logits " + missingDir + ": directory "},
		{[]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--json", tokens + "/r.json"}, "qppl: eval: --json " + tokens + "/r.json: " + tokens + " is not a directory"},
		{[]string{"eval", "--model", "m", "--text", "t", "--tokens-out", "dump.txt"}, "qppl: eval: --tokens-out dump.txt: want a .jsonl or .csv file name"},
		{[]string{"tokenize", "--tokenizer", model, "--text", tokens, "--out", missingDir}, "qppl: tokenize: --out " + missingDir + ": directory "},
		{[]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--nll-out", filepath.Dir(tokens)}, "qppl: eval: --nll-out " + filepath.Dir(tokens) + " is a directory: give a file name"},
		{[]string{"merge", "--json", missingDir, "d"}, "qppl: merge: --json " + missingDir + ": directory "},
		{[]string{"compare", "--model", "m", "--text", "t", "--backend", "gpu"}, `qppl: compare: unknown backend "gpu" (want reference, emu or cuda)`},
		{[]string{"compare", "--model", "m", "--text", "t", "--plot", missingDir + ".png"}, "qppl: compare: --plot " + missingDir + ".png: directory "},
	} {
		code, stdout, stderr := runQPPL(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("qppl %s: exit %d, stdout %q, stderr %q; want exit 2, no stdout, one line starting %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
	// compare_q's KL coverage in llama.cpp's 16-bit store is not compare_q's
	// KL: said, not silent.
	store := filepath.Join(t.TempDir(), "base.lp")
	for _, f := range []string{"u16", "f32"} {
		code, _, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--save-logits", store, "--kld-mode", "compare_q", "--logits-format", f)
		if warned := strings.Contains(stderr, "use --logits-format f32 to match it"); code != 0 || warned != (f == "u16") {
			t.Errorf("--logits-format %s: exit %d, warned %v: %s", f, code, warned, stderr)
		}
		fi, err := os.Stat(store)
		if err != nil {
			t.Fatal(err)
		}
		// The run states the store's size.
		if want := fmt.Sprintf("qppl: wrote base log-probs %s (%s, compare_q mode, vocab 512): %d bytes", store, f, fi.Size()); !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	if code, stdout, stderr := runQPPL(t, "--version"); code != 0 || stdout != "qppl version "+version+"\n" || stderr != "" {
		t.Errorf("qppl --version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// Help is still help: stdout, exit 0, and a command run by an inner app
	// (plot, merge) titles its flags OPTIONS like every other command.
	for _, args := range [][]string{{}, {"--help"}, {"eval", "--help"}, {"plot", "--help"}, {"merge", "-h"}, {"help", "eval"}} {
		code, stdout, stderr := runQPPL(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "USAGE:") || strings.Contains(stdout, "GLOBAL OPTIONS") && len(args) > 0 && args[0] != "--help" {
			t.Errorf("qppl %s: exit %d, stderr %q, stdout %.200q", strings.Join(args, " "), code, stderr, stdout)
		}
	}
}
