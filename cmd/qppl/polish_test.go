package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
)

// Issue 11 leftovers of items 3, 11 and 12: --ctx beyond what RoPE
// scaling reaches is refused; tables say GiB; compare and tokenize read
// --text - from stdin as eval does.
func TestLongContextRopeScaling(t *testing.T) {
	_, tokens := evalFixture(t, 5, 80)
	dir := t.TempDir()
	o, _ := fixtures.Defaults("llama")
	o.MaxPos = 12
	short := filepath.Join(dir, "short")
	if err := fixtures.Write(short, o); err != nil {
		t.Fatal(err)
	}
	editConfig(t, short, func(m map[string]any) { delete(m, "rope_scaling") })
	linear := copyModel(t, short, filepath.Join(dir, "linear"))
	editConfig(t, linear, func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 1.25} })
	cases := []struct {
		model, ctx string
		code       int
		want       string
	}{
		// No scaling: a warning, as before.
		{short, "16", 0, "qppl: warning: --ctx 16 is longer than the model's max_position_embeddings 12: positions beyond it were never trained"},
		// Linear ×1.25 reaches 15 positions: 16 is refused, 15 warned.
		{linear, "16", exitUsage, "--ctx 16 is longer than the model's max_position_embeddings 12, and its rope_scaling (linear, factor 1.25) does not extend it that far (15 positions): use a --ctx of at most 15"},
		{linear, "15", 0, "qppl: warning: --ctx 15 is longer than the model's max_position_embeddings 12: only its rope_scaling (linear, factor 1.25) reaches that far"},
	}
	for _, c := range cases {
		for _, cmd := range []string{"eval", "compare"} {
			args := []string{cmd, "--model", c.model, "--tokens", tokens, "--ctx", c.ctx, "--stride", c.ctx, "--rows", "1"}
			if cmd == "compare" {
				args = append(args, "--no-cache", "--cache-dir", filepath.Join(dir, "cache"))
			}
			code, stdout, stderr := runQPPL(t, args...)
			if code != c.code || !strings.Contains(stderr, c.want) || (code != 0 && stdout != "") {
				t.Errorf("%s %s --ctx %s: exit %d, stderr %q; want exit %d and %q", cmd, filepath.Base(c.model), c.ctx, code, stderr, c.code, c.want)
			}
		}
	}
}

func TestTablesSayGiB(t *testing.T) {
	model, tokens := evalFixture(t, 5, 40)
	code, stdout, stderr := runQPPL(t, "compare", "--model", model, "--tokens", tokens, "--ctx", "16", "--no-cache", "--cache-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "VRAM GiB") || strings.Contains(stdout, "VRAM GB") {
		t.Errorf("table header: %s", stdout)
	}
}

func TestTextFromStdin(t *testing.T) {
	dir, base, _, text := cmpFixtures(t)
	body := strings.Repeat(fixtures.DemoText(), 2)
	runIn := func(in string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"qppl"}, args...), strings.NewReader(in), &out, &errb)
		return code, out.String(), errb.String()
	}
	// compare --text - scores what eval --text - scores.
	args := []string{"--ctx", "32", "--stride", "32", "--rows", "2", "--json", "-"}
	code, evalOut, stderr := runIn(body, append([]string{"eval", "--model", base, "--text", "-"}, args...)...)
	if code != 0 {
		t.Fatalf("eval --text -: exit %d: %s", code, stderr)
	}
	code, cmpOut, stderr := runIn(body, append([]string{"compare", "--model", base, "--text", "-", "--no-cache", "--cache-dir", filepath.Join(dir, "c")}, args...)...)
	if code != 0 {
		t.Fatalf("compare --text -: exit %d: %s", code, stderr)
	}
	e, c := ppl(t, evalOut), ppl(t, cmpOut)
	if e == "" || e != c {
		t.Errorf("PPL: eval --text - %q, compare --text - %q", e, c)
	}
	// tokenize --text - writes the ids tokenize --text FILE writes.
	a, b := filepath.Join(dir, "a.i32"), filepath.Join(dir, "b.i32")
	if code, _, stderr := runIn(body, "tokenize", "--tokenizer", base, "--text", "-", "--out", a); code != 0 {
		t.Fatalf("tokenize --text -: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runIn("", "tokenize", "--tokenizer", base, "--text", text, "--out", b); code != 0 {
		t.Fatalf("tokenize --text FILE: exit %d: %s", code, stderr)
	}
	if x, y := readFile(t, a), readFile(t, b); len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("tokenize --text -: %d bytes, from the file %d bytes", len(x), len(y))
	}
}

// ppl is the first "ppl" value in a JSON output, as printed.
func ppl(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, `"ppl": `)
	if i < 0 {
		return ""
	}
	s := out[i+7:]
	return s[:strings.IndexAny(s, ",\n")]
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 11 item 7: compare opens and checks every model, --baseline and
// the data before the first model runs.
func TestCompareChecksEverythingFirst(t *testing.T) {
	model, tokens := evalFixture(t, 5, 60)
	dir := t.TempDir()
	other := copyModel(t, model, filepath.Join(dir, "other"))
	truncated := copyModel(t, model, filepath.Join(dir, "truncated"))
	st := filepath.Join(truncated, "model.safetensors")
	b := readFile(t, st)
	if err := os.WriteFile(st, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	o, _ := fixtures.Defaults("llama")
	o.Vocab += 64
	bigger := filepath.Join(dir, "bigger")
	if err := fixtures.Write(bigger, o); err != nil {
		t.Fatal(err)
	}
	common := []string{"compare", "--base", model, "--model", other, "--tokens", tokens, "--ctx", "16", "--no-cache", "--cache-dir", filepath.Join(dir, "cache")}
	baseline := filepath.Join(dir, "baseline.json")
	if code, _, stderr := runQPPL(t, append(common, "--json", baseline)...); code != 0 {
		t.Fatalf("baseline run: exit %d: %s", code, stderr)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--model", filepath.Join(dir, "missing")}, []string{`model "missing" (--model ` + filepath.Join(dir, "missing") + "): " + filepath.Join(dir, "missing") + ": no such directory"}},
		{[]string{"--model", truncated}, []string{`model "truncated"`, "model.safetensors", "truncated"}},
		{[]string{"--model", bigger}, []string{`model "bigger"`, filepath.Join(bigger, "config.json") + ": vocab_size 576, but " + filepath.Join(model, "config.json") + " has vocab_size 512"}},
		{[]string{"--stride", "8", "--baseline", baseline}, []string{"--baseline " + baseline + ": baseline data spec", "stride 4", "stride 8"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runQPPL(t, append(append([]string{}, common...), c.args...)...)
		ok := code == exitUsage && stdout == "" && !strings.Contains(stderr, "evaluating")
		for _, w := range c.want {
			ok = ok && strings.Contains(stderr, w)
		}
		if !ok {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 before any model runs, naming %q", c.args, code, stdout, stderr, c.want)
		}
	}
	// A missing base is named as such, not as a missing tokenizer.
	text := filepath.Join(dir, "t.txt")
	if err := os.WriteFile(text, []byte(fixtures.DemoText()), 0o644); err != nil {
		t.Fatal(err)
	}
	nobase := filepath.Join(dir, "nobase")
	code, _, stderr := runQPPL(t, "compare", "--base", nobase, "--model", model, "--text", text, "--ctx", "16", "--no-cache", "--cache-dir", filepath.Join(dir, "cache"))
	if want := `compare: model "nobase" (--base): ` + nobase + ": no such directory"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("missing --base: exit %d, %s; want exit 2 and %q", code, stderr, want)
	}
}

// Issue 11 item 14: a demo without --out leaves nothing behind and
// mentions no file the user cannot open.
func TestDemoRemovesItsTemporaryDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("demo quantizes ten models")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	code := run([]string{"qppl", "demo", "--ctx", "32", "--stride", "32", "--rows", "1"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exit %d\nstderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "INT4 W4A16 g128") {
		t.Errorf("stdout has no result table:\n%s", stdout.String())
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("demo left %d entries in $TMPDIR (%s...)", len(ents), ents[0].Name())
	}
	rest := strings.ReplaceAll(stderr.String(), "(--out DIR keeps the models, results.json and kld.png)", "")
	for _, f := range []string{"wrote ", "results.json", "kld.png"} {
		if strings.Contains(rest, f) {
			t.Errorf("stderr names %q, which is gone:\n%s", f, stderr.String())
		}
	}
}

// Issue 11 item 10: compare's cache lives under the user cache directory,
// says how big each base store is before writing it, and qppl cache
// lists, removes and prunes it.
func TestCompareCacheDefaultAndCacheCommand(t *testing.T) {
	model, tokens := evalFixture(t, 5, 60)
	dir := t.TempDir()
	other := copyModel(t, model, filepath.Join(dir, "other"))
	xdg := filepath.Join(dir, "xdg")
	t.Setenv("XDG_CACHE_HOME", xdg)
	wd, _ := os.Getwd()
	code, _, stderr := runQPPL(t, "compare", "--base", model, "--model", other, "--tokens", tokens, "--ctx", "16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cache := filepath.Join(xdg, "qppl")
	stores, _ := filepath.Glob(filepath.Join(cache, "base", "*.qlp"))
	results, _ := filepath.Glob(filepath.Join(cache, "results", "*.json"))
	if len(stores) != 1 || len(results) != 2 {
		t.Fatalf("cache under $XDG_CACHE_HOME/qppl: %d stores, %d results; want 1 and 2", len(stores), len(results))
	}
	if _, err := os.Stat(filepath.Join(wd, ".qppl-cache")); err == nil {
		t.Errorf("compare still wrote ./.qppl-cache")
	}
	// 11 windows of 15 scored positions × 512 log-probs × 4 bytes (f32) =
	// 330 KiB, said before the store is written.
	if want := "base log-prob store (165 positions × 512-token vocabulary, f32): 330 KiB → " + stores[0]; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}

	code, stdout, stderr := runQPPL(t, "cache", "ls")
	if code != 0 {
		t.Fatalf("cache ls: exit %d: %s", code, stderr)
	}
	storeKey := strings.TrimSuffix(filepath.Base(stores[0]), ".qlp")
	for _, w := range []string{"KIND    KEY", "base    " + storeKey[:12], "result  ", model, tokens + " compare_q ctx 16", "3 entries"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("cache ls lacks %q:\n%s", w, stdout)
		}
	}
	code, stdout, _ = runQPPL(t, "cache", "rm", storeKey[:8])
	if _, err := os.Stat(stores[0]); code != 0 || err == nil || !strings.Contains(stdout, "removed base "+storeKey) {
		t.Errorf("cache rm: exit %d, %s", code, stdout)
	}
	if code, stdout, _ = runQPPL(t, "cache", "prune", "--older-than", "1h"); code != 0 || !strings.Contains(stdout, "0 entries removed") {
		t.Errorf("cache prune --older-than 1h: exit %d, %s", code, stdout)
	}
	if code, stdout, _ = runQPPL(t, "cache", "prune", "--max-size", "0"); code != 0 || !strings.Contains(stdout, "2 entries removed") {
		t.Errorf("cache prune --max-size 0: exit %d, %s", code, stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "rm", "ab"}, `cache rm "ab": give at least 4 characters of a key`},
		{[]string{"cache", "rm"}, "cache rm: give the KEY"},
		{[]string{"cache", "prune"}, "cache prune: give --older-than AGE and/or --max-size SIZE"},
		{[]string{"cache", "prune", "--max-size", "lots"}, `cache prune --max-size: "lots": want a size like 20GiB`},
	} {
		code, _, stderr := runQPPL(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
