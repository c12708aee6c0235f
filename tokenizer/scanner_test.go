package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// scannerAlphabet mixes every class the patterns distinguish: ASCII and
// non-ASCII letters, digits and other numbers, the whole White_Space set,
// newlines, apostrophes and contraction letters in both cases, symbols,
// combining marks, emoji. U+017F is left out on purpose: Oniguruma (HF)
// case-folds it to "s" in (?i:'s) while regexp2 does not; the scanner
// follows Oniguruma (tested separately below).
var scannerAlphabet = []rune("aZsStTrReEvVmMlLdDx'''  \t\n\r\v\f" +
	"\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000" +
	"09²½Ⅻ٣" + "éßΩжあ中ǅʰ" + "!.,-_()[]{}$+<=>^`|~\"#%&*/:;?@\\" + "\u0301\u20dd" + "😀🙂\u200d€")

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(scannerAlphabet[r.IntN(len(scannerAlphabet))])
	}
	return b.String()
}

func TestScannerMatchesRegexp2(t *testing.T) {
	for _, tc := range []struct {
		name string
		re   string
	}{{"gpt2", gpt2Regex}, {"llama3", llama3Regex}, {"qwen2", qwen2Regex}} {
		t.Run(tc.name, func(t *testing.T) {
			k := knownFor(tc.re)
			if k == knownNone {
				t.Fatal("pattern not recognised as known")
			}
			re := regexp2.MustCompile(tc.re, regexp2.None)
			r := rand.New(rand.NewPCG(7, uint64(k)))
			for iter := 0; iter < 20000; iter++ {
				s := randomText(r, 1+r.IntN(24))
				want := regexFindAll(re, s)
				var got [][2]int
				scanKnown(k, s, func(a, b int) { got = append(got, [2]int{a, b}) })
				if !equalRanges(got, want) {
					t.Fatalf("%q:\n scanner %v\n regexp2 %v", s, got, want)
				}
			}
		})
	}
}

func equalRanges(a, b [][2]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestScannerCases pins hand-checked splits, including the look-ahead
// and newline alternatives and Oniguruma's case folding of U+017F.
func TestScannerCases(t *testing.T) {
	for _, tc := range []struct {
		k    knownPattern
		in   string
		want []string
	}{
		{knownGPT2, "Hello world", []string{"Hello", " world"}},
		{knownGPT2, "a  b", []string{"a", " ", " b"}},
		{knownGPT2, "a  ", []string{"a", "  "}},
		{knownGPT2, "I'm 12345!", []string{"I", "'m", " 12345", "!"}},
		{knownGPT2, "'S", []string{"'", "S"}},
		{knownLlama3, "'S 'ſ", []string{"'S", " '", "ſ"}},
		{knownLlama3, "x'ſy", []string{"x", "'ſ", "y"}},
		{knownLlama3, "x'ſab", []string{"x", "'ſ", "ab"}}, // HF tokenizers 0.23.2 pre_tokenize_str
		{knownLlama3, "a  b", []string{"a", " ", " b"}},
		{knownLlama3, "a  b", []string{"a", " ", " b"}},
		{knownLlama3, "12345", []string{"123", "45"}},
		{knownQwen2, "123", []string{"1", "2", "3"}},
		{knownLlama3, "a \n\n b", []string{"a", " \n\n", " b"}},
		{knownLlama3, "(hello)\n\nx", []string{"(hello", ")\n\n", "x"}},
		{knownLlama3, "a \t b", []string{"a", " \t", " b"}},
		{knownLlama3, "\tb", []string{"\tb"}},
		{knownLlama3, "x ...", []string{"x", " ..."}},
	} {
		var got []string
		scanKnown(tc.k, tc.in, func(a, b int) { got = append(got, tc.in[a:b]) })
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("pattern %d %q: got %q want %q", tc.k, tc.in, got, tc.want)
		}
	}
}
