package dataset

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// pySpaceClass is the character class of Python's str.isspace() and of \s in
// Python str regexes (Py_UNICODE_ISSPACE), written for Go's regexp.
const pySpaceClass = `[\t\n\x0b\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

// isPySpace reports whether r is whitespace for Python's str.isspace(),
// str.strip() and the \s of str regexes. Go's unicode.IsSpace differs (it
// lacks U+001C..U+001F), and Go's regexp \s is ASCII only.
func isPySpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= ' ':
		return true
	case r < 0x85:
		return false
	case r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a,
		r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// isBlank reports whether s.strip() is empty in Python terms.
func isBlank(s string) bool {
	for _, r := range s {
		if !isPySpace(r) {
			return false
		}
	}
	return true
}

// pySplitWhitespaceCount returns len(re.split(r"\s+", s)) for a Python str s:
// one more than the number of maximal whitespace runs (leading and trailing
// runs produce empty pieces, which Python counts).
func pySplitWhitespaceCount(s string) int {
	n := 1
	in := false
	for _, r := range s {
		sp := isPySpace(r)
		if sp && !in {
			n++
		}
		in = sp
	}
	return n
}

// CheckUTF8 returns an error naming the file and the byte offset of the
// first invalid UTF-8 sequence of its contents b, or nil when b is valid
// (Python's open(...).read() fails on such a file, so no reference tool
// tokenizes it).
func CheckUTF8(name string, b []byte) error {
	if off := firstInvalidUTF8(b); off >= 0 {
		return fmt.Errorf("dataset: %s: invalid UTF-8 at byte offset %d", name, off)
	}
	return nil
}

// firstInvalidUTF8 returns the byte offset of the first invalid UTF-8
// sequence in b, or -1 when b is valid.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
