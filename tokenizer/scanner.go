package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// knownPattern names a split regex that runs on a hand-written scanner
// instead of the regexp2 backtracking engine. The scanners are exact
// transcriptions of the backtracking semantics of the patterns (leftmost
// match, alternatives tried in order, greedy quantifiers); the tests check
// them against regexp2 on random Unicode text.
type knownPattern uint8

const (
	knownNone   knownPattern = iota
	knownGPT2                // GPT-2 / ByteLevel use_regex
	knownLlama3              // Llama-3: \p{N}{1,3}
	knownQwen2               // Qwen2/Qwen3: \p{N}
)

const (
	gpt2Regex   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func knownFor(re string) knownPattern {
	switch re {
	case gpt2Regex:
		return knownGPT2
	case llama3Regex:
		return knownLlama3
	case qwen2Regex:
		return knownQwen2
	}
	return knownNone
}

// Character classes of the patterns.
const (
	cL  = 1 << iota // \p{L}
	cN              // \p{N}
	cS              // \s
	cNL             // \r or \n
)

var asciiClass = func() (t [128]uint8) {
	for c := 0; c < 128; c++ {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			t[c] = cL
		case unicode.IsNumber(r):
			t[c] = cN
		case unicode.IsSpace(r):
			t[c] = cS
			if r == '\r' || r == '\n' {
				t[c] |= cNL
			}
		}
	}
	return t
}()

// class returns the class bits and byte length of the character at s[i:].
func class(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case isLetter(r):
		return cL, n
	case isNumber(r):
		return cN, n
	case unicode.IsSpace(r):
		return cS, n
	}
	return 0, n
}

// run advances from i over characters whose class intersects want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		c, n := class(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// runOther advances over characters of [^\s\p{L}\p{N}].
func runOther(s string, i int) int {
	for i < len(s) {
		c, n := class(s, i)
		if c != 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of 's|'t|'re|'ve|'m|'ll|'d after the
// apostrophe at s[i-1], or 0. fold enables (?i:...) with Unicode simple
// case folding, under which U+017F (long s) matches s as in Oniguruma.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) {
		return 0
	}
	lower := func(b byte) byte {
		if fold && b >= 'A' && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	c := lower(s[i])
	var c2 byte
	if i+1 < len(s) {
		c2 = lower(s[i+1])
	}
	switch c {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if c2 == 'e' {
			return 2
		}
	case 'l':
		if c2 == 'l' {
			return 2
		}
	case 0xC5: // U+017F is C5 BF
		if fold && c2 == 0xBF {
			return 2
		}
	}
	return 0
}

// scanKnown emits the matches of a known pattern over s. Every character is
// covered by some alternative, so the matches tile s.
func scanKnown(k knownPattern, s string, emit func(a, b int)) {
	for i := 0; i < len(s); {
		var j int
		if k == knownGPT2 {
			j = nextGPT2(s, i)
		} else {
			j = nextLlama3(s, i, k == knownLlama3)
		}
		emit(i, j)
		i = j
	}
}

// wsTail handles the shared whitespace alternatives \s+(?!\S)|\s+ for the
// whitespace run starting at i (the character at i is whitespace).
// withNL adds the Llama-3 alternative \s*[\r\n]+ that precedes them.
func wsTail(s string, i int, withNL bool) int {
	j, lastStart, afterNL := i, i, -1
	for j < len(s) {
		c, n := class(s, j)
		if c&cS == 0 {
			break
		}
		lastStart = j
		j += n
		if c&cNL != 0 {
			afterNL = j
		}
	}
	if withNL && afterNL >= 0 {
		return afterNL // \s*[\r\n]+ backtracks to the last newline of the run
	}
	if j == len(s) || lastStart == i {
		return j // \s+ at end of text, or a single whitespace: \s+
	}
	return lastStart // \s+(?!\S) leaves the last whitespace for the next match
}

func nextGPT2(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	c0, n0 := class(s, i)
	if s[i] == ' ' && i+1 < len(s) {
		c1, n1 := class(s, i+1)
		switch {
		case c1 == cL:
			return run(s, i+1+n1, cL)
		case c1 == cN:
			return run(s, i+1+n1, cN)
		case c1 == 0:
			return runOther(s, i+1+n1)
		}
	}
	switch {
	case c0 == cL:
		return run(s, i+n0, cL)
	case c0 == cN:
		return run(s, i+n0, cN)
	case c0 == 0:
		return runOther(s, i+n0)
	}
	return wsTail(s, i, false)
}

func nextLlama3(s string, i int, digits3 bool) int {
	if s[i] == '\'' {
		if n := contraction(s, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	c0, n0 := class(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0 == cL {
		return run(s, i+n0, cL)
	}
	if c0&(cL|cN|cNL) == 0 && i+n0 < len(s) {
		if c1, n1 := class(s, i+n0); c1 == cL {
			return run(s, i+n0+n1, cL)
		}
	}
	// \p{N}{1,3} or \p{N}
	if c0 == cN {
		j := i + n0
		if digits3 {
			for k := 1; k < 3 && j < len(s); k++ {
				c, n := class(s, j)
				if c != cN {
					break
				}
				j += n
			}
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	if s[i] == ' ' && i+1 < len(s) {
		if c1, n1 := class(s, i+1); c1 == 0 {
			return runNL(s, runOther(s, i+1+n1))
		}
	}
	if c0 == 0 {
		return runNL(s, runOther(s, i+n0))
	}
	return wsTail(s, i, true)
}

// runNL advances over [\r\n]*.
func runNL(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}
