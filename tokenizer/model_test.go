package tokenizer_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/tokenizer"
)

// writeModel writes a fixture model of vocab ids (tokenizer BOS vocab-2,
// EOS vocab-1) and applies edit to its config.json.
func writeModel(t *testing.T, vocab int, edit map[string]any) string {
	t.Helper()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab = vocab
	o.Init = fixtures.InitRandom
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	editJSON(t, filepath.Join(dir, "config.json"), edit)
	return dir
}

func editJSON(t *testing.T, path string, edit map[string]any) {
	t.Helper()
	c := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range edit {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, _ := json.Marshal(c)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceTokenizer puts the fixture tokenizer of another vocabulary size
// into dir.
func replaceTokenizer(t *testing.T, dir string, vocab int) {
	t.Helper()
	tok := fixtures.NewTokenizer(vocab)
	j, err := tok.JSON()
	if err != nil {
		t.Fatal(err)
	}
	c, err := tok.ConfigJSON(2048)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), j, 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), c, 0o644)
}

// issue 11 item 2: a tokenizer whose id range or BOS/EOS/PAD ids disagree
// with config.json or generation_config.json is refused, naming both
// values and both files.
func TestCheckModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vocab  int
		edit   map[string]any // config.json
		gen    map[string]any // generation_config.json (nil: none)
		tok    int            // replace the tokenizer by one of this size (0: keep)
		tokCfg map[string]any // tokenizer_config.json edit
		want   []string       // error substrings; nil: accepted
	}{
		{name: "consistent", vocab: 512},
		{name: "eos list", vocab: 512, edit: map[string]any{"eos_token_id": []int{7, 511}}},
		{name: "no special ids", vocab: 512, edit: map[string]any{"bos_token_id": nil, "eos_token_id": nil}},
		{name: "generation config agrees", vocab: 512, gen: map[string]any{"bos_token_id": 510, "eos_token_id": []int{511}, "pad_token_id": 511}},
		{name: "padded vocabulary", vocab: 1024, tok: 1000, edit: map[string]any{"bos_token_id": 998, "eos_token_id": 999}},
		{name: "bos differs", vocab: 512, edit: map[string]any{"bos_token_id": 1},
			want: []string{`post-processor BOS "<|begin_of_text|>" is id 510`, "config.json bos_token_id 1", "tokenizer.json"}},
		{name: "eos differs", vocab: 512, edit: map[string]any{"eos_token_id": []int{3, 4}},
			want: []string{`tokenizer_config.json eos_token "<|end_of_text|>" is id 511`, "config.json eos_token_id [3, 4]"}},
		{name: "generation config bos differs", vocab: 512, gen: map[string]any{"bos_token_id": 2},
			want: []string{"is id 510", "generation_config.json bos_token_id 2"}},
		{name: "generation config pad differs", vocab: 512, gen: map[string]any{"pad_token_id": 0}},
		{name: "smaller tokenizer", vocab: 1024, tok: 512,
			want: []string{"is id 510", "config.json bos_token_id 1022"}},
		{name: "smaller tokenizer without special ids", vocab: 1024, tok: 512, edit: map[string]any{"bos_token_id": nil, "eos_token_id": nil},
			want: []string{"has 512 token ids, fewer than", "vocab_size 1024", "no BOS/EOS/PAD id in common"}},
		{name: "model eos outside the tokenizer", vocab: 1024, tok: 512, tokCfg: map[string]any{"eos_token": nil}, edit: map[string]any{"bos_token_id": 510, "eos_token_id": 900},
			want: []string{"config.json eos_token_id 900 is not a token of", "(512 ids)"}},
		{name: "larger tokenizer", vocab: 512, tok: 1024,
			want: []string{"has 1024 token ids but config.json's vocab_size is 512"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModel(t, tc.vocab, tc.edit)
			if tc.tok > 0 {
				replaceTokenizer(t, dir, tc.tok)
			}
			if tc.tokCfg != nil {
				editJSON(t, filepath.Join(dir, "tokenizer_config.json"), tc.tokCfg)
			}
			if tc.gen != nil {
				editJSON(t, filepath.Join(dir, "generation_config.json"), tc.gen)
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			err = tok.CheckModel(dir, dir, tc.vocab)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tokenizer.ErrModelMismatch) {
				t.Fatalf("err %v, want ErrModelMismatch", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// The shared trained model's tokenizer and config agree.
func TestCheckModelShared(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "models", "tiny-wt2-mistral")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared model absent (%v): run with ../shared", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.CheckModel(dir, dir, 32000); err != nil {
		t.Error(err)
	}
}
