package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/plots"
)

// issue 11 item 13: eval JSON written without --label is plotted under its
// model directory's name, not the full path; result files from different
// data are refused unless --allow-mixed-data.
func TestPlotEvalJSON(t *testing.T) {
	model, tokens := evalFixture(t, 1, 120)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, c := range []struct {
		out, ctx string
	}{{a, "32"}, {b, "24"}} {
		if code, _, e := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", c.ctx, "--stride", "16", "--json", c.out); code != 0 {
			t.Fatalf("exit %d: %s", code, e)
		}
	}
	if got := plots.ResultLabel(compare.Result{Model: model}); got != "model" || strings.Contains(got, "/") {
		t.Errorf("label %q for model %s", got, model)
	}
	if got := plots.ResultLabel(compare.Result{Model: model, Label: "INT4 g128"}); got != "INT4 g128" {
		t.Errorf("label %q", got)
	}
	png := filepath.Join(dir, "p.png")
	code, stdout, stderr := runQPPL(t, "plot", "--out", png, a, b)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "evaluated on other data") || !strings.Contains(stderr, "--allow-mixed-data") {
		t.Errorf("mixed data: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Two files on the same data need distinct labels; the second model dir
	// gets its own short name.
	if code, _, e := runQPPL(t, "plot", "--out", png, "--allow-mixed-data", a); code != 0 {
		t.Errorf("one file: exit %d: %s", code, e)
	}
	if code, _, e := runQPPL(t, "plot", "--out", png, a, a); code != 2 || !strings.Contains(e, `label "model" appears in`) {
		t.Errorf("same data, same label: exit %d: %s", code, e)
	}
}

// issue 11 item 13: the demo's subtitle named its text file by absolute
// temporary path; a chart names data files by base name.
func TestSubtitleShortDataName(t *testing.T) {
	rs := &suite.ResultSet{DataSpec: &suite.DataSpec{DataFile: "/tmp/qppl-demo-123456/demo.txt"},
		Data: compare.DataSpec{Ctx: 256}, Results: []compare.Result{{Windows: 7, Ctx: 256}}}
	if got := defaultSubtitle(rs, plots.YKLD); got != "demo.txt, 7 × 256 tokens" {
		t.Errorf("subtitle %q", got)
	}
	rs = &suite.ResultSet{Data: compare.DataSpec{Source: "/data/tokens.i32", Ctx: 64}, Results: []compare.Result{{Windows: 2}}}
	if got := defaultSubtitle(rs, plots.YPPL); got != "tokens.i32, 2 × 64 tokens" {
		t.Errorf("subtitle %q", got)
	}
}
