package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/compare"
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
		{[]string{"eval", "--model", model, "--dataset", "wikitext2", "--data", tokens, "--method", "lm-eval", "--join", "filtered"}, "eval: --join: method lm-eval scores whole articles"},
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
	// Item 12: the commands that write a directory exit 2 too.
	results := filepath.Join(t.TempDir(), "r.json")
	mustRun(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--json", results)
	for _, args := range [][]string{
		{"fixture", "--out", filepath.Join(ro, "fx")},
		{"demo", "--out", filepath.Join(ro, "demo")},
		{"quantize", "--model", model, "--scheme", "W8A16", "--out", filepath.Join(ro, "q")},
		{"plot", results, "--out", filepath.Join(ro, "x.png")},
	} {
		code, stdout, stderr := runQPPL(t, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, ro) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s", args[0], code, stderr, ro)
		}
	}
}

// Issue 11 item 8: a run is identified by hashes, not paths. The same model
// and data under other paths resume a run directory and merge with its
// shards; post-processing settings and a larger --rows do not block a
// resume; plain eval --json carries model_hash, so merged shards write
// exactly what plain eval writes.
func TestIdentityIsHashesNotPaths(t *testing.T) {
	model, tokens := evalFixture(t, 7, 120)
	dir := t.TempDir()
	model2 := copyModel(t, model, filepath.Join(dir, "elsewhere", "model"))
	tokens2 := filepath.Join(dir, "elsewhere", "tokens.i32")
	b, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens2, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(model, tokens string, extra ...string) []string {
		return append([]string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "8"}, extra...)
	}
	plain := filepath.Join(dir, "plain.json")
	mustRun(t, args(model2, tokens2, "--rows", "6", "--json", plain)...)
	// plain eval hashes the model while it runs (no run directory):
	// the result carries the files' hash all the same.
	if r, _ := readResult(t, plain); r.ModelHash == "" {
		t.Errorf("plain eval --json has no model_hash")
	} else if h, err := compare.ModelHash(model2); err != nil || r.ModelHash != h {
		t.Errorf("plain eval --json: model_hash %s, the files hash to %s (%v)", r.ModelHash, h, err)
	}

	// Resume under other paths, with another bootstrap and more rows.
	rd := filepath.Join(dir, "run")
	mustRun(t, args(model, tokens, "--rows", "3", "--run-dir", rd, "--bootstrap", "200")...)
	resumed := filepath.Join(dir, "resumed.json")
	code, _, stderr := runQPPL(t, args(model2, tokens2, "--rows", "6", "--run-dir", rd, "--json", resumed)...)
	if code != 0 || !strings.Contains(stderr, "3 of 6 windows already done") {
		t.Fatalf("resume under other paths with more rows: exit %d: %s", code, stderr)
	}
	if got, want := resultNoTiming(t, resumed), resultNoTiming(t, plain); !bytes.Equal(got, want) {
		t.Errorf("resumed run differs from a plain run:\n%s\n%s", got, want)
	}
	// What decides the numbers still blocks a resume.
	code, _, stderr = runQPPL(t, args(model2, tokens2, "--rows", "6", "--run-dir", rd, "--top-k", "3")...)
	if code != exitUsage || !strings.Contains(stderr, "top_k: 5 in the journal, 3 now") {
		t.Errorf("another --top-k: exit %d: %s", code, stderr)
	}

	// Shards under two paths merge into what plain eval writes.
	s0, s1 := filepath.Join(dir, "s0"), filepath.Join(dir, "s1")
	mustRun(t, args(model, tokens, "--rows", "6", "--shard", "0/2", "--run-dir", s0)...)
	mustRun(t, args(model2, tokens2, "--rows", "6", "--shard", "1/2", "--run-dir", s1)...)
	merged := filepath.Join(dir, "merged.json")
	mustRun(t, "merge", s0, s1, "--json", merged)
	m, p := readJSONObject(t, merged), readJSONObject(t, plain)
	delete(p, "timing")
	for _, obj := range []map[string]any{m, p} { // the first shard's paths describe the merged run
		delete(obj, "model")
		delete(obj["data"].(map[string]any), "source")
	}
	if got, want := mustJSON(t, m), mustJSON(t, p); !bytes.Equal(got, want) {
		t.Errorf("merged shards differ from plain eval:\n%s\n%s", got, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 11 item 8: --shard auto takes the shard from a Slurm job array or
// a Kubernetes Indexed Job.
func TestShardAuto(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	cases := []struct {
		shard  string
		shards int
		getenv func(string) string
		want   string // "I/N" or an error substring
	}{
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_COUNT", "4"), "2/4"},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "4", "SLURM_ARRAY_TASK_MAX", "7"), "1/4"},
		{"auto", 3, env("JOB_COMPLETION_INDEX", "2"), "2/3"},
		{"auto", 0, env("JOB_COMPLETION_INDEX", "2"), "needs --shards N"},
		{"auto", 2, env("JOB_COMPLETION_INDEX", "2"), "is not below --shards 2"},
		{"auto", 0, env(), "neither a Slurm job array"},
		{"auto", 5, env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4"), "but the Slurm array has 4 tasks"},
		{"1/2", 0, env("SLURM_ARRAY_TASK_ID", "3"), "1/2"},
		{"1/2", 2, env(), "--shards N goes with --shard auto"},
	}
	for _, c := range cases {
		got, err := resolveShard(c.shard, c.shards, c.getenv)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("--shard %s --shards %d: %q, want %q", c.shard, c.shards, got, c.want)
		}
	}
	// End to end: a Slurm array task evaluates its shard.
	model, tokens := evalFixture(t, 8, 80)
	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	t.Setenv("SLURM_ARRAY_TASK_MIN", "0")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", "2")
	code, stdout, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--shard", "auto", "--run-dir", filepath.Join(t.TempDir(), "s"))
	if code != 0 || !strings.Contains(stdout, "shard 1/2:") {
		t.Errorf("--shard auto in a Slurm array: exit %d: %s%s", code, stdout, stderr)
	}
}

// Issue 11 item 11: one name and one wording per concept.
func TestOneNamePerConcept(t *testing.T) {
	_, v1, _ := runQPPL(t, "--version")
	_, v2, _ := runQPPL(t, "version")
	if v1 != v2 || v1 == "" {
		t.Errorf("--version %q, version %q", v1, v2)
	}
	model, tokens := evalFixture(t, 9, 80)
	// --tokenizer in eval as in compare; --rows in verify as in eval.
	text := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(text, []byte("the cat sat on the mat and the dog ran off again"), 0o644)
	code, stdout, stderr := runQPPL(t, "eval", "--model", copyModelNoTokenizer(t, model), "--tokenizer", model, "--text", text, "--ctx", "8", "--stride", "8")
	if code != 0 {
		t.Errorf("eval --tokenizer: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "tokens/s forwarded (every window position, scored or not") {
		t.Errorf("the speed line does not say what it counts: %s", stdout)
	}
	if code, _, stderr := runQPPL(t, "verify", "--model", model, "--backends", "reference,reference", "--ctx", "8", "--rows", "1"); code != 0 {
		t.Errorf("verify --rows: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runQPPL(t, "verify", "--model", model, "--backends", "reference,reference", "--ctx", "8", "--rows", "0"); code != exitUsage || !strings.Contains(stderr, "verify: --rows 0: need at least one window") {
		t.Errorf("verify --rows 0: exit %d: %s", code, stderr)
	}
	_ = tokens
}

// copyModelNoTokenizer copies a model without its tokenizer.json.
func copyModelNoTokenizer(t *testing.T, src string) string {
	t.Helper()
	dst := copyModel(t, src, filepath.Join(t.TempDir(), "notok"))
	os.Remove(filepath.Join(dst, "tokenizer.json"))
	return dst
}

// Issue 11 item 12: quantize and verify refuse what they would get wrong;
// --json - writes to stdout and --text - reads stdin.
func TestRoughEdges(t *testing.T) {
	model, tokens := evalFixture(t, 10, 80)
	dir := t.TempDir()
	code, _, stderr := runQPPL(t, "quantize", "--model", model, "--scheme", "W4A16", "--group-size", "-8", "--out", filepath.Join(dir, "q"))
	if code != exitUsage || !strings.Contains(stderr, "quantize: --group-size -8: must be a positive number") {
		t.Errorf("--group-size -8: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "q")); err == nil {
		t.Errorf("a refused quantize left its --out directory")
	}
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "model-00002-of-00002.safetensors"), []byte("stale"), 0o644)
	code, _, stderr = runQPPL(t, "quantize", "--model", model, "--scheme", "W8A16", "--out", full)
	if code != exitUsage || !strings.Contains(stderr, "is not empty") {
		t.Errorf("non-empty --out: exit %d: %s", code, stderr)
	}
	if code, _, stderr = runQPPL(t, "quantize", "--model", model, "--scheme", "W8A16", "--out", full, "--force"); code != 0 {
		t.Errorf("--force: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(full, "model-00002-of-00002.safetensors")); err == nil {
		t.Errorf("--force left a stale shard")
	}
	// A quantize that fails (unknown scheme) leaves no empty directory.
	if code, _, _ := runQPPL(t, "quantize", "--model", model, "--scheme", "NOSUCH", "--out", filepath.Join(dir, "bad")); code != exitUsage {
		t.Errorf("unknown scheme: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
		t.Errorf("a failed quantize left an empty --out directory")
	}

	code, _, stderr = runQPPL(t, "verify", "--model", model, "--backends", "reference,reference", "--ctx", "8", "--max-nll", "-1")
	if code != exitUsage || !strings.Contains(stderr, "verify: --max-nll -1: a tolerance is >= 0") {
		t.Errorf("negative tolerance: exit %d: %s", code, stderr)
	}

	// --json - : the JSON on stdout, the summary on stderr.
	code, stdout, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--json", "-")
	var r map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || r["ppl"] == nil || !strings.Contains(stderr, "PPL") {
		t.Errorf("--json -: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// --text - : the text from stdin.
	var out, errb bytes.Buffer
	text := "the cat sat on the mat and the dog ran off again and again"
	file := filepath.Join(dir, "t.txt")
	os.WriteFile(file, []byte(text), 0o644)
	code = run([]string{"qppl", "eval", "--model", model, "--text", "-", "--ctx", "8", "--stride", "8", "--json", "-"}, strings.NewReader(text), &out, &errb)
	_, fromFile, _ := runQPPL(t, "eval", "--model", model, "--text", file, "--ctx", "8", "--stride", "8", "--json", "-")
	var a, b map[string]any
	if code != 0 || json.Unmarshal(out.Bytes(), &a) != nil || json.Unmarshal([]byte(fromFile), &b) != nil || a["tokens_hash"] != b["tokens_hash"] || a["ppl"] != b["ppl"] {
		t.Errorf("--text -: exit %d, %v vs %v: %s", code, a["tokens_hash"], b["tokens_hash"], errb.String())
	}
}

// Issue 11 item 12: with the reference second, the tolerances still follow
// the less precise backend (emu bf16), not fp64's.
func TestVerifyTolerancesFollowTheLessPreciseBackend(t *testing.T) {
	if _, err := emu.New(emu.Options{}); errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	model, _ := evalFixture(t, 11, 10)
	code, stdout, stderr := runQPPL(t, "verify", "--model", model, "--backends", "emu,reference", "--ctx", "16", "--rows", "1", "--json", "-")
	var rep struct {
		Tolerances struct {
			MaxNLL float64 `json:"max_nll"`
		} `json:"tolerances"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Tolerances.MaxNLL < 1e-3 {
		t.Errorf("verify emu,reference: exit %d, max_nll tolerance %g (fp64's would be 1e-9): %s", code, rep.Tolerances.MaxNLL, stderr)
	}
}
