package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// FuzzLoad feeds arbitrary bytes to the tokenizer.json parser: it must
// return an error or a tokenizer, never panic; a tokenizer that loads must
// encode and decode without panicking too. The seed corpus is in
// testdata/fuzz/FuzzLoad (small real-shaped files, valid and broken).
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		tk, err := FromJSON(data, nil)
		if err != nil {
			if tk != nil {
				t.Fatal("tokenizer returned with an error")
			}
			return
		}
		for _, s := range []string{"", "Hello world", " a\n\n b", "<s>ab\xff", "▁é 12345 'll"} {
			for _, special := range []bool{false, true} {
				ids := tk.Encode(s, special)
				for _, id := range ids {
					if id < 0 || int(id) >= tk.VocabSize() {
						t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tk.VocabSize())
					}
				}
				_ = tk.Decode(ids, special)
			}
		}
		_ = tk.Decode([]int32{-1, 0, 1, 2, 1 << 30}, false)
		_, _ = tk.BOS()
	})
}

// TestFuzzSeeds checks the seed corpus does what its names say, so that
// fuzzing starts from files that reach the encoder.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzLoad")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	broken := map[string]bool{"merge_unknown": true, "bad_regex": true, "truncated": true, "huge_id": true}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		body, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
		body, ok2 := strings.CutSuffix(body, ")")
		if !ok || !ok2 {
			t.Fatalf("%s: not a fuzz corpus file", e.Name())
		}
		data, err := strconv.Unquote(body)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		tk, err := FromJSON([]byte(data), nil)
		if broken[e.Name()] != (err != nil) {
			t.Errorf("%s: error %v", e.Name(), err)
			continue
		}
		if tk != nil && len(tk.Encode("Hello ab a\n", true)) == 0 {
			t.Errorf("%s: encodes to nothing", e.Name())
		}
	}
}

// FuzzScanner checks the hand-written scanners against regexp2 on
// arbitrary text (U+017F and the Unicode 16 letters and numbers that Go's
// tables lack are excluded: see scannerAlphabet and unicode16.go).
func FuzzScanner(f *testing.F) {
	for _, s := range []string{"Hello world", "I'm 12345!\n\n  x", "a \u00a0b\u2028\u2028c", "(hé)\r\n\t'LL 😀"} {
		f.Add(s)
	}
	res := []*regexp2.Regexp{
		regexp2.MustCompile(gpt2Regex, regexp2.None),
		regexp2.MustCompile(llama3Regex, regexp2.None),
		regexp2.MustCompile(qwen2Regex, regexp2.None),
	}
	kinds := []knownPattern{knownGPT2, knownLlama3, knownQwen2}
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if strings.ContainsRune(s, '\u017F') || strings.ContainsFunc(s, newerThanGo) || len(s) > 4096 {
			return
		}
		for i, k := range kinds {
			want := regexFindAll(res[i], s)
			var got [][2]int
			scanKnown(k, s, func(a, b int) { got = append(got, [2]int{a, b}) })
			if !equalRanges(got, want) {
				t.Fatalf("pattern %d on %q:\n scanner %v\n regexp2 %v", k, s, got, want)
			}
		}
	})
}
