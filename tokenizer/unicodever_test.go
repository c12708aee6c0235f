package tokenizer

import (
	"reflect"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestUnicodeVersions pins what the HF tokenizers library (0.23.2) does
// with characters whose Unicode data differs between HF and Go: Unicode 16
// letters and numbers in the split regexes, Unicode 17 numbers and case
// mappings in Digits and Lowercase, and characters HF's Unicode 9.0
// normalizers do not know. (The tables were checked against HF over every
// code point; these cases keep a sample of each.)
func TestUnicodeVersions(t *testing.T) {
	for _, tc := range []struct {
		k    knownPattern
		in   string
		want []string
	}{
		{knownLlama3, "a\U00013F14,l\u028F", []string{"a\U00013F14", ",l\u028F"}},
		{knownLlama3, "12\U00016D703", []string{"12\U00016D70", "3"}},
		{knownGPT2, " \U00010D4Ax", []string{" \U00010D4Ax"}},
	} {
		var got []string
		scanKnown(tc.k, tc.in, func(a, b int) { got = append(got, tc.in[a:b]) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("pattern %d %+q: got %+q want %+q", tc.k, tc.in, got, tc.want)
		}
	}
	// Digits uses Rust's char::is_numeric: Unicode 17 (U+11DE0 is new in 17).
	if got := preSplit(t, obj{"type": "Digits", "individual_digits": true}, "a\U00016D70b\U00011DE0"); !reflect.DeepEqual(got, []string{"a", "\U00016D70", "b", "\U00011DE0"}) {
		t.Errorf("Digits: got %+q", got)
	}
	// Lowercase uses Rust's char::to_lowercase: Unicode 17.
	if got := (lowercaseNormalizer{}).normalize("\U00010D50\uA7CB\U00016EA0\u0130A"); got != "\U00010D70\u0264\U00016EBBi\u0307a" {
		t.Errorf("Lowercase: got %+q", got)
	}
	for _, tc := range []struct {
		f       norm.Form
		in, out string
	}{
		{norm.NFC, "\u301C\u1ACA\u0F7B%", "\u301C\u1ACA\u0F7B%"}, // Go alone would reorder the marks
		{norm.NFKC, "\u301C\u1ACA\u0F7B%", "\u301C\u1ACA\u0F7B%"},
		{norm.NFC, "\U00011935\U00011930", "\U00011935\U00011930"}, // Go alone would compose U+11938
		{norm.NFKC, "\U0001F16Cx", "\U0001F16Cx"},                  // Go alone would give "MRx"
		{norm.NFC, "e\u0301\u1ACAe\u0301", "\u00E9\u1ACA\u00E9"},
		{norm.NFD, "e\u0301\u1ACAe\u0301", "e\u0301\u1ACAe\u0301"},
		{norm.NFC, "plain ASCII", "plain ASCII"},
	} {
		if got := (unicodeNormalizer{tc.f}).normalize(tc.in); got != tc.out {
			t.Errorf("form %v %+q: got %+q want %+q", tc.f, tc.in, got, tc.out)
		}
	}
}
