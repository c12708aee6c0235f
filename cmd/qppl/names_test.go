package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Issue 11 item 11: one name per concept in the help. The bootstrap seed
// is --bootstrap-seed (--seed seeds weights and calibration in fixture and
// quantize); compare's KL coverage and base store encoding have one name
// each. The old names still work, hidden.
func TestHelpShowsOneNamePerConcept(t *testing.T) {
	cases := []struct {
		cmd          string
		want, absent []string
	}{
		{"eval", []string{"--bootstrap-seed value"}, []string{"--seed value", " --seed,", "--seed "}},
		{"compare", []string{"--kld-mode value", "--logits-format value"}, []string{"kl-mode", "base-encoding"}},
		{"fixture", []string{"--seed value", "(default: 1)"}, nil},
		{"quantize", []string{"--seed value", "(default: 1)"}, nil},
	}
	for _, c := range cases {
		code, stdout, stderr := runQPPL(t, c.cmd, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", c.cmd, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s --help lacks %q:\n%s", c.cmd, w, stdout)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(stdout, a) {
				t.Errorf("%s --help shows %q:\n%s", c.cmd, a, stdout)
			}
		}
	}
}

// The deprecated --seed of eval gives byte-identical results to
// --bootstrap-seed, the seed is used (another seed, another interval), and
// giving both names is a usage error.
func TestEvalBootstrapSeedRename(t *testing.T) {
	model, tokens := evalFixture(t, 3, 200)
	dir := t.TempDir()
	evalJSON := func(name string, args ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, name)
		a := append([]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--bootstrap", "100", "--json", out}, args...)
		code, _, stderr := runQPPL(t, a...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	newName := evalJSON("new.json", "--bootstrap-seed", "7")
	oldName := evalJSON("old.json", "--seed", "7")
	if !sameUntimed(t, newName, oldName) {
		t.Errorf("--bootstrap-seed 7 and --seed 7 differ:\n%s\n%s", newName, oldName)
	}
	r, _ := readResult(t, filepath.Join(dir, "new.json"))
	if r.PPLBootstrap == nil || r.PPLBootstrap.Seed != 7 || !bytes.Contains(newName, []byte(`"seed": 7`)) {
		t.Fatalf("--bootstrap-seed 7: interval %+v", r.PPLBootstrap)
	}
	evalJSON("default.json")
	d, _ := readResult(t, filepath.Join(dir, "default.json"))
	if d.PPLBootstrap == nil || d.PPLBootstrap.Seed != 0 || r.PPLBootstrap.Lo == d.PPLBootstrap.Lo && r.PPLBootstrap.Hi == d.PPLBootstrap.Hi {
		t.Errorf("seed 7 interval %+v, default interval %+v: the seed is not used", r.PPLBootstrap, d.PPLBootstrap)
	}
	code, stdout, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--seed", "1", "--bootstrap-seed", "2")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "eval: --seed is the old name of --bootstrap-seed: give one of them") {
		t.Errorf("--seed with --bootstrap-seed: exit %d: %s%s", code, stdout, stderr)
	}
}

// compare's old --kl-mode and --base-encoding give the same run as
// --kld-mode and --logits-format; both names at once are refused.
func TestCompareOldFlagNames(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	common := []string{"compare", "--base", base, "--model", bf16, "--label", "BF16 x", "--text", text, "--ctx", "32", "--stride", "16", "--rows", "4"}
	runJSON := func(name string, args ...string) ([]byte, string) {
		t.Helper()
		res := filepath.Join(dir, name+".json")
		a := append(append(append([]string{}, common...), "--cache-dir", filepath.Join(dir, name), "--json", res), args...)
		code, out, errs := cmpRun(t, dir, a...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errs)
		}
		b, err := os.ReadFile(res)
		if err != nil {
			t.Fatal(err)
		}
		return b, errs
	}
	newJSON, newErr := runJSON("new", "--kld-mode", "compare_q", "--logits-format", "u16")
	oldJSON, oldErr := runJSON("old", "--kl-mode", "compare_q", "--base-encoding", "u16")
	if !sameUntimed(t, newJSON, oldJSON) {
		t.Errorf("old names give another result:\n%s\n%s", newJSON, oldJSON)
	}
	if !bytes.Contains(newJSON, []byte(`"kl_mode": "compare_q"`)) {
		t.Errorf("--kld-mode compare_q not applied:\n%s", newJSON)
	}
	// The store's size line shows the encoding: u16 (2·vocab+8 bytes a
	// position), not the default f32.
	_, f32Err := runJSON("f32", "--kld-mode", "compare_q")
	storeLine := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "base log-prob store") {
				l, _, _ = strings.Cut(l, " → ") // the path names the cache directory
				return l
			}
		}
		return ""
	}
	if l := storeLine(newErr); l == "" || l != storeLine(oldErr) || l == storeLine(f32Err) {
		t.Errorf("base store lines: --logits-format u16 %q, --base-encoding u16 %q, f32 %q", l, storeLine(oldErr), storeLine(f32Err))
	}
	for _, c := range [][]string{
		{"--kld-mode", "scored", "--kl-mode", "scored", "compare: --kl-mode is the old name of --kld-mode"},
		{"--logits-format", "f32", "--base-encoding", "f64", "compare: --base-encoding is the old name of --logits-format"},
	} {
		a := append(append(append([]string{}, common...), "--cache-dir", filepath.Join(dir, "both")), c[:4]...)
		code, stdout, stderr := cmpRun(t, dir, a...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, c[4]) {
			t.Errorf("%v: exit %d: %s%s", c[:4], code, stdout, stderr)
		}
	}
}

// verify windows are as long as eval's and compare's by default.
func TestVerifyDefaultCtx(t *testing.T) {
	def := func(cmd *cli.Command) int {
		for _, f := range cmd.Flags {
			if f, ok := f.(*cli.IntFlag); ok && f.Name == "ctx" {
				return f.Value
			}
		}
		t.Fatalf("%s has no --ctx", cmd.Name)
		return 0
	}
	v, e, c := def(newVerifyCmd()), def(newEvalCmd()), def(newCompareCmd())
	if v != 2048 || v != e || v != c {
		t.Errorf("--ctx defaults: verify %d, eval %d, compare %d; want 2048 in each", v, e, c)
	}
}

// sameUntimed reports whether two result JSON files are equal but for
// their "timing" objects (wall-clock seconds and speed).
func sameUntimed(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(dropTiming(va), dropTiming(vb))
}

func dropTiming(v any) any {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "timing")
		for k, x := range v {
			v[k] = dropTiming(x)
		}
	case []any:
		for i, x := range v {
			v[i] = dropTiming(x)
		}
	}
	return v
}

// Without --ctx, verify scores one window of 2048 tokens (2047 targets).
func TestVerifyDefaultCtxRun(t *testing.T) {
	model, _ := evalFixture(t, 9, 8)
	code, stdout, stderr := runQPPL(t, "verify", "--model", model, "--backends", "reference,reference", "--rows", "1", "--probe-windows", "0", "--json", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct{ Windows, Tokens int }
	if err := json.Unmarshal([]byte(stdout[strings.Index(stdout, "{"):]), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rep.Windows != 1 || rep.Tokens != 2047 {
		t.Errorf("verify default window: %d windows, %d tokens; want 1 window of 2047 scored tokens (--ctx 2048)", rep.Windows, rep.Tokens)
	}
}
