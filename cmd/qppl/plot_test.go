package main

import (
	"testing"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/plots"
)

// The default subtitle describes only what the result set records: no
// "tokens, ? × 0 tokens" for compare_q's printed list, and the KL coverage
// note only on KLD charts.
func TestDefaultSubtitle(t *testing.T) {
	described := &suite.ResultSet{KLMode: "compare_q", Data: compare.DataSpec{Source: "/d/test.rows.jsonl", Ctx: 2048, Method: "compare_q"},
		Results: []compare.Result{{Windows: 20}}}
	list, err := suite.ParseResults([]byte(`[{"label": "EXL3 4.0bpw", "layer_bpw": 4, "head_bpw": 6, "vram_gb": 5, "ppl": 7.7, "kld": 0.01}]`), "cq.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rs   *suite.ResultSet
		y    plots.YAxis
		want string
	}{
		{described, plots.YPPL, "test.rows.jsonl, 20 × 2048 tokens"},
		{described, plots.YKLD, "test.rows.jsonl, 20 × 2048 tokens, KLD over the first 10 windows"},
		{list, plots.YPPL, ""},
		{list, plots.YKLD, "KLD over the first 10 windows"},
	} {
		if got := defaultSubtitle(c.rs, c.y); got != c.want {
			t.Errorf("y %s: %q, want %q", c.y, got, c.want)
		}
	}
}
