package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
)

func TestParseDataSpec(t *testing.T) {
	// compare_q's shipped eval/spec/wiki2_llama3.json, as written.
	s, warn, err := ParseDataSpec([]byte(`{"tokenize_fn": "transformers", "tokenizer_dir": "/mnt/models/llama3.1-8b-instruct/exl3/4.0bpw/", "dataset": "wiki2", "eval_stride": 512, "eval_len": 2048, "max_rows": 20}`), "wiki2_llama3.json")
	if err != nil || len(warn) != 0 {
		t.Fatalf("err %v warn %v", err, warn)
	}
	if s.EvalLen != 2048 || s.EvalStride != 512 || s.MaxRows != 20 || s.DisplayName() != "wikitext2" {
		t.Errorf("spec %+v", s)
	}
	// Final-version aliases and an unknown field.
	s, warn, err = ParseDataSpec([]byte(`{"tokenizer_dir": "t", "dataset": "wikitext2", "eval_stride": 2048, "eval_len": 2048, "max_rows": 30, "split": "test", "max_dataset_rows": 100, "chat_template": false, "colour": 1}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.DatasetSplit != "test" || s.MaxTextRows != 100 || len(warn) != 1 || !strings.Contains(warn[0], `unknown field "colour"`) {
		t.Errorf("spec %+v warn %q", s, warn)
	}
	for _, c := range []struct{ json, want string }{
		{`{"tokenizer_dir": "t", "dataset": "wiki2", "eval_stride": 2048, "eval_len": 2048, "max_rows": 30, "chat_template": true, "warmup_tokens": 128}`, "chat_template is unsupported"},
		{`{"tokenizer_dir": "t", "dataset": "wiki2", "eval_len": 2048, "warmup_tokens": 128}`, "warmup_tokens 128 is unsupported"},
		{`{"tokenize_fn": "sentencepiece", "tokenizer_dir": "t", "dataset": "wiki2", "eval_len": 2048}`, `tokenize_fn "sentencepiece" is unsupported`},
		{`{"dataset": "wiki2", "eval_len": 2048}`, "tokenizer_dir is required"},
		{`{"tokenizer_dir": "t", "dataset": "wiki2", "eval_len": 1}`, "eval_len 1"},
		{`{"tokenizer_dir": "t", "dataset": "wiki2", "eval_len": 8, "split": "train"}`, `split "train" is unsupported`},
		{`{"tokenizer_dir": "t", "dataset": "x", "eval_len": 8, "dataset_data_files": "hf://x"}`, "dataset_data_files (hub data files) is unsupported"},
		{`[1]`, "not a JSON object"},
	} {
		_, _, err := ParseDataSpec([]byte(c.json), "d.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "d.json") {
			t.Errorf("%s: err %v, want %q naming d.json", c.json, err, c.want)
		}
	}
}

func TestParseModelSpecs(t *testing.T) {
	ms, warn, err := ParseModelSpecs([]byte(`[
		{"model_dir": "/m/bf16", "load_fn": "transformers_auto", "fwd_fn": "transformers", "label": "BF16", "out_logits": "/m/logits"},
		{"model_dir": ["/m/exl3-4", "/m/override"], "load_fn": "exllamav3", "fwd_fn": "exllamav3", "label": "EXL3 4.0bpw", "override_bpw_layer": 4.1},
		{"model_dir": "/m/w4", "load_fn": "transformers", "fwd_fn": "transformers", "comment": "x"}
	]`), "spec.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || !ms[0].Base || ms[1].Base || ms[1].ModelDir != "/m/exl3-4" || *ms[1].OverrideBPWLayer != 4.1 || ms[2].Label != "/m/w4" {
		t.Errorf("specs %+v", ms)
	}
	all := strings.Join(warn, "\n")
	for _, w := range []string{"spec.json[1]: model_dir is a list; using /m/exl3-4", `spec.json[1]: load_fn "exllamav3" is not a Hugging Face loader`, `spec.json[2]: unknown field "comment"`} {
		if !strings.Contains(all, w) {
			t.Errorf("warning %q missing from %q", w, all)
		}
	}
	if len(warn) != 3 {
		t.Errorf("%d warnings, want 3: %q", len(warn), warn)
	}
	for _, c := range []struct{ json, want string }{
		{`[{"label": "x"}]`, "spec.json[0]: model_dir is required"},
		{`[{"model_dir": []}]`, "model_dir must be a string"},
		{`[]`, "empty list"},
		{`"x"`, "want a JSON list"},
	} {
		if _, _, err := ParseModelSpecs([]byte(c.json), "spec.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.json, err, c.want)
		}
	}
	// OrderModels: base first, mask keeps the base, duplicate labels fail.
	ordered, err := OrderModels([]ModelSpec{{Label: "W4A16 g128"}, {Label: "NVFP4"}, {Label: "BF16", Base: true}}, []string{"w4a16"})
	if err != nil || len(ordered) != 2 || ordered[0].Label != "BF16" || ordered[1].Label != "W4A16 g128" {
		t.Errorf("ordered %+v err %v", ordered, err)
	}
	if _, err := OrderModels([]ModelSpec{{Label: "A"}, {Label: "A"}}, nil); err == nil || !strings.Contains(err.Error(), `label "A" used twice`) {
		t.Errorf("duplicate labels: %v", err)
	}
	if _, err := OrderModels([]ModelSpec{{Label: "A", Base: true}, {Label: "B", Base: true}}, nil); err == nil || !strings.Contains(err.Error(), "two base models") {
		t.Errorf("two bases: %v", err)
	}
}

func seqTokens(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i % 97)
	}
	return ids
}

func TestPrepareTokensFile(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "t.i32")
	if err := dataset.WriteTokens(tf, seqTokens(1000)); err != nil {
		t.Fatal(err)
	}
	s := &DataSpec{TokensFile: tf, EvalLen: 128, EvalStride: 32, MaxRows: 5}
	d, err := Prepare(s, PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// range(0, 1000-128, 32) has 28 starts; max_rows 5 keeps 5.
	if len(d.Windows) != 5 || d.Windows[4].Tokens[0] != 128%97 || d.Info.NumTokens != 1000 || d.Hash != d.Info.Hash() || d.KLMode != "scored" {
		t.Errorf("data %+v", d.Info)
	}
	if d.Info.TokensHash != compare.TokensHash(seqTokens(1000)) {
		t.Error("tokens hash")
	}
	// compare_q breaks at max_rows; beyond the stream it uses all windows.
	s.MaxRows = 40
	d, err = Prepare(s, PrepareOptions{})
	if err != nil || len(d.Windows) != 28 || len(d.Warnings) != 1 {
		t.Errorf("max_rows beyond: %d windows, warnings %q, err %v", len(d.Windows), d.Warnings, err)
	}
	if d.Info.Rows != 40 {
		t.Errorf("rows asked %d", d.Info.Rows)
	}
	if _, err := Prepare(&DataSpec{TokensFile: tf, EvalLen: 128, Method: "lm-eval"}, PrepareOptions{}); err == nil || !strings.Contains(err.Error(), "lm-eval is unsupported") {
		t.Errorf("lm-eval: %v", err)
	}
	if _, err := Prepare(&DataSpec{TokenizerDir: "x", Dataset: "wiki2", EvalLen: 128, EvalStride: 1}, PrepareOptions{}); err == nil || !strings.Contains(err.Error(), `set "data_file"`) {
		t.Errorf("no data file: %v", err)
	}
}

func TestPrepareTextWithTokenCache(t *testing.T) {
	tokDir := filepath.Join("..", "..", "..", "shared", "models", "tiny-wt2-mistral")
	if _, err := os.Stat(filepath.Join(tokDir, "tokenizer.json")); err != nil {
		t.Skipf("shared tokenizer not found: %v", err)
	}
	dir := t.TempDir()
	rows := filepath.Join(dir, "rows.jsonl")
	var b bytes.Buffer
	for i := 0; i < 60; i++ {
		if i%3 == 2 {
			b.WriteString(`{"text": ""}` + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"text": " = Row %d = \n The quick brown fox %d jumps over the lazy dog . \n"}`+"\n", i, i*7)
	}
	if err := os.WriteFile(rows, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &DataSpec{TokenizeFn: "transformers", TokenizerDir: tokDir, Dataset: "wiki2", DataFile: rows, EvalLen: 64, EvalStride: 16, MaxRows: 4}
	cache := filepath.Join(dir, "cache")
	d1, err := Prepare(s, PrepareOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(cache, "tokens"))
	if len(ents) != 1 {
		t.Fatalf("token cache has %d files", len(ents))
	}
	d2, err := Prepare(s, PrepareOptions{CacheDir: cache})
	if err != nil || d2.Info.TokensHash != d1.Info.TokensHash || len(d2.Windows) != 4 {
		t.Fatalf("second prepare: %v", err)
	}
	if d1.Tokens[0] != 1 {
		t.Errorf("first token %d, want Mistral BOS 1 (add_special_tokens)", d1.Tokens[0])
	}
	// Without data_file, a wiki2 spec asks the resolver (the CLI's looks in
	// the Hugging Face cache) and gets the same stream.
	asked := ""
	s2 := *s
	s2.DataFile = ""
	d4, err := Prepare(&s2, PrepareOptions{ResolveDataset: func(name string) (string, error) { asked = name; return rows, nil }})
	if err != nil || asked != "wiki2" || d4.Info.TokensHash != d1.Info.TokensHash || d4.Info.Source != "wikitext2" {
		t.Errorf("resolver: asked %q, err %v", asked, err)
	}
	s2.Dataset = "ptb"
	if _, err := Prepare(&s2, PrepareOptions{ResolveDataset: func(string) (string, error) { return rows, nil }}); err == nil || !strings.Contains(err.Error(), `dataset "ptb" is unsupported without data_file`) {
		t.Errorf("ptb: %v", err)
	}
	// The filtered join gives another stream, cached separately.
	s.Join = "filtered"
	d3, err := Prepare(s, PrepareOptions{CacheDir: cache})
	if err != nil || d3.Info.TokensHash == d1.Info.TokensHash || d3.Hash == d1.Hash {
		t.Errorf("filtered join: same stream or err %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "tokens")); len(ents) != 2 {
		t.Errorf("token cache has %d files, want 2", len(ents))
	}
}

// fakeEval evaluates deterministically from the model hash and records
// what it was asked.
type fakeEval struct {
	calls  []string
	stores map[string]bool
	engine string
}

func (f *fakeEval) Engine() string          { return f.engine }
func (f *fakeEval) HasBase(key string) bool { return f.stores[key] }
func (f *fakeEval) Evaluate(_ context.Context, j Job) (compare.Result, error) {
	f.calls = append(f.calls, j.Model.Label)
	if j.SaveBase {
		f.stores[j.BaseKey] = true
	}
	if j.UseBase && !f.stores[j.BaseKey] {
		return compare.Result{}, fmt.Errorf("no base store %s", j.BaseKey)
	}
	v := float64(len(j.ModelHash)+int(j.ModelHash[0])) / 10
	r := compare.Result{PPL: v, BPWLayer: 4, Windows: len(j.Data.Windows), DataSpecHash: j.Data.Hash, TokensHash: j.Data.Info.TokensHash, Data: j.Data.Info}
	if j.UseBase {
		r.KLD = &compare.KLDStats{Mode: j.Data.KLMode, Mean: v / 100}
	}
	return r, nil
}

func testData(t *testing.T) *Data {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "t.i32")
	if err := dataset.WriteTokens(tf, seqTokens(600)); err != nil {
		t.Fatal(err)
	}
	d, err := Prepare(&DataSpec{TokensFile: tf, EvalLen: 64, EvalStride: 64, MaxRows: 3}, PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRunCache(t *testing.T) {
	d := testData(t)
	hash := func(dir string) (string, error) { return "h-" + dir, nil }
	models := []ModelSpec{{ModelDir: "bf16", Label: "BF16", Base: true}, {ModelDir: "w4", Label: "W4A16 g128"}, {ModelDir: "nv", Label: "NVFP4", OverrideBPWLayer: ptr(4.5)}}
	cache := &Cache{Dir: t.TempDir()}
	ev := &fakeEval{stores: map[string]bool{}, engine: "reference/fp64"}
	var log bytes.Buffer
	rs, err := Run(context.Background(), d, models, ev, Options{Cache: cache, ModelHash: hash, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ev.calls, ",") != "BF16,W4A16 g128,NVFP4" {
		t.Errorf("calls %v", ev.calls)
	}
	if rs.Base != "BF16" || rs.KLMode != "scored" || len(rs.Results) != 3 || rs.Results[0].KLD != nil || rs.Results[1].KLD == nil {
		t.Errorf("result set %+v", rs)
	}
	if r := rs.Results[2]; r.BPWLayer != 4.5 || r.Label != "NVFP4" || r.Model != "nv" || r.ModelHash != "h-nv" {
		t.Errorf("override/label: %+v", r)
	}
	// Second run: everything from the cache, identical JSON.
	ev2 := &fakeEval{stores: ev.stores, engine: "reference/fp64"}
	rs2, err := Run(context.Background(), d, models, ev2, Options{Cache: cache, ModelHash: hash})
	if err != nil || len(ev2.calls) != 0 {
		t.Fatalf("cached run: calls %v err %v", ev2.calls, err)
	}
	a, _ := json.Marshal(rs)
	b, _ := json.Marshal(rs2)
	if !bytes.Equal(a, b) {
		t.Error("cached result set differs")
	}
	// A relabelled model still hits; a new model needs the base store,
	// which is gone: the base is evaluated again first.
	models2 := append([]ModelSpec{}, models...)
	models2[1].Label = "W4A16 renamed"
	models2 = append(models2, ModelSpec{ModelDir: "w8", Label: "W8A16"})
	ev3 := &fakeEval{stores: map[string]bool{}, engine: "reference/fp64"}
	rs3, err := Run(context.Background(), d, models2, ev3, Options{Cache: cache, ModelHash: hash})
	if err != nil || strings.Join(ev3.calls, ",") != "BF16,W8A16" {
		t.Fatalf("calls %v err %v", ev3.calls, err)
	}
	if _, ok := rs3.Find("W4A16 renamed"); !ok {
		t.Error("relabel not applied to cached result")
	}
	// Another engine or changed model files miss; --no-cache evaluates all.
	ev4 := &fakeEval{stores: map[string]bool{}, engine: "emu/bf16"}
	if _, err := Run(context.Background(), d, models, ev4, Options{Cache: cache, ModelHash: hash}); err != nil || len(ev4.calls) != 3 {
		t.Errorf("other engine: calls %v err %v", ev4.calls, err)
	}
	ev5 := &fakeEval{stores: map[string]bool{}, engine: "reference/fp64"}
	hash2 := func(dir string) (string, error) {
		if dir == "w4" {
			return "h-w4-changed", nil
		}
		return "h-" + dir, nil
	}
	if _, err := Run(context.Background(), d, models, ev5, Options{Cache: cache, ModelHash: hash2}); err != nil || strings.Join(ev5.calls, ",") != "BF16,W4A16 g128" {
		t.Errorf("changed files: calls %v err %v", ev5.calls, err)
	}
	ev6 := &fakeEval{stores: map[string]bool{}, engine: "reference/fp64"}
	if _, err := Run(context.Background(), d, models, ev6, Options{Cache: cache, ModelHash: hash, NoCache: true}); err != nil || len(ev6.calls) != 3 {
		t.Errorf("no-cache: calls %v err %v", ev6.calls, err)
	}
	// A corrupt cache entry is an error naming the file.
	ents, _ := filepath.Glob(filepath.Join(cache.Dir, "results", "*.json"))
	if len(ents) == 0 {
		t.Fatal("no cache files")
	}
	for _, e := range ents {
		os.WriteFile(e, []byte("{"), 0o644)
	}
	if _, err := Run(context.Background(), d, models, ev6, Options{Cache: cache, ModelHash: hash}); err == nil || !strings.Contains(err.Error(), "result cache") || !strings.Contains(err.Error(), "--no-cache") {
		t.Errorf("corrupt cache: %v", err)
	}
}

func ptr(v float64) *float64 { return &v }

func TestRunExternalBase(t *testing.T) {
	d := testData(t)
	hash := func(dir string) (string, error) { return "h-" + dir, nil }
	ev := &fakeEval{stores: map[string]bool{"ext-1": true}, engine: "e"}
	cache := &Cache{Dir: t.TempDir()}
	models := []ModelSpec{{ModelDir: "q", Label: "Q"}, {ModelDir: "r", Label: "R"}}
	rs, err := Run(context.Background(), d, models, ev, Options{ModelHash: hash, Cache: cache, ExternalBase: "ext-1"})
	if err != nil || len(ev.calls) != 2 || rs.Base != "" || rs.KLMode != "scored" || rs.Results[0].KLD == nil {
		t.Fatalf("external base: %+v %v", rs, err)
	}
	// Another base file is another key: evaluated again.
	ev2 := &fakeEval{stores: map[string]bool{"ext-2": true}, engine: "e"}
	if _, err := Run(context.Background(), d, models, ev2, Options{ModelHash: hash, Cache: cache, ExternalBase: "ext-2"}); err != nil || len(ev2.calls) != 2 {
		t.Errorf("other base file: calls %v err %v", ev2.calls, err)
	}
	ev3 := &fakeEval{stores: map[string]bool{"ext-1": true}, engine: "e"}
	if _, err := Run(context.Background(), d, models, ev3, Options{ModelHash: hash, Cache: cache, ExternalBase: "ext-1"}); err != nil || len(ev3.calls) != 0 {
		t.Errorf("same base file: calls %v err %v", ev3.calls, err)
	}
	base := append([]ModelSpec{{ModelDir: "b", Label: "B", Base: true}}, models...)
	if _, err := Run(context.Background(), d, base, ev3, Options{ModelHash: hash, ExternalBase: "ext-1"}); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("both bases: %v", err)
	}
}

// badEval returns results that Run must refuse.
type badEval struct {
	fakeEval
	mode string
}

func (b *badEval) Evaluate(ctx context.Context, j Job) (compare.Result, error) {
	r, err := b.fakeEval.Evaluate(ctx, j)
	switch b.mode {
	case "other data":
		r.TokensHash = "other"
	case "no kld":
		r.KLD = nil
	case "fail":
		return r, fmt.Errorf("backend exploded")
	}
	return r, err
}

func TestRunErrors(t *testing.T) {
	d := testData(t)
	hash := func(dir string) (string, error) {
		if dir == "missing" {
			return "", fmt.Errorf("model files of missing: no config.json")
		}
		return "h-" + dir, nil
	}
	models := []ModelSpec{{ModelDir: "b", Label: "BF16", Base: true}, {ModelDir: "q", Label: "Q"}}
	for _, c := range []struct {
		mode   string
		models []ModelSpec
		want   string
	}{
		{"other data", models, `model "BF16": evaluator returned a result for other data`},
		{"no kld", models, `model "Q": evaluator returned no KL statistics`},
		{"fail", models, `model "BF16" (b): backend exploded`},
		{"", []ModelSpec{{ModelDir: "q", Label: "Q"}, {ModelDir: "b", Label: "BF16", Base: true}}, "base model \"BF16\" must come first"},
		{"", []ModelSpec{{ModelDir: "missing", Label: "M", Source: "m.json[0]"}}, `model "M" (m.json[0]): model files of missing`},
		{"", nil, "no models"},
	} {
		ev := &badEval{fakeEval: fakeEval{stores: map[string]bool{}, engine: "e"}, mode: c.mode}
		_, err := Run(context.Background(), d, c.models, ev, Options{ModelHash: hash, Cache: &Cache{Dir: t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.mode, err, c.want)
		}
	}
}

func TestResultFiles(t *testing.T) {
	d := testData(t)
	ev := &fakeEval{stores: map[string]bool{}, engine: "e"}
	rs, err := Run(context.Background(), d, []ModelSpec{{ModelDir: "a", Label: "BF16", Base: true}, {ModelDir: "b", Label: "W4A16"}}, ev, Options{ModelHash: func(s string) (string, error) { return "h" + s, nil }})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "r.json")
	if err := rs.Write(p); err != nil {
		t.Fatal(err)
	}
	back, err := LoadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rs)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
	// A single eval result and a list of them.
	one, _ := json.Marshal(rs.Results[1])
	got, err := ParseResults(one, "one.json")
	if err != nil || len(got.Results) != 1 || got.TokensHash != rs.TokensHash {
		t.Errorf("single: %+v %v", got, err)
	}
	list, _ := json.Marshal(rs.Results)
	if got, err := ParseResults(list, "list.json"); err != nil || len(got.Results) != 2 {
		t.Errorf("list: %v", err)
	}
	// compare_q's printed list: the 0-KLD entry is its reference.
	cq := `[{"label": "BF16", "layer_bpw": 16.0, "head_bpw": 16.0, "vram_gb": 14.9, "ppl": 7.6, "kld": 0.0},
	        {"label": "EXL3 4.0bpw", "layer_bpw": 4.05, "head_bpw": 6.0, "vram_gb": 4.6, "ppl": 7.73, "kld": 0.013}]`
	got, err = ParseResults([]byte(cq), "cq.json")
	if err != nil || got.Base != "BF16" || got.Results[0].KLD != nil || got.Results[1].KLD.Mean != 0.013 || got.Results[1].BPWLayer != 4.05 {
		t.Errorf("compare_q list: %+v %v", got, err)
	}
	// Mixed data in one list is rejected.
	r2 := rs.Results[1]
	r2.Label, r2.TokensHash = "other", "ff"
	bad, _ := json.Marshal([]compare.Result{rs.Results[0], r2})
	if _, err := ParseResults(bad, "bad.json"); err == nil || !strings.Contains(err.Error(), `bad.json: "other" was evaluated on other data`) {
		t.Errorf("mixed data: %v", err)
	}
	for _, c := range []struct{ data, want string }{
		{"", "empty file"}, {"[]", "empty list"}, {`{"format": "x", "results": []}`, `format "x"`}, {"nope", "want a result set"},
	} {
		if _, err := ParseResults([]byte(c.data), "f.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.data, err, c.want)
		}
	}
}

func gateSet(ppl, kld float64, labels ...string) *ResultSet {
	rs := &ResultSet{Format: FormatResultSet, DataSpecHash: "d", TokensHash: "t", KLMode: "scored", Base: "BF16"}
	rs.Results = append(rs.Results, compare.Result{Label: "BF16", PPL: 7, DataSpecHash: "d", TokensHash: "t"})
	for i, l := range labels {
		rs.Results = append(rs.Results, compare.Result{Label: l, PPL: ppl + float64(i), DataSpecHash: "d", TokensHash: "t", KLD: &compare.KLDStats{Mean: kld * float64(i+1)}})
	}
	return rs
}

func TestGate(t *testing.T) {
	base := gateSet(8, 0.02, "W4A16", "NVFP4")
	// Pass: PPL +0.05% (< 0.1%), KLD +4% (< 5%), one improved.
	cur := gateSet(8, 0.02, "W4A16", "NVFP4")
	cur.Results[1].PPL = 8 * 1.0005
	cur.Results[1].KLD.Mean = 0.02 * 1.04
	cur.Results[2].PPL = 8.9
	rep, err := Gate(base, cur, DefaultThresholds())
	if err != nil || rep.Regressed != 0 || rep.Failed || rep.Summary() != "no regression" {
		t.Fatalf("pass case: %+v %v", rep, err)
	}
	var tb bytes.Buffer
	rep.WriteTable(&tb)
	if !strings.Contains(tb.String(), "improved") || strings.Contains(tb.String(), "REGRESSED") {
		t.Errorf("table:\n%s", tb.String())
	}
	// Regression: PPL +0.2%, KLD +10%; a missing model; a new one.
	cur = gateSet(8, 0.02, "W4A16", "W8A16")
	cur.Results[1].PPL = 8 * 1.002
	cur.Results[1].KLD.Mean = 0.02 * 1.10
	rep, err = Gate(base, cur, DefaultThresholds())
	if err != nil || rep.Regressed != 2 || rep.Missing != 1 || !rep.Failed || rep.Summary() != "2 figures regressed, 1 baseline model missing" {
		t.Fatalf("regression case: %+v, err %v", rep, err)
	}
	// Missing models allowed: only the regressions fail.
	th0 := DefaultThresholds()
	th0.AllowMissing = true
	if r, _ := Gate(base, gateSet(8, 0.02, "W4A16"), th0); r.Failed || r.Missing != 1 {
		t.Errorf("allow missing: %+v", r)
	}
	if r, _ := Gate(base, gateSet(8, 0.02, "W4A16"), DefaultThresholds()); !r.Failed || r.Summary() != "1 baseline model missing" {
		t.Errorf("missing: %+v", r)
	}
	tb.Reset()
	rep.WriteTable(&tb)
	out := tb.String()
	for _, want := range []string{"W4A16  ppl", "+0.2000%", "+0.1%", "W4A16  kld", "+10.0000%", "NVFP4", "MISSING", "W8A16", "new"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// KLD floor: a zero baseline does not fail on rounding noise.
	z := gateSet(8, 0, "X")
	z2 := gateSet(8, 0, "X")
	z2.Results[1].KLD.Mean = 5e-7
	if rep, _ := Gate(z, z2, DefaultThresholds()); rep.Failed {
		t.Errorf("floor: %+v", rep.Rows)
	}
	// Custom thresholds.
	th := Thresholds{MaxPPLIncrease: 0.01}
	cur = gateSet(8, 0.02, "W4A16", "NVFP4")
	cur.Results[1].PPL = 8 * 1.002
	if rep, _ := Gate(base, cur, th); rep.Failed {
		t.Errorf("1%% ppl threshold: %+v", rep.Rows)
	}
	// A baseline KLD that this run does not measure regresses.
	cur = gateSet(8, 0.02, "W4A16", "NVFP4")
	cur.Results[2].KLD = nil
	if rep, _ := Gate(base, cur, DefaultThresholds()); !rep.Failed || rep.Regressed != 1 || rep.Rows[len(rep.Rows)-1].Metric != "kld" {
		t.Errorf("kld not measured: %+v", rep.Rows)
	}
	// Other data is an error.
	other := gateSet(8, 0.02, "W4A16")
	other.TokensHash = "u"
	if _, err := Gate(base, other, DefaultThresholds()); err == nil || !strings.Contains(err.Error(), "token stream") {
		t.Errorf("tokens mismatch: %v", err)
	}
	other = gateSet(8, 0.02, "W4A16")
	other.DataSpecHash = "e"
	if _, err := Gate(base, other, DefaultThresholds()); err == nil || !strings.Contains(err.Error(), "data spec") {
		t.Errorf("spec mismatch: %v", err)
	}
}

func TestParseFraction(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{{"0.1%", 0.001, true}, {"5%", 0.05, true}, {"0.05", 0.05, true}, {" 2 % ", 0.02, true}, {"-1%", 0, false}, {"abc", 0, false}, {"NaN", 0, false}} {
		got, err := ParseFraction(c.in)
		if (err == nil) != c.ok || (c.ok && abs(got-c.want) > 1e-15) {
			t.Errorf("ParseFraction(%q) = %v, %v", c.in, got, err)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestCheckSpace(t *testing.T) {
	free := func(string) (uint64, error) { return 1000, nil }
	var log strings.Builder
	if err := CheckSpace("store", "/c/base/k.qlp", 999, free, &log); err != nil || log.String() != "store: 999 B → /c/base/k.qlp\n" {
		t.Errorf("999 of 1000 bytes: %v, log %q", err, log.String())
	}
	err := CheckSpace("store", "/c/base/k.qlp", 3<<20, free, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "store needs 3 MiB but /c/base has 1000 B free") {
		t.Errorf("3 MiB on 1000 bytes: %v", err)
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1020 << 10: "1020 KiB", 20 << 30: "20 GiB", 3 << 40: "3 TiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
