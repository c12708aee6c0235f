package tokenizer

import "unicode"

// Unicode versions differ: HF's regex engine (Oniguruma) and Rust's char
// methods use Unicode 16.0, HF's normalizers Unicode 9.0, and Go's unicode
// and x/text/unicode/norm packages Unicode 15.0.0. The tables below make
// this package see characters exactly as HF does.
//
// letters16 and numbers16 hold exactly the difference for the classes the
// pre-tokenizers use: code points that are \p{L} or
// \p{N} for HF but not for Go (Garay, Gurung Khema, Kirat Rai, Ol Onal,
// Sunuwar, Todhri, Tulu-Tigalari, Egyptian Hieroglyphs Extended-A, ...).
// They were measured by running the HF library's Llama-3 pre-tokenizer on
// "a"+c and "1"+c for every code point c; there is no other difference
// for \p{L}, \p{N} or \s.
var (
	letters16 = &unicode.RangeTable{
		R16: []unicode.Range16{
			{Lo: 0x1C89, Hi: 0x1C8A, Stride: 1}, {Lo: 0xA7CB, Hi: 0xA7CD, Stride: 1}, {Lo: 0xA7DA, Hi: 0xA7DC, Stride: 1},
		},
		R32: []unicode.Range32{
			{Lo: 0x105C0, Hi: 0x105F3, Stride: 1}, {Lo: 0x10D4A, Hi: 0x10D65, Stride: 1}, {Lo: 0x10D6F, Hi: 0x10D85, Stride: 1},
			{Lo: 0x10EC2, Hi: 0x10EC4, Stride: 1}, {Lo: 0x11380, Hi: 0x11389, Stride: 1}, {Lo: 0x1138B, Hi: 0x1138B, Stride: 1},
			{Lo: 0x1138E, Hi: 0x1138E, Stride: 1}, {Lo: 0x11390, Hi: 0x113B5, Stride: 1}, {Lo: 0x113B7, Hi: 0x113B7, Stride: 1},
			{Lo: 0x113D1, Hi: 0x113D1, Stride: 1}, {Lo: 0x113D3, Hi: 0x113D3, Stride: 1}, {Lo: 0x11BC0, Hi: 0x11BE0, Stride: 1},
			{Lo: 0x13460, Hi: 0x143FA, Stride: 1}, {Lo: 0x16100, Hi: 0x1611D, Stride: 1}, {Lo: 0x16D40, Hi: 0x16D6C, Stride: 1},
			{Lo: 0x18CFF, Hi: 0x18CFF, Stride: 1}, {Lo: 0x1E5D0, Hi: 0x1E5ED, Stride: 1}, {Lo: 0x1E5F0, Hi: 0x1E5F0, Stride: 1},
			{Lo: 0x2EBF0, Hi: 0x2EE5D, Stride: 1},
		},
	}
	numbers16 = &unicode.RangeTable{
		R32: []unicode.Range32{
			{Lo: 0x10D40, Hi: 0x10D49, Stride: 1}, {Lo: 0x116D0, Hi: 0x116E3, Stride: 1}, {Lo: 0x11BF0, Hi: 0x11BF9, Stride: 1},
			{Lo: 0x16130, Hi: 0x16139, Stride: 1}, {Lo: 0x16D70, Hi: 0x16D79, Stride: 1}, {Lo: 0x1CCF0, Hi: 0x1CCF9, Stride: 1},
			{Lo: 0x1E5F1, Hi: 0x1E5FA, Stride: 1},
		},
	}
)

// isLetter is \p{L} as HF's regex engine sees it.
func isLetter(r rune) bool { return unicode.IsLetter(r) || unicode.Is(letters16, r) }

// isNumber is \p{N} (and Rust's char::is_numeric) as HF sees it.
func isNumber(r rune) bool { return unicode.IsNumber(r) || unicode.Is(numbers16, r) }

// hfNormInert holds the characters that have normalization properties in
// Go's tables (Unicode 15.0: a non-zero combining class, a canonical or
// compatibility decomposition, or a part in a composition) but none in the
// HF library's normalizers, whose data is Unicode 9.0 (the
// unicode-normalization-alignments crate): HF leaves them unchanged and
// treats them as starters. Measured by comparing, for every code point,
// HF's NFD/NFKD output and its reordering of "a"+c+U+0334 with Go's; no
// character has properties that differ in any other way.
var hfNormInert = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x7FD, Hi: 0x7FD, Stride: 1}, {Lo: 0x898, Hi: 0x89F, Stride: 1}, {Lo: 0x8CA, Hi: 0x8D3, Stride: 1},
		{Lo: 0x9FE, Hi: 0x9FE, Stride: 1}, {Lo: 0xC3C, Hi: 0xC3C, Stride: 1}, {Lo: 0xD3B, Hi: 0xD3C, Stride: 1},
		{Lo: 0xEBA, Hi: 0xEBA, Stride: 1}, {Lo: 0x1715, Hi: 0x1715, Stride: 1}, {Lo: 0x1ABF, Hi: 0x1ACE, Stride: 1},
		{Lo: 0x1DF6, Hi: 0x1DFA, Stride: 1}, {Lo: 0x32FF, Hi: 0x32FF, Stride: 1}, {Lo: 0xA7F2, Hi: 0xA7F4, Stride: 1},
		{Lo: 0xA82C, Hi: 0xA82C, Stride: 1}, {Lo: 0xAB69, Hi: 0xAB69, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x10781, Hi: 0x10785, Stride: 1}, {Lo: 0x10787, Hi: 0x107B0, Stride: 1}, {Lo: 0x107B2, Hi: 0x107BA, Stride: 1},
		{Lo: 0x10D24, Hi: 0x10D27, Stride: 1}, {Lo: 0x10EAB, Hi: 0x10EAC, Stride: 1}, {Lo: 0x10EFD, Hi: 0x10EFF, Stride: 1},
		{Lo: 0x10F46, Hi: 0x10F50, Stride: 1}, {Lo: 0x10F82, Hi: 0x10F85, Stride: 1}, {Lo: 0x11070, Hi: 0x11070, Stride: 1},
		{Lo: 0x1133B, Hi: 0x1133B, Stride: 1}, {Lo: 0x1145E, Hi: 0x1145E, Stride: 1}, {Lo: 0x11839, Hi: 0x1183A, Stride: 1},
		{Lo: 0x11930, Hi: 0x11930, Stride: 1}, // composes with U+11935 into U+11938 in Go only
		{Lo: 0x11938, Hi: 0x11938, Stride: 1}, {Lo: 0x1193D, Hi: 0x1193E, Stride: 1}, {Lo: 0x11943, Hi: 0x11943, Stride: 1},
		{Lo: 0x119E0, Hi: 0x119E0, Stride: 1}, {Lo: 0x11A34, Hi: 0x11A34, Stride: 1}, {Lo: 0x11A47, Hi: 0x11A47, Stride: 1},
		{Lo: 0x11A99, Hi: 0x11A99, Stride: 1}, {Lo: 0x11D42, Hi: 0x11D42, Stride: 1}, {Lo: 0x11D44, Hi: 0x11D45, Stride: 1},
		{Lo: 0x11D97, Hi: 0x11D97, Stride: 1}, {Lo: 0x11F41, Hi: 0x11F42, Stride: 1}, {Lo: 0x16FF0, Hi: 0x16FF1, Stride: 1},
		{Lo: 0x1E030, Hi: 0x1E06D, Stride: 1}, {Lo: 0x1E08F, Hi: 0x1E08F, Stride: 1}, {Lo: 0x1E130, Hi: 0x1E136, Stride: 1},
		{Lo: 0x1E2AE, Hi: 0x1E2AE, Stride: 1}, {Lo: 0x1E2EC, Hi: 0x1E2EF, Stride: 1}, {Lo: 0x1E4EC, Hi: 0x1E4EF, Stride: 1},
		{Lo: 0x1F16C, Hi: 0x1F16C, Stride: 1}, {Lo: 0x1FBF0, Hi: 0x1FBF9, Stride: 1},
	},
}

// isNormInert reports whether HF's normalizers leave r alone as an
// unknown starter while Go's would not.
func isNormInert(r rune) bool { return r >= 0x7FD && unicode.Is(hfNormInert, r) }

// rustNumeric17 and isRustNumeric are Rust's char::is_numeric (HF's Digits pre-tokenizer),
// Unicode 17: the Unicode 16 numbers above plus Tolong Siki digits and
// U+16FF4..U+16FF6 (measured over every code point with HF's Digits).
var rustNumeric17 = &unicode.RangeTable{
	R32: []unicode.Range32{{Lo: 0x11DE0, Hi: 0x11DE9, Stride: 1}, {Lo: 0x16FF4, Hi: 0x16FF6, Stride: 1}},
}

func isRustNumeric(r rune) bool { return isNumber(r) || unicode.Is(rustNumeric17, r) }

// lowerRange maps [lo, hi] to lowercase by adding delta.
type lowerRange struct{ lo, hi, delta rune }

// lower17 holds the lowercase mappings of Rust's char::to_lowercase
// (HF's Lowercase normalizer, Unicode 17) that Go's unicode.ToLower
// (Unicode 15) lacks, measured over every code point with HF's Lowercase.
var lower17 = [...]lowerRange{
	{0x1C89, 0x1C89, 1}, {0xA7CB, 0xA7CB, 0x264 - 0xA7CB}, {0xA7CC, 0xA7CC, 1}, {0xA7CE, 0xA7CE, 1},
	{0xA7D2, 0xA7D2, 1}, {0xA7D4, 0xA7D4, 1}, {0xA7DA, 0xA7DA, 1}, {0xA7DC, 0xA7DC, 0x19B - 0xA7DC},
	{0x10D50, 0x10D65, 0x20}, {0x16EA0, 0x16EB8, 0x1B},
}

// toLowerHF is Rust's char::to_lowercase for the characters whose
// lowercase is one character (all but U+0130, handled by the caller).
func toLowerHF(r rune) rune {
	if r >= 0x1C89 {
		for _, m := range lower17 {
			if r >= m.lo && r <= m.hi {
				return r + m.delta
			}
		}
	}
	return unicode.ToLower(r)
}

// newerThanGo reports whether r is one of the characters above, which
// regexp2 (on Go's tables) classifies differently from HF.
func newerThanGo(r rune) bool { return unicode.Is(letters16, r) || unicode.Is(numbers16, r) }
