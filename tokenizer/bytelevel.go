package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteToRune is GPT-2's bytes_to_unicode table: printable bytes map to
// themselves, the others to U+0100 onwards in byte order.
var byteToRune, runeToByte = func() (b2r [256]rune, r2b map[rune]byte) {
	r2b = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteToStr holds the UTF-8 encoding of byteToRune.
var byteToStr = func() (t [256]string) {
	for b := range t {
		t[b] = string(byteToRune[b])
	}
	return t
}()

// byteLevelMap maps every byte of s to its byte-level character.
func byteLevelMap(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteString(byteToStr[s[i]])
	}
	return b.String()
}

// lossyUTF8 converts bytes to a string as Rust's String::from_utf8_lossy
// does: each maximal invalid subsequence becomes one U+FFFD.
func lossyUTF8(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r != utf8.RuneError || n > 1 {
			b.Write(p[i : i+n])
			i += n
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += invalidPrefixLen(p[i:])
	}
	return b.String()
}

// invalidPrefixLen is the length of the maximal prefix of p that could
// start a valid UTF-8 sequence (at least 1), per the Unicode
// "substitution of maximal subparts" practice Rust follows.
func invalidPrefixLen(p []byte) int {
	c := p[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	i := 1
	for k := 0; k < need && i < len(p); k++ {
		if p[i] < lo || p[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		i++
	}
	return i
}
