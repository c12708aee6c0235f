package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// normalizer transforms a segment of text (HF's Normalizer, without
// alignment tracking).
type normalizer interface {
	normalize(s string) string
}

type seqNormalizer []normalizer

func (q seqNormalizer) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

type prependNormalizer string

func (p prependNormalizer) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

// pattern is a Split/Replace pattern: a literal string or a regex.
type pattern struct {
	lit   string
	re    *regexp2.Regexp
	isRe  bool
	known knownPattern // a regex with a hand-written scanner, or none
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// regexTimeout bounds one regexp2 match so that a pathological pattern in
// a hostile file cannot hang the process; a timed-out search ends the
// matching (as if nothing more matched).
const regexTimeout = 5 * time.Second

func parsePattern(raw json.RawMessage) (pattern, error) {
	var p patternJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return pattern{}, fmt.Errorf("pattern: %w", err)
	}
	switch {
	case p.String != nil && p.Regex == nil:
		return pattern{lit: *p.String}, nil
	case p.Regex != nil && p.String == nil:
		re, err := regexp2.Compile(*p.Regex, regexp2.None)
		if err != nil {
			return pattern{}, fmt.Errorf("bad regex %q: %w", *p.Regex, err)
		}
		re.MatchTimeout = regexTimeout
		return pattern{re: re, isRe: true, known: knownFor(*p.Regex)}, nil
	}
	return pattern{}, errors.New(`pattern must have exactly one of "String" or "Regex"`)
}

// findAll returns the byte ranges of the non-overlapping matches of p in s,
// leftmost first, as Rust's find_iter / Oniguruma's search loop do.
func (p *pattern) findAll(s string) [][2]int {
	if p.known != knownNone {
		var out [][2]int
		scanKnown(p.known, s, func(a, b int) { out = append(out, [2]int{a, b}) })
		return out
	}
	if !p.isRe {
		if p.lit == "" {
			return nil
		}
		var out [][2]int
		for i := 0; ; {
			j := strings.Index(s[i:], p.lit)
			if j < 0 {
				return out
			}
			out = append(out, [2]int{i + j, i + j + len(p.lit)})
			i += j + len(p.lit)
		}
	}
	return regexFindAll(p.re, s)
}

func regexFindAll(re *regexp2.Regexp, s string) [][2]int {
	if s == "" {
		return nil
	}
	runes := []rune(s)
	// byte offset of each rune index (runes of invalid UTF-8 never occur:
	// Encode makes the text valid first).
	offs := make([]int, len(runes)+1)
	o := 0
	for i, r := range runes {
		offs[i] = o
		o += utf8.RuneLen(r)
	}
	offs[len(runes)] = o
	var out [][2]int
	m, err := re.FindRunesMatch(runes)
	for err == nil && m != nil {
		a, b := m.Index, m.Index+m.Length
		if a < 0 || b > len(runes) || a > b {
			break
		}
		out = append(out, [2]int{offs[a], offs[b]})
		m, err = re.FindNextMatch(m)
	}
	return out
}

type replaceNormalizer struct {
	pat     pattern
	content string
}

func (r *replaceNormalizer) normalize(s string) string {
	if !r.pat.isRe {
		if r.pat.lit == "" {
			return s
		}
		return strings.ReplaceAll(s, r.pat.lit, r.content)
	}
	ms := r.pat.findAll(s)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		b.WriteString(r.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

type unicodeNormalizer struct{ f norm.Form }

// normalize applies the form as HF does: characters HF's (older) Unicode
// data does not know are inert starters, so the text is normalized in the
// runs between them and they are copied unchanged.
func (u unicodeNormalizer) normalize(s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i < len(s); {
		if s[i] < 0xDF { // below U+07FD: the fast path
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if isNormInert(r) {
			if b.Len() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(u.f.String(s[start:i]))
			b.WriteString(s[i : i+n])
			start = i + n
		}
		i += n
	}
	if start == 0 {
		return u.f.String(s)
	}
	b.WriteString(u.f.String(s[start:]))
	return b.String()
}

type lowercaseNormalizer struct{}

// normalize lowercases per character as Rust's char::to_lowercase does
// (U+0130 becomes "i\u0307"; no context-dependent final sigma).
func (lowercaseNormalizer) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == '\u0130' {
			b.WriteString("i\u0307")
			continue
		}
		b.WriteRune(toLowerHF(r))
	}
	return b.String()
}

type stripNormalizer struct{ left, right bool }

func (st stripNormalizer) normalize(s string) string {
	if st.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if st.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

type byteLevelNormalizer struct{}

func (byteLevelNormalizer) normalize(s string) string { return byteLevelMap(s) }

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		q, err := parseSequence(raw, "normalizers", parseNormalizer)
		if err != nil {
			return nil, err
		}
		return seqNormalizer(q), nil
	case "Prepend":
		var c struct {
			Prepend *string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Prepend == nil {
			return nil, fmt.Errorf("Prepend: missing or bad \"prepend\" (%v)", err)
		}
		return prependNormalizer(*c.Prepend), nil
	case "Replace":
		var c struct {
			Pattern json.RawMessage `json:"pattern"`
			Content *string         `json:"content"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Content == nil || isNull(c.Pattern) {
			return nil, fmt.Errorf("Replace: missing or bad \"pattern\"/\"content\" (%v)", err)
		}
		p, err := parsePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("Replace: %w", err)
		}
		p.known = knownNone // replacement needs the generic matcher semantics only
		return &replaceNormalizer{pat: p, content: *c.Content}, nil
	case "NFC":
		return unicodeNormalizer{norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "Strip":
		var c struct {
			Left  *bool `json:"strip_left"`
			Right *bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Strip: %w", err)
		}
		return stripNormalizer{left: c.Left == nil || *c.Left, right: c.Right == nil || *c.Right}, nil
	case "StripAccents":
		return stripAccentsNormalizer{}, nil
	case "ByteLevel":
		return byteLevelNormalizer{}, nil
	case "":
		return nil, errors.New(`missing "type"`)
	}
	return nil, fmt.Errorf("unsupported normalizer type %q", typ)
}
