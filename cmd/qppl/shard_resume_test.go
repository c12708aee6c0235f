package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qppl/qppl/journal"
)

// Shards evaluated into their own run directories and merged give the
// unsharded run's JSON and per-token NLL file bit for bit, for a PPL run
// and for a KL run against a base store.
func TestShardMergeBitIdentical(t *testing.T) {
	base, tokens := evalFixture(t, 1, 150)
	other, _ := evalFixture(t, 2, 10)
	dir := t.TempDir()
	common := []string{"--tokens", tokens, "--ctx", "24", "--stride", "7"}
	store := filepath.Join(dir, "base.u16")
	mustRun(t, append([]string{"eval", "--model", base, "--save-logits", store}, common...)...)

	for _, tc := range []struct {
		name  string
		model string
		extra []string
		n     int
	}{
		{"ppl", base, nil, 3},
		{"kld", other, []string{"--kld-base", store}, 4},
		{"rows", other, []string{"--rows", "5", "--label", "Q4 test"}, 2},
	} {
		d := filepath.Join(dir, tc.name)
		args := append(append([]string{"eval", "--model", tc.model}, common...), tc.extra...)
		whole, wholeNLL := filepath.Join(d, "whole.json"), filepath.Join(d, "whole.f64")
		mustRun(t, append(args, "--run-dir", filepath.Join(d, "whole"), "--json", whole, "--nll-out", wholeNLL)...)
		var dirs []string
		for i := tc.n - 1; i >= 0; i-- { // any order
			sd := filepath.Join(d, fmt.Sprintf("shard%d", i))
			out := mustRun(t, append(args, "--run-dir", sd, "--shard", fmt.Sprintf("%d/%d", i, tc.n))...)
			if !strings.Contains(out, fmt.Sprintf("shard %d/%d: ", i, tc.n)) {
				t.Errorf("%s: shard output %q", tc.name, out)
			}
			dirs = append(dirs, sd)
		}
		merged, mergedNLL := filepath.Join(d, "merged.json"), filepath.Join(d, "merged.f64")
		mustRun(t, append(append([]string{"merge"}, dirs...), "--json", merged, "--nll-out", mergedNLL)...)
		want := resultNoTimingOpt(t, whole)
		if got := resultNoTimingOpt(t, merged); !bytes.Equal(got, want) {
			t.Errorf("%s: merged result differs:\n%s\n%s", tc.name, got, want)
		}
		a, _ := os.ReadFile(wholeNLL)
		b, _ := os.ReadFile(mergedNLL)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: merged --nll-out differs (%d vs %d bytes)", tc.name, len(a), len(b))
		}
		if tc.name == "kld" && !bytes.Contains(want, []byte(`"kld": {`)) {
			t.Errorf("kld run without kld statistics: %s", want)
		}
		// Merging the unsharded run directory alone gives the same result.
		single := filepath.Join(d, "single.json")
		mustRun(t, "merge", filepath.Join(d, "whole"), "--json", single)
		if got := resultNoTimingOpt(t, single); !bytes.Equal(got, want) {
			t.Errorf("%s: merge of the whole run differs", tc.name)
		}
	}
}

// resultNoTimingOpt is the result file's bytes with the "timing" object
// (eval writes one, merge does not) cut out.
func resultNoTimingOpt(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return timingRE.ReplaceAll(b, nil)
}

var timingRE = regexp.MustCompile(`,\n  "timing": \{[^}]*\}`)

// merge refuses sets of run directories that are not one complete run.
func TestMergeErrors(t *testing.T) {
	model, tokens := evalFixture(t, 1, 100)
	other, _ := evalFixture(t, 2, 10)
	dir := t.TempDir()
	shard := func(name, model, sh string, extra ...string) string {
		sd := filepath.Join(dir, name)
		mustRun(t, append([]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "8", "--run-dir", sd, "--shard", sh}, extra...)...)
		return sd
	}
	s0, s1, s2 := shard("s0", model, "0/3"), shard("s1", model, "1/3"), shard("s2", model, "2/3")
	o1 := shard("o1", other, "1/3")
	c1 := shard("c1", model, "1/3", "--ctx", "20")
	h0 := shard("h0", model, "0/2")

	// An unfinished shard: its journal cut after its first two windows.
	u2 := filepath.Join(dir, "u2")
	os.MkdirAll(u2, 0o755)
	c, err := journal.Read(journalPath(s2))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(journalPath(u2), c.Identity)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Records[:2] {
		j.Append(r)
	}
	j.Close()
	// A journal holding one window twice.
	d2 := filepath.Join(dir, "d2")
	os.MkdirAll(d2, 0o755)
	j, _, _ = journal.Open(journalPath(d2), c.Identity)
	j.Append(c.Records[0])
	j.Append(c.Records[0])
	j.Close()
	// A corrupt journal: a checksum broken before the last record.
	x2 := filepath.Join(dir, "x2")
	os.MkdirAll(x2, 0o755)
	jb, _ := os.ReadFile(journalPath(s2))
	jb[len(jb)-30-len(c.Records[len(c.Records)-1])] ^= 0xff
	os.WriteFile(journalPath(x2), jb, 0o644)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)

	// 100 tokens, ctx 16, stride 8: windows 0 … 10; shard 2/3 has 2, 5, 8.
	tests := []struct {
		dirs []string
		want string
	}{
		{nil, "qppl: merge: give the run directories of the shards (qppl merge DIR... [--json OUT])"},
		{[]string{s0, s2}, "qppl: merge: shard 1/3 missing (have 0/3, 2/3)"},
		{[]string{s0, s1, s1, s2}, "qppl: merge: shard 1/3 given twice: " + s1 + " and " + s1},
		{[]string{s0, o1, s2}, "qppl: merge: " + s0 + " and " + o1 + " are not shards of the same run (model: "},
		{[]string{s0, c1, s2}, "qppl: merge: " + s0 + " and " + c1 + " are not shards of the same run (data.ctx: 16 in " + s0 + ", 20 in " + c1},
		{[]string{s0, h0}, "qppl: merge: " + s0 + " is shard 0/3, " + h0 + " is shard 0/2: all shards must split the run the same way"},
		{[]string{s0, s1, u2}, "qppl: merge: shard 2/3 in " + u2 + " is not finished (window 8 and 0 more missing): resume it with its eval command, then merge again"},
		{[]string{s0, s1, d2}, "qppl: merge: " + journalPath(d2) + ": window 2 is journaled twice"},
		{[]string{s0, s1, x2}, "qppl: merge: journal: corrupt: " + journalPath(x2) + ": checksum mismatch in record at byte "},
		{[]string{s0, s1, empty}, "qppl: merge: " + empty + " is not a run directory (no journal.qppl): "},
	}
	for _, tc := range tests {
		code, _, stderr := runQPPL(t, append([]string{"merge"}, tc.dirs...)...)
		if code != 2 || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("merge %v: exit %d\n got %q\nwant %q", tc.dirs, code, stderr, tc.want)
		}
	}
}

// Flag combinations of --shard and --run-dir that cannot work.
func TestShardUsageErrors(t *testing.T) {
	model, tokens := evalFixture(t, 1, 60)
	rd := filepath.Join(t.TempDir(), "r")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "1/2"}, "qppl: eval: --shard needs --run-dir DIR (the shard's windows are journaled there and combined by qppl merge)\n"},
		{[]string{"--shard", "2/2", "--run-dir", rd}, "qppl: eval: --shard \"2/2\": want I/N with 0 <= I < N, e.g. 0/4\n"},
		{[]string{"--shard", "1/2", "--run-dir", rd, "--json", "x.json"}, "qppl: eval: a shard holds only part of the windows: write --json/--nll-out with qppl merge DIR... once every shard is done\n"},
		{[]string{"--run-dir", rd, "--save-logits", "b.u16"}, "qppl: eval: --save-logits runs cannot be resumed: run the base model without --run-dir\n"},
	}
	for _, tc := range tests {
		code, _, stderr := runQPPL(t, append([]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16"}, tc.args...)...)
		if code != 2 || stderr != tc.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", tc.args, code, stderr, tc.want)
		}
	}
}
