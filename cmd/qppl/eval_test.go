package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
)

// evalFixture writes a small llama fixture (seed) and a token file of n ids.
func evalFixture(t *testing.T, seed uint64, n int) (model, tokens string) {
	t.Helper()
	dir := t.TempDir()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = seed
	model = filepath.Join(dir, "model")
	if err := fixtures.Write(model, o); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i*i*7 + 3*i + 1) % o.Vocab)
	}
	tokens = filepath.Join(dir, "tokens.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	return model, tokens
}

func runQPPL(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"qppl"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func readResult(t *testing.T, path string) (compare.Result, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r compare.Result
	var m map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &m)
	return r, m
}

func TestEvalTokensEndToEnd(t *testing.T) {
	model, tokens := evalFixture(t, 1, 130)
	dir := t.TempDir()
	out, nll := filepath.Join(dir, "r.json"), filepath.Join(dir, "nll.f64")
	code, stdout, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "32", "--stride", "16", "--json", out, "--nll-out", nll, "--label", "F32 base")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r, m := readResult(t, out)
	// range(0, 130-32, 16) = 0, 16, …, 96: 7 windows of 31 targets.
	if r.Windows != 7 || r.TokensScored != 7*31 || r.Method != "compare_q" || r.Ctx != 32 || r.Stride != 16 || r.Backend != "reference" || r.Label != "F32 base" {
		t.Errorf("result %+v", r)
	}
	for _, k := range []string{"ppl", "nll_mean", "tokens_scored", "windows", "ctx", "stride", "method", "model", "backend", "bpw_layer", "bpw_head", "vram_gb", "data_spec_hash", "tokens_hash"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if r.BPWLayer != 32 {
		t.Errorf("bpw_layer %v, want 32 for an F32 fixture", r.BPWLayer)
	}
	// --nll-out holds every scored token; PPL is exp of their mean.
	b, err := os.ReadFile(nll)
	if err != nil || len(b) != 8*7*31 {
		t.Fatalf("nll-out: %d bytes, %v", len(b), err)
	}
	var s float64
	for i := 0; i < len(b); i += 8 {
		s += math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
	}
	if d := math.Abs(math.Exp(s/217) - r.PPL); d > 1e-12*r.PPL || !(r.PPL > 1) {
		t.Errorf("ppl %v vs exp(mean nll-out) %v", r.PPL, math.Exp(s/217))
	}
	for _, want := range []string{"PPL", "mean NLL", "7 windows, 217 tokens", "tokens/s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

// Two runs give byte-identical JSON once the timing object is removed.
func TestEvalDeterministic(t *testing.T) {
	model, tokens := evalFixture(t, 1, 100)
	dir := t.TempDir()
	var js [2][]byte
	for i := range js {
		p := filepath.Join(dir, "r.json")
		if code, _, e := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "24", "--stride", "8", "--json", p); code != 0 {
			t.Fatalf("exit %d: %s", code, e)
		}
		_, m := readResult(t, p)
		delete(m, "timing")
		js[i], _ = json.Marshal(m)
	}
	if !bytes.Equal(js[0], js[1]) {
		t.Errorf("runs differ:\n%s\n%s", js[0], js[1])
	}
}

func TestEvalUsageErrors(t *testing.T) {
	model, tokens := evalFixture(t, 1, 100)
	bad := filepath.Join(t.TempDir(), "bad.i32")
	dataset.WriteTokens(bad, []int32{1, 2, 600, 3})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--tokens", bad, "--ctx", "2", "--stride", "1"}, "token 600 (position 2) is outside the model's vocabulary [0, 512)"},
		{[]string{"--tokens", tokens, "--ctx", "100", "--stride", "8"}, "ctx 100 needs more than 100 tokens, but the token stream has 100"},
		{[]string{"--tokens", tokens, "--ctx", "16", "--stride", "0"}, "--stride 0"},
		{[]string{"--tokens", tokens, "--ctx", "16", "--stride", "8", "--rows", "50"}, "rows 50 is beyond the token stream"},
		{[]string{"--tokens", tokens, "--text", tokens}, "exactly one of"},
		{[]string{"--tokens", tokens, "--method", "bogus"}, `unknown method "bogus"`},
		{[]string{"--tokens", tokens, "--ctx", "16", "--backend", "nope"}, `unknown backend "nope"`},
		{[]string{"--tokens", tokens, "--ctx", "16", "--kld-base", filepath.Join(t.TempDir(), "missing")}, "opening base log-probs"},
	}
	for _, tc := range tests {
		code, _, stderr := runQPPL(t, append([]string{"eval", "--model", model}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, _ := runQPPL(t, "eval", "--model", filepath.Join(t.TempDir(), "none"), "--tokens", tokens); code != 2 {
		t.Errorf("missing model: exit %d", code)
	}
}

// --text goes through the model's tokenizer.json with BOS added once.
func TestEvalText(t *testing.T) {
	model, _ := evalFixture(t, 1, 10)
	txt := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(txt, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)), 0o644)
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runQPPL(t, "eval", "--model", model, "--text", txt, "--ctx", "64", "--stride", "32", "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r, _ := readResult(t, out)
	if r.Data.NumTokens < 65 || r.Data.Tokenizer == "" || r.Windows < 1 {
		t.Errorf("data %+v windows %d", r.Data, r.Windows)
	}

	// --method llamacpp reads the text as llama-perplexity -f does: one
	// trailing "\n" dropped, so FILE and FILE+"\n" give one token stream.
	var hashes []string
	for i, s := range []string{"", "\n"} {
		p := filepath.Join(t.TempDir(), "t.txt")
		os.WriteFile(p, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog.\n", 8)+"The end."+s), 0o644)
		out := filepath.Join(t.TempDir(), "l.json")
		if code, _, stderr := runQPPL(t, "eval", "--model", model, "--text", p, "--method", "llamacpp", "--ctx", "16", "--bootstrap", "-1", "--json", out); code != 0 {
			t.Fatalf("llamacpp %d: exit %d: %s", i, code, stderr)
		}
		r, _ := readResult(t, out)
		hashes = append(hashes, r.Data.TokensHash)
	}
	if hashes[0] != hashes[1] {
		t.Errorf("llamacpp: a trailing newline changed the token stream (%s, %s)", hashes[0], hashes[1])
	}
}

// Base run with --save-logits, then KL of the same model (exactly 0 with
// lossless f64) and of another model, a llama.cpp-format base file, the
// compare_q variant, token dumps, and a stale base refused.
func TestEvalKLD(t *testing.T) {
	base, tokens := evalFixture(t, 1, 140)
	other, _ := evalFixture(t, 2, 10)
	dir := t.TempDir()
	common := []string{"--tokens", tokens, "--ctx", "32", "--stride", "16"}
	eval := func(model string, extra ...string) compare.Result {
		t.Helper()
		out := filepath.Join(dir, "r.json")
		args := append(append([]string{"eval", "--model", model}, common...), extra...)
		code, _, stderr := runQPPL(t, append(args, "--json", out)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		r, _ := readResult(t, out)
		return r
	}
	f64 := filepath.Join(dir, "base.f64.logp")
	b := eval(base, "--save-logits", f64, "--logits-format", "f64")
	self := eval(base, "--kld-base", f64)
	k := self.KLD
	if k == nil || k.Mean != 0 || k.Percentiles.Max != 0 || k.SameTop != 1 || k.PPLRatio != 1 || k.Positions != self.TokensScored || k.BaseFormat != "f64" {
		t.Fatalf("self KLD %+v", k)
	}
	if k.BasePPL != b.PPL || self.PPL != b.PPL {
		t.Errorf("base PPL %v / %v vs %v", k.BasePPL, self.PPL, b.PPL)
	}
	q := eval(other, "--kld-base", f64, "--tokens-out", filepath.Join(dir, "tok.csv"))
	if q.KLD == nil || !(q.KLD.Mean > 0) || q.KLD.Mode != "scored" || len(q.KLD.TopK) != 1 || q.KLD.TopK[0].K != 5 {
		t.Fatalf("other KLD %+v", q.KLD)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "tok.csv"))
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if lines[0] != "window,pos,token,nll,kld,top1,base_top1,base_nll" || int64(len(lines)-1) != q.TokensScored {
		t.Errorf("csv: %q, %d lines", lines[0], len(lines))
	}
	// u16 base: KLD close to the lossless one.
	u16 := filepath.Join(dir, "base.u16.logp")
	eval(base, "--save-logits", u16, "--logits-format", "u16") // f32 is the default (issue 11 item 4)
	qu := eval(other, "--kld-base", u16)
	if d := math.Abs(qu.KLD.Mean - q.KLD.Mean); d > 1e-3 || qu.KLD.BaseFormat != "u16" {
		t.Errorf("u16 KLD %v vs f64 %v", qu.KLD.Mean, q.KLD.Mean)
	}
	// compare_q variant: first 3 rows, every position.
	cq := filepath.Join(dir, "base.cq.logp")
	eval(base, "--save-logits", cq, "--kld-all-positions", "--kld-rows", "3", "--logits-format", "f64")
	qc := eval(other, "--kld-base", cq, "--tokens-out", filepath.Join(dir, "tok.jsonl"))
	if qc.KLD.Mode != "compare_q" || qc.KLD.Rows != 3 || qc.KLD.Positions != 3*32 || qc.KLD.PairedTokens != 3*31 {
		t.Errorf("compare_q KLD %+v", qc.KLD)
	}
	// A base for other data is refused.
	code, _, stderr := runQPPL(t, "eval", "--model", other, "--tokens", tokens, "--ctx", "32", "--stride", "16", "--rows", "2", "--kld-base", f64)
	if code != 2 || !strings.Contains(stderr, "stale or mismatched") {
		t.Errorf("stale base: exit %d %s", code, stderr)
	}
	// llama.cpp's file format (method llamacpp).
	lc := filepath.Join(dir, "base.kld")
	lcArgs := []string{"--tokens", tokens, "--method", "llamacpp", "--ctx", "32"}
	if code, _, e := runQPPL(t, append([]string{"eval", "--model", base, "--save-logits", lc, "--logits-format", "llamacpp"}, lcArgs...)...); code != 0 {
		t.Fatalf("llamacpp save: %s", e)
	}
	raw, _ := os.ReadFile(lc)
	if string(raw[:8]) != "_logits_" {
		t.Errorf("not a llama.cpp file: %q", raw[:8])
	}
	out := filepath.Join(dir, "lc.json")
	if code, _, e := runQPPL(t, append([]string{"eval", "--model", other, "--kld-base", lc, "--json", out}, lcArgs...)...); code != 0 {
		t.Fatalf("llamacpp kld: %s", e)
	}
	r, _ := readResult(t, out)
	// 140/32 = 4 chunks × (32-1-16) = 15 scored.
	if r.TokensScored != 60 || r.KLD == nil || r.KLD.Positions != 60 || r.KLD.BaseFormat != "llamacpp-u16" {
		t.Errorf("llamacpp: tokens %d KLD %+v", r.TokensScored, r.KLD)
	}
}

// --dataset wikitext2 --data FILE with every method; lm-eval's metrics
// follow from the pooled NLL and the documents' word and byte counts.
func TestEvalDatasetMethods(t *testing.T) {
	model, _ := evalFixture(t, 1, 10)
	dir := t.TempDir()
	var rows []string
	for a := 0; a < 3; a++ {
		rows = append(rows, fmt.Sprintf(" = Article %d = \n", a), "")
		for p := 0; p < 4; p++ {
			rows = append(rows, fmt.Sprintf(" Paragraph %d of article %d has some words , and @-@ marks . \n", p, a), "")
		}
	}
	var jl strings.Builder
	for _, r := range rows {
		b, _ := json.Marshal(map[string]string{"text": r})
		jl.Write(b)
		jl.WriteByte('\n')
	}
	data := filepath.Join(dir, "test.rows.jsonl")
	os.WriteFile(data, []byte(jl.String()), 0o644)
	docs := dataset.Documents(rows)
	var words, nbytes int64
	for _, d := range docs {
		words += int64(d.Words)
		nbytes += int64(d.Bytes)
	}
	for _, method := range []string{"compare_q", "exl3-ppl", "llamacpp", "hf-strided", "lm-eval"} {
		out := filepath.Join(dir, method+".json")
		args := []string{"eval", "--model", model, "--dataset", "wikitext2", "--data", data, "--method", method, "--ctx", "128", "--json", out}
		if method == "compare_q" || method == "hf-strided" { // a stride given to another method is a usage error
			args = append(args, "--stride", "64")
		}
		code, _, stderr := runQPPL(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", method, code, stderr)
		}
		r, _ := readResult(t, out)
		if r.Method != method || !(r.PPL > 1) {
			t.Errorf("%s: %+v", method, r)
		}
		n := int64(r.Data.NumTokens)
		switch method {
		case "hf-strided":
			if r.TokensScored != n-1 || r.HFGuidePPL == 0 {
				t.Errorf("hf-strided scored %d of %d, guide ppl %v", r.TokensScored, n, r.HFGuidePPL)
			}
		case "llamacpp":
			if r.TokensScored != n/128*(128-1-64) || r.Data.Join != "llamacpp" {
				t.Errorf("llamacpp scored %d of %d, join %s", r.TokensScored, n, r.Data.Join)
			}
		case "lm-eval":
			m := r.LMEval
			if m == nil || m.Words != words || m.Bytes != nbytes || r.Data.Documents != len(docs) || r.TokensScored != n {
				t.Fatalf("lm-eval %+v docs %d/%d scored %d of %d", m, r.Data.Documents, len(docs), r.TokensScored, n)
			}
			ll := -r.NLLMean * float64(r.TokensScored)
			if math.Abs(m.LogLikelihood-ll) > 1e-9*math.Abs(ll) || math.Abs(m.WordPerplexity-math.Exp(-ll/float64(words))) > 1e-9*m.WordPerplexity ||
				math.Abs(m.BitsPerByte-(-ll/float64(nbytes)/math.Ln2)) > 1e-12 {
				t.Errorf("lm-eval metrics %+v, ll %v", m, ll)
			}
		}
	}

	// lm-eval without --ctx: lm-eval's max_length, the model's
	// max_position_embeddings (not --ctx's 2048).
	short := copyModel(t, model, filepath.Join(dir, "short"))
	editConfig(t, short, func(m map[string]any) { m["max_position_embeddings"] = 48 })
	out := filepath.Join(dir, "lm-eval-default.json")
	if code, _, stderr := runQPPL(t, "eval", "--model", short, "--dataset", "wikitext2", "--data", data, "--method", "lm-eval", "--json", out); code != 0 {
		t.Fatalf("lm-eval default ctx: exit %d: %s", code, stderr)
	}
	if r, _ := readResult(t, out); r.Ctx != 48 || r.Data.Ctx != 48 || r.Windows <= len(docs) {
		t.Errorf("lm-eval default ctx: ctx %d (data %d), %d windows for %d documents; want ctx 48 and documents split", r.Ctx, r.Data.Ctx, r.Windows, len(docs))
	}
}

// A llama.cpp base file used with another method is refused before any
// forward pass, as an input error.
func TestEvalKLDWrongMethod(t *testing.T) {
	base, tokens := evalFixture(t, 1, 140)
	lc := filepath.Join(t.TempDir(), "base.kld")
	if code, _, e := runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--method", "llamacpp", "--ctx", "32", "--save-logits", lc, "--logits-format", "llamacpp"); code != 0 {
		t.Fatal(e)
	}
	code, _, stderr := runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--method", "exl3-ppl", "--ctx", "32", "--kld-base", lc)
	if code != 2 || !strings.Contains(stderr, "stale or mismatched") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	// Without qppl's trailer (a file as llama-perplexity writes it), the
	// window shapes and tokens are what is checked.
	raw, _ := os.ReadFile(lc)
	n := int(binary.LittleEndian.Uint32(raw[len(raw)-12:]))
	plain := filepath.Join(t.TempDir(), "plain.kld")
	os.WriteFile(plain, raw[:len(raw)-12-n], 0o644)
	code, _, stderr = runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--method", "exl3-ppl", "--ctx", "32", "--kld-base", plain)
	if code != 2 || !strings.Contains(stderr, "window 0 was stored with first target 17 and 32 tokens, this run has 1 and 32") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--method", "llamacpp", "--ctx", "32", "--kld-base", plain)
	if code != 0 {
		t.Errorf("plain llama.cpp file: exit %d: %s", code, stderr)
	}
	code, _, stderr = runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--method", "compare_q", "--ctx", "32", "--save-logits", lc, "--logits-format", "llamacpp")
	if code != 2 || !strings.Contains(stderr, "needs method llamacpp") {
		t.Errorf("llamacpp format with compare_q: exit %d: %s", code, stderr)
	}
}
