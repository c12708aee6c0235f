package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/fixtures"
)

// cmpFixtures writes a base fixture (F32) and a "quantized" one (the same
// weights rounded to BF16), plus a text file, into dir.
func cmpFixtures(t *testing.T) (dir, base, bf16, text string) {
	t.Helper()
	dir = t.TempDir()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	base = filepath.Join(dir, "base")
	if err := fixtures.Write(base, o); err != nil {
		t.Fatal(err)
	}
	o.DType = checkpoint.BF16
	bf16 = filepath.Join(dir, "bf16")
	if err := fixtures.Write(bf16, o); err != nil {
		t.Fatal(err)
	}
	text = filepath.Join(dir, "text.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat(fixtures.DemoText(), 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, base, bf16, text
}

func cmpRun(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"qppl"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCompareEndToEnd(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	cache := filepath.Join(dir, "cache")
	res := filepath.Join(dir, "r.json")
	img := filepath.Join(dir, "r.png")
	args := []string{"compare", "--base", base, "--base-label", "F32 base", "--model", bf16, "--label", "BF16 rounded [red]",
		"--text", text, "--ctx", "32", "--stride", "16", "--rows", "4", "--cache-dir", cache, "--json", res, "--plot", img, "--y", "kld"}
	code, out, errs := cmpRun(t, dir, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if !strings.Contains(out, "F32 base") || !strings.Contains(out, "(base)") || !strings.Contains(errs, "BF16 rounded [red]: evaluating") {
		t.Errorf("stdout %s\nstderr %s", out, errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Base != "F32 base" || len(rs.Results) != 2 || rs.Results[0].KLD != nil || rs.Results[1].KLD == nil {
		t.Fatalf("result set %+v", rs)
	}
	b, q := rs.Results[0], rs.Results[1]
	// Identical token ids and windows for both; scored tokens = 4 × 31.
	if b.TokensHash != q.TokensHash || b.DataSpecHash != q.DataSpecHash || b.TokensScored != 124 || q.TokensScored != 124 || b.Windows != 4 {
		t.Errorf("data: base %+v quant %+v", b.Data, q.Data)
	}
	// BF16 rounding: a small, positive KL; PPL close to the base; bpw 16 vs 32.
	if k := q.KLD.Mean; !(k > 0 && k < 0.01) || q.KLD.Positions != 124 || q.BPWLayer != 16 || b.BPWLayer != 32 {
		t.Errorf("KLD %+v bpw %v/%v", q.KLD, q.BPWLayer, b.BPWLayer)
	}
	// The base's stored log-probs reproduce its PPL over the paired tokens.
	if d := q.KLD.BasePPL/b.PPL - 1; d > 1e-6 || d < -1e-6 {
		t.Errorf("base PPL from the store %v, base run %v", q.KLD.BasePPL, b.PPL)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	im, err := png.Decode(f)
	f.Close()
	if err != nil || im.Bounds().Dx() != 1728 {
		t.Errorf("plot: %v %v", err, im.Bounds())
	}

	// Second run: served from the cache, identical results (timing aside).
	code, _, errs = cmpRun(t, dir, args...)
	if code != 0 || strings.Count(errs, "cached result") != 2 || strings.Contains(errs, "evaluating") {
		t.Fatalf("cached run: exit %d stderr %s", code, errs)
	}
	rs2, _ := suite.LoadResults(res)
	a, _ := json.Marshal(rs)
	c, _ := json.Marshal(rs2)
	if !bytes.Equal(a, c) {
		t.Error("cached result set differs")
	}

	// --no-cache evaluates again: the same numbers, bit for bit (timing aside).
	code, _, errs = cmpRun(t, dir, append(args, "--no-cache", "--json", filepath.Join(dir, "again.json"))...)
	again, err := suite.LoadResults(filepath.Join(dir, "again.json"))
	if code != 0 || err != nil || strings.Count(errs, "evaluating") != 2 {
		t.Fatalf("--no-cache: exit %d %v %s", code, err, errs)
	}
	for i := range again.Results {
		x, y := again.Results[i], rs.Results[i]
		x.Timing, y.Timing = nil, nil
		a, _ := json.Marshal(x)
		b, _ := json.Marshal(y)
		if !bytes.Equal(a, b) {
			t.Errorf("re-evaluation of %s differs:\n%s\n%s", x.Label, a, b)
		}
	}

	// Gate against itself: pass (exit 0) with an all-ok table.
	code, out, errs = cmpRun(t, dir, append(args, "--baseline", res)...)
	if code != 0 || !strings.Contains(out, "regression gate") || strings.Contains(out, "REGRESSED") {
		t.Fatalf("gate pass: exit %d\n%s\n%s", code, out, errs)
	}
	// A baseline where the quantized model was better: exit 3 and a table.
	better := *rs
	better.Results = append([]compare.Result(nil), rs.Results...)
	k := *rs.Results[1].KLD
	k.Mean /= 2
	better.Results[1].KLD = &k
	better.Results[1].PPL *= 0.99
	bp := filepath.Join(dir, "better.json")
	if err := better.Write(bp); err != nil {
		t.Fatal(err)
	}
	code, out, errs = cmpRun(t, dir, append(args, "--baseline", bp)...)
	if code != exitRegressed || strings.Count(out, "REGRESSED") != 2 || !strings.Contains(errs, "regression gate failed") || !strings.Contains(errs, "2 figures regressed") {
		t.Fatalf("gate regression: exit %d\n%s\n%s", code, out, errs)
	}
	// Looser thresholds let it pass.
	code, _, _ = cmpRun(t, dir, append(args, "--baseline", bp, "--max-ppl-increase", "2%", "--max-kld-increase", "150%")...)
	if code != 0 {
		t.Errorf("loose gate: exit %d", code)
	}
	// A baseline model this run lacks fails the gate unless --allow-missing.
	ghost := *rs
	ghost.Results = append(append([]compare.Result(nil), rs.Results...), rs.Results[1])
	ghost.Results[2].Label = "Ghost W2"
	gp := filepath.Join(dir, "ghost.json")
	if err := ghost.Write(gp); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cmpRun(t, dir, append(args, "--baseline", gp)...); code != exitRegressed || !strings.Contains(out, "MISSING") {
		t.Errorf("missing model: exit %d\n%s", code, out)
	}
	if code, _, errs := cmpRun(t, dir, append(args, "--baseline", gp, "--allow-missing")...); code != 0 {
		t.Errorf("--allow-missing: exit %d %s", code, errs)
	}
	// A baseline on other data: exit 2 with a clear message.
	other := *rs
	other.TokensHash = strings.Repeat("0", 64)
	for i := range other.Results {
		other.Results = append([]compare.Result(nil), other.Results...)
		other.Results[i].TokensHash = other.TokensHash
	}
	op := filepath.Join(dir, "other.json")
	if err := other.Write(op); err != nil {
		t.Fatal(err)
	}
	code, _, errs = cmpRun(t, dir, append(args, "--baseline", op)...)
	if code != exitUsage || !strings.Contains(errs, "token stream") {
		t.Errorf("other data: exit %d %s", code, errs)
	}

	// Two result files with the same labels cannot share a chart.
	if code, _, errs := cmpRun(t, dir, "plot", res, res, "--out", filepath.Join(dir, "x.svg")); code != exitUsage || !strings.Contains(errs, "relabel one of them") {
		t.Errorf("duplicate labels: exit %d %s", code, errs)
	}
	// qppl plot on the result file, SVG, kld-dist.
	svg := filepath.Join(dir, "d.svg")
	code, _, errs = cmpRun(t, dir, "plot", res, "--out", svg, "--y", "kld-dist")
	data, _ := os.ReadFile(svg)
	if code != 0 || !bytes.Contains(data, []byte("BF16 rounded")) || !strings.Contains(errs, "F32 base: KL reference") ||
		!bytes.Contains(data, []byte(">base: KL divergence distribution per model<")) {
		t.Errorf("plot: exit %d %s", code, errs)
	}
}

func TestCompareKLDModeCompareQ(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	res := filepath.Join(dir, "r.json")
	// 4 windows < compare_q's 10 KL rows: KL over all 4, every position.
	code, out, errs := cmpRun(t, dir, "compare", "--base", base, "--model", bf16, "--label", "BF16 x", "--text", text,
		"--ctx", "32", "--stride", "16", "--rows", "4", "--kld-mode", "compare_q", "--cache-dir", filepath.Join(dir, "c"), "--json", res)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	k := rs.Results[1].KLD
	if rs.KLMode != "compare_q" || k == nil || k.Mode != "compare_q" || k.Rows != 4 || k.Positions != 4*32 {
		t.Fatalf("KLD %+v (kl mode %q)", k, rs.KLMode)
	}
	// --kld-rows 2 keys another base store and result.
	code, _, errs = cmpRun(t, dir, "compare", "--base", base, "--model", bf16, "--label", "BF16 x", "--text", text,
		"--ctx", "32", "--stride", "16", "--rows", "4", "--kld-mode", "compare_q", "--kld-rows", "2", "--cache-dir", filepath.Join(dir, "c"), "--json", res)
	rs, _ = suite.LoadResults(res)
	if code != 0 || strings.Contains(errs, "cached result") || rs.Results[1].KLD.Positions != 2*32 {
		t.Errorf("kld-rows 2: exit %d, %+v\n%s", code, rs.Results[1].KLD, errs)
	}
}

// TestCompareMatchesEval checks that compare's figures equal those of
// separate `qppl eval` runs (--save-logits on the base, --kld-base on the
// quantized model) on the same data: identical tokens, windows and numbers.
func TestCompareMatchesEval(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	res := filepath.Join(dir, "r.json")
	data := []string{"--text", text, "--ctx", "32", "--stride", "16", "--rows", "4"}
	code, out, errs := cmpRun(t, dir, append([]string{"compare", "--base", base, "--model", bf16, "--label", "BF16 x", "--cache-dir", filepath.Join(dir, "c"), "--json", res}, data...)...)
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "base.lp")
	be, qe := filepath.Join(dir, "base.json"), filepath.Join(dir, "q.json")
	if code, _, errs := cmpRun(t, dir, append([]string{"eval", "--model", base, "--save-logits", store, "--logits-format", "f32", "--json", be}, data...)...); code != 0 {
		t.Fatalf("eval base: exit %d %s", code, errs)
	}
	if code, _, errs := cmpRun(t, dir, append([]string{"eval", "--model", bf16, "--kld-base", store, "--json", qe}, data...)...); code != 0 {
		t.Fatalf("eval quant: exit %d %s", code, errs)
	}
	for i, p := range []string{be, qe} {
		ev, err := suite.LoadResults(p)
		if err != nil {
			t.Fatal(err)
		}
		e, c := ev.Results[0], rs.Results[i]
		if e.TokensHash != c.TokensHash || e.DataSpecHash != c.DataSpecHash || e.PPL != c.PPL || e.NLLMean != c.NLLMean || e.TokensScored != c.TokensScored {
			t.Errorf("model %d: eval PPL %v (%s/%s), compare %v (%s/%s)", i, e.PPL, e.TokensHash[:8], e.DataSpecHash[:8], c.PPL, c.TokensHash[:8], c.DataSpecHash[:8])
		}
		if i == 1 && (e.KLD == nil || c.KLD == nil || e.KLD.Mean != c.KLD.Mean || e.KLD.Percentiles != c.KLD.Percentiles || e.KLD.SameTop != c.KLD.SameTop) {
			t.Errorf("KLD: eval %+v, compare %+v", e.KLD, c.KLD)
		}
	}
}

// TestCompareKLDBase compares against an existing base store (compare_q's
// -lf): the same KL statistics as a run with the base model.
func TestCompareKLDBase(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	data := []string{"--text", text, "--ctx", "32", "--stride", "16", "--rows", "4"}
	store := filepath.Join(dir, "base.lp")
	if code, _, errs := cmpRun(t, dir, append([]string{"eval", "--model", base, "--save-logits", store, "--logits-format", "f32"}, data...)...); code != 0 {
		t.Fatalf("eval base: exit %d %s", code, errs)
	}
	withBase, ext := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if code, _, errs := cmpRun(t, dir, append([]string{"compare", "--base", base, "--model", bf16, "--label", "Q", "--cache-dir", filepath.Join(dir, "c1"), "--json", withBase}, data...)...); code != 0 {
		t.Fatalf("compare with base: exit %d %s", code, errs)
	}
	code, _, errs := cmpRun(t, dir, append([]string{"compare", "--kld-base", store, "--model", bf16, "--label", "Q", "--cache-dir", filepath.Join(dir, "c2"), "--json", ext}, data...)...)
	if code != 0 {
		t.Fatalf("compare --kld-base: exit %d %s", code, errs)
	}
	a, _ := suite.LoadResults(withBase)
	b, _ := suite.LoadResults(ext)
	qa, qb := a.Results[1], b.Results[0]
	if b.Base != "" || len(b.Results) != 1 || qb.KLD == nil || qa.KLD.Mean != qb.KLD.Mean || qa.KLD.Percentiles != qb.KLD.Percentiles || qa.PPL != qb.PPL {
		t.Errorf("--kld-base KLD %+v, with base %+v", qb.KLD, qa.KLD)
	}
	// A store for other data is refused before evaluating.
	code, _, errs = cmpRun(t, dir, "compare", "--kld-base", store, "--model", bf16, "--text", text, "--ctx", "32", "--stride", "8", "--rows", "4", "--cache-dir", filepath.Join(dir, "c2"))
	if code != exitUsage || !strings.Contains(errs, "was made for data spec") {
		t.Errorf("other data: exit %d %s", code, errs)
	}
	code, _, errs = cmpRun(t, dir, append([]string{"compare", "--kld-base", store, "--base", base, "--model", bf16}, data...)...)
	if code != exitUsage || !strings.Contains(errs, "give one") {
		t.Errorf("both bases: exit %d %s", code, errs)
	}
	// Refused before anything was prepared: no cache in the working directory.
	if _, err := os.Stat(".qppl-cache"); err == nil {
		t.Error("a refused command created .qppl-cache in the working directory")
	}
}

func TestCompareSpecFiles(t *testing.T) {
	dir, base, bf16, text := cmpFixtures(t)
	ds := filepath.Join(dir, "data.json")
	os.WriteFile(ds, []byte(`{"tokenize_fn": "transformers", "tokenizer_dir": "`+base+`", "dataset": "demo", "data_file": "`+text+`", "eval_stride": 16, "eval_len": 32, "max_rows": 3}`), 0o644)
	ms := filepath.Join(dir, "models.json")
	os.WriteFile(ms, []byte(`[
		{"model_dir": "`+bf16+`", "load_fn": "exllamav3", "fwd_fn": "exllamav3", "label": "BF16 weights", "override_bpw_layer": 15.5},
		{"model_dir": "`+base+`", "load_fn": "transformers_auto", "fwd_fn": "transformers", "label": "FP32", "out_logits": "`+filepath.Join(dir, "logits")+`"}
	]`), 0o644)
	res := filepath.Join(dir, "r.json")
	code, out, errs := cmpRun(t, dir, "compare", "-d", ds, "-m", ms, "--cache-dir", filepath.Join(dir, "c"), "--json", res)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, `load_fn "exllamav3" is not a Hugging Face loader`) {
		t.Errorf("no loader warning: %s", errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	// --mask selects the models to run, as compare_q's -mask; the base stays.
	code, out, errs = cmpRun(t, dir, "compare", "-d", ds, "-m", ms, "--cache-dir", filepath.Join(dir, "c"), "--mask", "nothing-matches", "--json", filepath.Join(dir, "m.json"))
	if m, err := suite.LoadResults(filepath.Join(dir, "m.json")); code != 0 || err != nil || len(m.Results) != 1 || m.Results[0].Label != "FP32" {
		t.Errorf("mask: exit %d %v %s", code, err, errs)
	}
	// The out_logits model runs first; its store lives in out_logits.
	if rs.Base != "FP32" || rs.Results[0].Label != "FP32" || rs.Results[1].BPWLayer != 15.5 || rs.DataSpec == nil || rs.DataSpec.MaxRows != 3 {
		t.Errorf("result set %+v", rs)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "logits", "*.qlp")); len(m) != 1 {
		t.Errorf("base store in out_logits: %v", m)
	}
	// Unsupported compare_q features and bad input are usage errors.
	chat := filepath.Join(dir, "chat.json")
	os.WriteFile(chat, []byte(`{"tokenize_fn": "transformers", "tokenizer_dir": "x", "dataset": "wiki2", "eval_stride": 2048, "eval_len": 2048, "max_rows": 30, "chat_template": true, "warmup_tokens": 128}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "-d", chat, "-m", ms}, "chat_template is unsupported"},
		{[]string{"compare", "-d", ds, "-m", ms, "--ctx", "64"}, "--ctx cannot be combined with --data-spec"},
		{[]string{"compare", "--model", base}, "give the data"},
		{[]string{"compare", "--text", text}, "no models"},
		{[]string{"compare", "--text", text, "--model", base, "--label", "a", "--label", "b"}, "2 --label values for 1 --model"},
		{[]string{"compare", "--text", text, "--model", base, "--plot", "x.gif"}, "unsupported extension"},
		{[]string{"compare", "--text", text, "--model", base, "--max-kld-increase", "lots"}, "--max-kld-increase"},
		{[]string{"compare", "--text", text, "--model", base, "--baseline", filepath.Join(dir, "nope.json")}, "nope.json"},
		{[]string{"plot", "--out", "x.png"}, "at least one results file"},
		{[]string{"plot", res, "--out", "x.png", "--y", "nll"}, "--y"},
	} {
		code, _, errs := cmpRun(t, dir, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
