package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
)

// mistakeModel writes a small random llama fixture (vocab 512) into dir
// and returns its options.
func mistakeModel(t *testing.T, dir string, mutate func(o *fixtures.Options)) fixtures.Options {
	t.Helper()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	o.Init, o.Hidden, o.Intermediate, o.Layers = fixtures.InitRandom, 32, 64, 1
	if mutate != nil {
		mutate(&o)
	}
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// copyModel copies the files of model dir src into a new directory.
func copyModel(t *testing.T, src, dst string) string {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// editConfig rewrites config.json of dir through f.
func editConfig(t *testing.T, dir string, f func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeShardedModel writes the fixture o into dir as two safetensors
// shards with model.safetensors.index.json.
func writeShardedModel(t *testing.T, src, dir string, o fixtures.Options) []string {
	t.Helper()
	copyModel(t, src, dir)
	os.Remove(filepath.Join(dir, "model.safetensors"))
	ts, err := fixtures.Tensors(o)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, x := range ts {
		total += int64(len(x.Data))
	}
	names, err := checkpoint.WriteSharded(dir, ts, map[string]string{"format": "pt"}, total/2)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("want several shards, got %v", names)
	}
	return names
}

// A table of user mistakes: each must fail with exactly this message and
// exit code, never panic and never leave an output file behind.
func TestUserMistakes(t *testing.T) {
	root := t.TempDir()
	good := filepath.Join(root, "good")
	o := mistakeModel(t, good, nil)
	ids := make([]int32, 80)
	for i := range ids {
		ids[i] = int32(10 + (i*i*7+3*i)%400)
	}
	tokens := filepath.Join(root, "tokens.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	badTokens := filepath.Join(root, "bad.i32")
	dataset.WriteTokens(badTokens, []int32{1, 2, 3, 700, 5, 6})
	text := filepath.Join(root, "t.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10)), 0o644)
	badText := filepath.Join(root, "latin1.txt")
	os.WriteFile(badText, []byte("caf\xe9 au lait"), 0o644)

	noConfig := copyModel(t, good, filepath.Join(root, "noconfig"))
	os.Remove(filepath.Join(noConfig, "config.json"))
	noTok := copyModel(t, good, filepath.Join(root, "notok"))
	os.Remove(filepath.Join(noTok, "tokenizer.json"))
	badTok := copyModel(t, good, filepath.Join(root, "badtok"))
	os.WriteFile(filepath.Join(badTok, "tokenizer.json"), []byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [`), 0o644)
	// Tokenizer of a 1024-id vocabulary next to a 512-id model.
	bigTok := filepath.Join(root, "bigtok")
	mistakeModel(t, bigTok, func(o *fixtures.Options) { o.Vocab = 1024 })
	vocabMismatch := copyModel(t, good, filepath.Join(root, "vocab"))
	b, _ := os.ReadFile(filepath.Join(bigTok, "tokenizer.json"))
	os.WriteFile(filepath.Join(vocabMismatch, "tokenizer.json"), b, 0o644)
	arch := copyModel(t, good, filepath.Join(root, "arch"))
	editConfig(t, arch, func(m map[string]any) { m["model_type"] = "gpt_neox" })
	qfmt := copyModel(t, good, filepath.Join(root, "qfmt"))
	editConfig(t, qfmt, func(m map[string]any) {
		m["quantization_config"] = map[string]any{"quant_method": "hqq", "nbits": 4}
	})
	badConfig := copyModel(t, good, filepath.Join(root, "badconfig"))
	os.WriteFile(filepath.Join(badConfig, "config.json"), []byte(`{"model_type": "llama", "hidden_size": 32,`), 0o644)
	badHeader := copyModel(t, good, filepath.Join(root, "badheader"))
	{
		p := filepath.Join(badHeader, "model.safetensors")
		st, _ := os.ReadFile(p)
		binary.LittleEndian.PutUint64(st, 1<<60) // header length beyond the file
		os.WriteFile(p, st, 0o644)
	}
	sharded := filepath.Join(root, "sharded")
	shards := writeShardedModel(t, good, sharded, o)
	truncShard := copyModel(t, sharded, filepath.Join(root, "truncshard"))
	{
		p := filepath.Join(truncShard, shards[1])
		st, _ := os.ReadFile(p)
		os.WriteFile(p, st[:len(st)-100], 0o644)
	}
	missingShard := copyModel(t, sharded, filepath.Join(root, "missingshard"))
	os.Remove(filepath.Join(missingShard, shards[1]))
	// NaN in the embedding row of token 30, which the stream holds at
	// position 4.
	nanModel := copyModel(t, good, filepath.Join(root, "nan"))
	{
		ts, err := fixtures.Tensors(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			if x.Name == "model.embed_tokens.weight" {
				binary.LittleEndian.PutUint32(x.Data[4*30*o.Hidden:], math.Float32bits(float32(math.NaN())))
			}
		}
		if err := checkpoint.WriteFile(filepath.Join(nanModel, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
	}
	nanTokens := filepath.Join(root, "nan.i32")
	dataset.WriteTokens(nanTokens, []int32{1, 11, 12, 13, 30, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26})

	// Quantized checkpoints whose config and tensors disagree.
	quantized := filepath.Join(root, "w4")
	if code, _, stderr := runQPPL(t, "quantize", "--model", good, "--scheme", "W4A16-G32", "--out", quantized); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	badGroup := copyModel(t, quantized, filepath.Join(root, "badgroup"))
	editConfig(t, badGroup, func(m map[string]any) {
		m["quantization_config"].(map[string]any)["config_groups"].(map[string]any)["group_0"].(map[string]any)["weights"].(map[string]any)["group_size"] = 24
	})

	out := filepath.Join(root, "out")
	os.MkdirAll(out, 0o755)
	evalArgs := func(model string, extra ...string) []string {
		a := []string{"eval", "--model", model, "--json", filepath.Join(out, "r.json"), "--nll-out", filepath.Join(out, "nll.f64")}
		if len(extra) == 0 || (extra[0] != "--text" && extra[0] != "--tokens") {
			a = append(a, "--tokens", tokens)
		}
		return append(a, extra...)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing config.json", evalArgs(noConfig, "--ctx", "16"), 2, "qppl: not found: ROOT/noconfig/config.json: no config.json in the model directory\n"},
		{"tokenizer missing", evalArgs(noTok, "--text", text, "--ctx", "16"), 2, "qppl: eval: ROOT/notok has no tokenizer.json to tokenize the text with: add the model's tokenizer.json, or tokenize elsewhere and pass --tokens FILE.i32\n"},
		{"malformed tokenizer.json", evalArgs(badTok, "--text", text, "--ctx", "16"), 2, "qppl: eval: tokenizer ROOT/badtok/tokenizer.json: invalid JSON: unexpected end of JSON input\n"},
		{"text not UTF-8", evalArgs(good, "--text", badText, "--ctx", "4"), 2, "qppl: eval: --text: dataset: ROOT/latin1.txt: invalid UTF-8 at byte offset 3\n"},
		{"vocab size mismatch", evalArgs(vocabMismatch, "--ctx", "16"), 2, "qppl: eval: ROOT/vocab/tokenizer.json has 1024 token ids but config.json's vocab_size is 512: the tokenizer does not belong to this model\n"},
		{"token id >= vocab", evalArgs(good, "--tokens", badTokens, "--ctx", "4", "--stride", "1"), 2, "qppl: eval: ROOT/bad.i32: token 700 (position 3) is outside the model's vocabulary [0, 512)\n"},
		{"ctx larger than the stream", evalArgs(good, "--ctx", "100"), 2, "qppl: ctx 100 needs more than 100 tokens, but the token stream has 80: no window fits (compare_q windows need n > ctx)\n"},
		{"stride 0", evalArgs(good, "--ctx", "16", "--stride", "0"), 2, "qppl: eval: --stride 0: must be >= 1\n"},
		{"rows beyond the stream", evalArgs(good, "--ctx", "16", "--stride", "8", "--rows", "50"), 2, "qppl: rows 50 is beyond the token stream: 80 tokens give only 8 compare_q windows of ctx 16 stride 8\n"},
		{"unsupported architecture", evalArgs(arch, "--ctx", "16"), 2, "qppl: invalid config: ROOT/arch/config.json: unsupported model_type \"gpt_neox\" (supported: " + strings.Join(fixtures.Architectures(), ", ") + ")\n"},
		{"unsupported quant format", evalArgs(qfmt, "--ctx", "16"), 2, "qppl: eval: ROOT/qfmt/config.json: quantization_config: unsupported quant_method \"hqq\" (supported: compressed-tensors, gptq, awq, fp8, modelopt, bitsandbytes, auto-round, mxfp4)\n"},
		{"malformed config.json", evalArgs(badConfig, "--ctx", "16"), 2, "qppl: invalid config: ROOT/badconfig/config.json: not a JSON object: unexpected end of JSON input\n"},
		{"bad safetensors header", evalArgs(badHeader, "--ctx", "16"), 2, "qppl: invalid safetensors: ROOT/badheader/model.safetensors: header length 1152921504606846976 exceeds the limit 100000000\n"},
		{"truncated shard", evalArgs(truncShard, "--ctx", "16"), 2, "qppl: invalid safetensors: ROOT/truncshard/model-00002-of-00002.safetensors: tensor \"model.norm.weight\": data_offsets [49408 49536] run past the end of the data (49436 bytes)\n"},
		{"index names a missing shard", evalArgs(missingShard, "--ctx", "16"), 2, "qppl: not found: ROOT/missingshard/model.safetensors.index.json names model-00002-of-00002.safetensors (for 10 tensors), which does not exist\n"},
		{"group size not dividing", evalArgs(badGroup, "--ctx", "16"), 2, "qppl: reference: ROOT/badgroup: module model.layers.0.self_attn.q_proj: quantization_config group_size 24 does not divide in_features 32\n"},
		{"NaN in a window", evalArgs(nanModel, "--tokens", nanTokens, "--ctx", "8", "--stride", "8"), 1, "qppl: window 0: reference: position 0: non-finite logit NaN\n"},
	}
	for _, tc := range tests {
		code, stdout, stderr := runQPPL(t, tc.args...)
		stderr = strings.ReplaceAll(stderr, root, "ROOT")
		if code != tc.code || stderr != tc.want {
			t.Errorf("%s: exit %d, stderr\n%q\nwant exit %d,\n%q", tc.name, code, stderr, tc.code, tc.want)
		}
		if stdout != "" {
			t.Errorf("%s: stdout %q", tc.name, stdout)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("%s: left %v in the output directory", tc.name, ents)
		}
	}
	// The good model passes the same command (the table's failures are the
	// mistakes, not the harness).
	if code, _, stderr := runQPPL(t, evalArgs(good, "--ctx", "16")...); code != 0 {
		t.Errorf("good model: exit %d: %s", code, stderr)
	}
}
