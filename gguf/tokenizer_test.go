package gguf_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/tokenizer"
)

// shared is ../shared relative to the repository root.
var shared = filepath.Join("..", "..", "shared")

func readSharedFile(t *testing.T, rel ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{shared}, rel...)...))
	if err != nil {
		t.Skipf("shared file not found (tests read ../shared beside the repository): %v", err)
	}
	return b
}

// specialID is the id of tokenizer_config.json's <typ>_token (as gguf-py's
// SpecialVocab finds it), -1 when there is none.
func specialID(t *testing.T, dir string, tok *tokenizer.Tokenizer, typ string) int {
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return -1
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var s string
	if json.Unmarshal(c[typ+"_token"], &s) != nil || s == "" {
		var o struct{ Content string }
		if json.Unmarshal(c[typ+"_token"], &o) != nil || o.Content == "" {
			return -1
		}
		s = o.Content
	}
	id, ok := tok.TokenToID(s)
	if !ok {
		t.Fatalf("%s_token %q not in the vocabulary", typ, s)
	}
	return int(id)
}

// ggufTokenizer converts a shared tokenizer into GGUF metadata as
// llama.cpp's converter does (gguf's Convert), rebuilds a tokenizer from
// that metadata and returns it with the original and the pre label.
func ggufTokenizer(t *testing.T, name string) (rebuilt, orig *tokenizer.Tokenizer, pre string, err error) {
	t.Helper()
	dir := filepath.Join(shared, "tokenizers", name)
	readSharedFile(t, "tokenizers", name, "tokenizer.json")
	orig, err = tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &checkpoint.Config{BOSTokenID: specialID(t, dir, orig, "bos"), EOSTokenID: specialID(t, dir, orig, "eos")}
	kvs, err := gguf.TokenizerKVs(filepath.Join(dir, "tokenizer.json"), orig.VocabSize(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if kv.Key == "tokenizer.ggml.pre" {
			pre, _ = kv.Value.Str()
		}
	}
	tj, tc, err := gguf.BuildTokenizerJSON(kvs, name+".gguf")
	if err != nil {
		return nil, orig, pre, err
	}
	rebuilt, err = tokenizer.FromJSON(tj, tc)
	if err != nil {
		t.Fatalf("%s: rebuilt tokenizer.json does not load: %v", name, err)
	}
	return rebuilt, orig, pre, nil
}

func readI32s(t *testing.T, rel ...string) []int32 {
	b := readSharedFile(t, rel...)
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func firstDiffAt(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// vocabInputs splits shared/golden/vocab-tests/inputs.txt.
func vocabInputs(t *testing.T) []string {
	b := string(readSharedFile(t, "golden", "vocab-tests", "inputs.txt"))
	parts := strings.Split(b, "\n__ggml_vocab_test__\n")
	return parts[:len(parts)-1]
}

// TestTokenizerFromGGUF: each shared byte-level BPE tokenizer, converted to
// tokenizer.ggml.* metadata as llama.cpp's converter writes it (pre label,
// token types, merges, BOS/EOS and add_bos/add_eos) and rebuilt from that
// metadata alone, gives the Hugging Face ids: the shared goldens (gpt2,
// llama3: WikiText-2 test text with and without special tokens, and the
// vocabulary tests) and, for qwen3 and smollm2 (no goldens), the original
// tokenizer.json's ids on the same texts; every id maps to the same
// string. The SentencePiece-style mistral tokenizer is refused, asking
// for --tokenizer.
func TestTokenizerFromGGUF(t *testing.T) {
	text := string(readSharedFile(t, "data", "wikitext-2-raw-v1", "test.joined.txt"))
	inputs := vocabInputs(t)
	for _, c := range []struct {
		name, pre string
		golden    bool
	}{{"gpt2", "gpt-2", true}, {"llama3", "llama-bpe", true}, {"qwen3", "qwen2", false}, {"smollm2", "smollm", false}} {
		t.Run(c.name, func(t *testing.T) {
			got, orig, pre, err := ggufTokenizer(t, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if pre != c.pre {
				t.Errorf("tokenizer.ggml.pre %q, want %q", pre, c.pre)
			}
			for id := range int32(orig.VocabSize()) {
				a, okA := orig.IDToToken(id)
				b, okB := got.IDToToken(id)
				if a != b || okA != okB {
					t.Fatalf("id %d: rebuilt %q (%v), original %q (%v)", id, b, okB, a, okA)
				}
			}
			if b1, ok1 := orig.BOS(); true {
				if b2, ok2 := got.BOS(); b1 != b2 || ok1 != ok2 {
					t.Errorf("BOS %d %v, original %d %v", b2, ok2, b1, ok1)
				}
			}
			for special := range 2 {
				ids := got.Encode(text, special == 1)
				want := orig.Encode(text, special == 1)
				if c.golden {
					want = readI32s(t, "golden", "tokens", c.name+".test-joined.special"+string(rune('0'+special))+".i32")
				}
				if i := firstDiffAt(ids, want); i >= 0 {
					t.Errorf("corpus (special %d): %d ids, want %d; first difference at %d", special, len(ids), len(want), i)
				}
			}
			// Decomposed accents (NFC composes them: Qwen's normalizer),
			// digit runs (grouping differs per label), special tokens in
			// the text.
			for _, in := range []string{"cafe\u0301 A\u030angstro\u0308m", "12345678 3.14159", "x<|endoftext|>y<|im_start|> <|begin_of_text|>z"} {
				if ids, want := got.Encode(in, true), orig.Encode(in, true); !slices.Equal(ids, want) {
					t.Errorf("%q: %v, original %v", in, ids, want)
				}
			}
			for i, in := range inputs {
				var want []int32
				if c.golden {
					lines := strings.Split(strings.TrimSuffix(string(readSharedFile(t, "golden", "vocab-tests", c.name+".out")), "\n"), "\n")
					for _, f := range strings.Fields(lines[i]) {
						var v int32
						if err := json.Unmarshal([]byte(f), &v); err != nil {
							t.Fatal(err)
						}
						want = append(want, v)
					}
				} else {
					want = orig.Encode(in, false)
				}
				if ids := got.Encode(in, false); !slices.Equal(ids, want) && !(len(ids) == 0 && len(want) == 0) {
					t.Errorf("vocab test %d %q: %v, want %v", i, in, ids, want)
				}
			}
		})
	}
	_, _, _, err := ggufTokenizer(t, "mistral")
	if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), "--tokenizer") || !strings.Contains(err.Error(), `"llama"`) {
		t.Errorf("mistral (SentencePiece-style): %v, want a refusal asking for --tokenizer", err)
	}
}

// TestTokenizerFromGGUFRefusals: labels whose Hugging Face pipeline qppl
// does not know exactly, and broken metadata, are refused naming the file
// and the key.
func TestTokenizerFromGGUFRefusals(t *testing.T) {
	base := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.StringValue("gpt-2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringArray([]string{"a", "b", "ab", "<|eot|>"})},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32Array([]int32{1, 1, 1, 3})},
		{Key: "tokenizer.ggml.merges", Value: gguf.StringArray([]string{"a b"})},
	}
	if _, _, err := gguf.BuildTokenizerJSON(base, "m.gguf"); err != nil {
		t.Fatalf("base: %v", err)
	}
	set := func(key string, v gguf.Value) []gguf.KV {
		out := slices.Clone(base)
		for i := range out {
			if out[i].Key == key {
				out[i].Value = v
				return out
			}
		}
		return append(out, gguf.KV{Key: key, Value: v})
	}
	drop := func(key string) []gguf.KV {
		return slices.DeleteFunc(slices.Clone(base), func(kv gguf.KV) bool { return kv.Key == key })
	}
	for _, c := range []struct {
		name string
		kvs  []gguf.KV
		want []string
	}{
		{"default pre", set("tokenizer.ggml.pre", gguf.StringValue("default")), []string{`tokenizer.ggml.pre "default"`, "--tokenizer"}},
		{"deepseek pre", set("tokenizer.ggml.pre", gguf.StringValue("deepseek-llm")), []string{`"deepseek-llm"`, "--tokenizer"}},
		{"no pre", drop("tokenizer.ggml.pre"), []string{`tokenizer.ggml.pre ""`}},
		{"spm", set("tokenizer.ggml.model", gguf.StringValue("llama")), []string{`tokenizer.ggml.model "llama"`, "--tokenizer"}},
		{"no types", drop("tokenizer.ggml.token_type"), []string{"token_type", "missing"}},
		{"short types", set("tokenizer.ggml.token_type", gguf.Int32Array([]int32{1})), []string{"token_type", "one per token"}},
		{"byte token", set("tokenizer.ggml.token_type", gguf.Int32Array([]int32{1, 6, 1, 3})), []string{"token type 6"}},
		{"bad merge", set("tokenizer.ggml.merges", gguf.StringArray([]string{"ab"})), []string{"merge 0"}},
		{"bos flag without id", set("tokenizer.ggml.add_bos_token", gguf.BoolValue(true)), []string{"bos_token_id is not set"}},
		{"bos out of range", set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(9)), []string{"bos_token_id", "below 4"}},
	} {
		_, _, err := gguf.BuildTokenizerJSON(c.kvs, "m.gguf")
		if err == nil || !strings.Contains(err.Error(), "m.gguf") {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v lacks %q", c.name, err, w)
			}
		}
	}
}
