package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
)

// issue 11 item 5: --bootstrap 0 is off (it meant 1000), fewer than 100
// resamples or more than the documented maximum are usage errors, and the
// help says so.
func TestEvalBootstrapFlag(t *testing.T) {
	model, tokens := evalFixture(t, 1, 100)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	common := []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "24", "--stride", "8"}
	if code, _, e := runQPPL(t, append(common, "--bootstrap", "0", "--json", out)...); code != 0 {
		t.Fatalf("--bootstrap 0: exit %d: %s", code, e)
	}
	if _, m := readResult(t, out); m["ppl_bootstrap"] != nil {
		t.Errorf("--bootstrap 0 wrote an interval: %v", m["ppl_bootstrap"])
	}
	if code, _, e := runQPPL(t, append(common, "--bootstrap", "100", "--json", out)...); code != 0 {
		t.Fatalf("--bootstrap 100: exit %d: %s", code, e)
	}
	if r, _ := readResult(t, out); r.PPLBootstrap == nil || r.PPLBootstrap.Samples != 100 || !(r.PPLBootstrap.Lo < r.PPLBootstrap.Hi) {
		t.Errorf("--bootstrap 100: %+v", r.PPLBootstrap)
	}
	for _, n := range []string{"1", "99", "100000001", fmt.Sprint(compare.MaxBootstrap + 1)} {
		code, stdout, e := runQPPL(t, append(common, "--bootstrap", n)...)
		if code != 2 || stdout != "" || !strings.Contains(e, "--bootstrap "+n) {
			t.Errorf("--bootstrap %s: exit %d, stdout %q, stderr %q", n, code, stdout, e)
		}
	}
	_, help, _ := runQPPL(t, "eval", "--help")
	if !strings.Contains(help, "0 = off") || !strings.Contains(help, fmt.Sprint(compare.MaxBootstrap)) || strings.Contains(help, "negative: off") {
		t.Errorf("eval --help on --bootstrap:\n%s", help)
	}
}
