package tokenizer

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// shared is ../shared relative to the repository root.
var shared = filepath.Join("..", "..", "shared")

// loaded keeps the shared tokenizers loaded once per test binary.
var loaded = struct {
	sync.Mutex
	m map[string]*Tokenizer
}{m: map[string]*Tokenizer{}}

func loadShared(t testing.TB, name string) *Tokenizer {
	t.Helper()
	p := filepath.Join(shared, "tokenizers", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared tokenizer not found: %v", err)
	}
	loaded.Lock()
	defer loaded.Unlock()
	if tk := loaded.m[name]; tk != nil {
		return tk
	}
	tk, err := Load(p)
	if err != nil {
		t.Fatalf("Load(%s): %v", p, err)
	}
	loaded.m[name] = tk
	return tk
}

func readShared(t testing.TB, rel ...string) []byte {
	t.Helper()
	p := filepath.Join(append([]string{shared}, rel...)...)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("shared file not found: %v", err)
	}
	return b
}

func readI32(t testing.TB, rel ...string) []int32 {
	t.Helper()
	b := readShared(t, rel...)
	if len(b)%4 != 0 {
		t.Fatalf("%s: length %d not a multiple of 4", filepath.Join(rel...), len(b))
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// firstDiff describes the first difference between got and want ids.
func firstDiff(tk *Tokenizer, got, want []int32) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return ""
	}
	lo, hi := max(i-8, 0), i+8
	win := func(ids []int32) string {
		h := min(hi, len(ids))
		if lo >= h {
			return "[]"
		}
		var toks []string
		for _, id := range ids[lo:h] {
			s, _ := tk.IDToToken(id)
			toks = append(toks, fmt.Sprintf("%d:%q", id, s))
		}
		return strings.Join(toks, " ")
	}
	ctxText := tk.Decode(want[lo:min(hi, len(want))], false)
	return fmt.Sprintf("len got %d want %d; first difference at index %d\n got  %s\n want %s\n text around: %q",
		len(got), len(want), i, win(got), win(want), ctxText)
}

var goldenTokenizers = []string{"llama3", "mistral", "gpt2"}

func TestGoldenCorpus(t *testing.T) {
	text := string(readShared(t, "data", "wikitext-2-raw-v1", "test.joined.txt"))
	for _, name := range goldenTokenizers {
		t.Run(name, func(t *testing.T) {
			tk := loadShared(t, name)
			for _, special := range []int{0, 1} {
				want := readI32(t, "golden", "tokens", fmt.Sprintf("%s.test-joined.special%d.i32", name, special))
				got := tk.Encode(text, special == 1)
				if d := firstDiff(tk, got, want); d != "" {
					t.Errorf("special=%d: %s", special, d)
				}
			}
		})
	}
}

// vocabTests splits inputs.txt: each string is followed by the line
// "__ggml_vocab_test__"; the newline before that line is not part of the
// string.
func vocabTests(t *testing.T) []string {
	b := string(readShared(t, "golden", "vocab-tests", "inputs.txt"))
	parts := strings.Split(b, "\n__ggml_vocab_test__\n")
	if last := parts[len(parts)-1]; last != "" {
		t.Fatalf("inputs.txt does not end with a separator: %q", last)
	}
	return parts[:len(parts)-1]
}

func TestGoldenVocab(t *testing.T) {
	inputs := vocabTests(t)
	if len(inputs) != 46 {
		t.Fatalf("inputs.txt: %d strings, want 46", len(inputs))
	}
	for _, name := range goldenTokenizers {
		t.Run(name, func(t *testing.T) {
			tk := loadShared(t, name)
			lines := strings.Split(strings.TrimSuffix(string(readShared(t, "golden", "vocab-tests", name+".out")), "\n"), "\n")
			if len(lines) != len(inputs) {
				t.Fatalf("%s.out: %d lines for %d inputs", name, len(lines), len(inputs))
			}
			for i, in := range inputs {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					v, err := strconv.ParseInt(f, 10, 32)
					if err != nil {
						t.Fatalf("%s.out line %d: %v", name, i+1, err)
					}
					want = append(want, int32(v))
				}
				got := tk.Encode(in, false)
				if d := firstDiff(tk, got, want); d != "" {
					t.Errorf("input %d %q: %s", i, in, d)
				}
			}
		})
	}
}

func TestRoundTripCorpus(t *testing.T) {
	text := string(readShared(t, "data", "wikitext-2-raw-v1", "test.joined.txt"))
	for _, name := range []string{"llama3", "mistral", "gpt2", "qwen3", "smollm2"} {
		t.Run(name, func(t *testing.T) {
			tk := loadShared(t, name)
			ids := tk.Encode(text, false)
			if len(ids) < len(text)/8 {
				t.Fatalf("%d ids for %d bytes", len(ids), len(text))
			}
			if got := tk.Decode(ids, false); got != text {
				i := 0
				for i < len(got) && i < len(text) && got[i] == text[i] {
					i++
				}
				t.Fatalf("Decode(Encode(corpus)) differs at byte %d: got %q want %q", i,
					got[i:min(i+40, len(got))], text[i:min(i+40, len(text))])
			}
		})
	}
}

// TestHFEdgeCases pins ids produced by the HF tokenizers library (v0.23.2,
// add_special_tokens=True) for added tokens inside text, byte fallback,
// Oniguruma's case folding of U+017F in (?i:'s) and digit splitting.
func TestHFEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		tok, in string
		want    []int32
	}{
		{"llama3", "x'ſ'S", []int32{128000, 87, 6, 129, 123, 13575}},
		{"llama3", "<|begin_of_text|>Hello<|end_of_text|>", []int32{128000, 128000, 9906, 128001}},
		{"mistral", "<s>Hello</s> world", []int32{1, 1, 22557, 2, 28705, 1526}},
		{"mistral", "a\né😀", []int32{1, 264, 13, 28797, 30575}},
		{"gpt2", " <|endoftext|>  a", []int32{220, 50256, 220, 257}},
		{"qwen3", "12345 <|im_start|>x", []int32{16, 17, 18, 19, 20, 220, 151644, 87}},
		{"smollm2", "abc123 d", []int32{25276, 33, 34, 35, 287}},
	} {
		tk := loadShared(t, tc.tok)
		if got := tk.Encode(tc.in, true); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %q: got %v want %v", tc.tok, tc.in, got, tc.want)
		}
	}
}

// TestRegexFallbackCorpus runs the Llama-3 and GPT-2 splits through the
// generic regexp2 path (the pattern wrapped in a group, so the scanner does
// not recognise it) and checks the ids against the goldens too.
func TestRegexFallbackCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: regexp2 over the whole corpus")
	}
	text := string(readShared(t, "data", "wikitext-2-raw-v1", "test.joined.txt"))
	for _, tc := range []struct{ name, from, to string }{
		{"llama3", mustJSON(llama3Regex), mustJSON("(?:" + llama3Regex + ")")},
		{"gpt2", `"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`,
			`"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ` + mustJSON("(?:"+gpt2Regex+")") +
				`}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := string(readShared(t, "tokenizers", tc.name, "tokenizer.json"))
			if strings.Count(js, tc.from) != 1 {
				t.Fatalf("pattern to replace found %d times", strings.Count(js, tc.from))
			}
			tk, err := FromJSON([]byte(strings.Replace(js, tc.from, tc.to, 1)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !hasGenericSplit(tk.pre) {
				t.Fatal("the modified file still uses the scanner")
			}
			want := readI32(t, "golden", "tokens", tc.name+".test-joined.special0.i32")
			if d := firstDiff(tk, tk.Encode(text, false), want); d != "" {
				t.Error(d)
			}
		})
	}
}

func hasGenericSplit(p preTokenizer) bool {
	switch p := p.(type) {
	case seqPre:
		for _, q := range p {
			if hasGenericSplit(q) {
				return true
			}
		}
	case *splitPre:
		return p.pat.isRe && p.pat.known == knownNone
	}
	return false
}
