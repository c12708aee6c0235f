package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// preTokenizer splits the text pieces into words (HF's PreTokenizer).
// Added-token pieces pass through unchanged; empty pieces are dropped.
type preTokenizer interface {
	preTokenize(ps []piece) []piece
}

// eachText applies f to every text piece of ps.
func eachText(ps []piece, f func(p piece, out []piece) []piece) []piece {
	out := make([]piece, 0, len(ps)+len(ps)/2)
	for _, p := range ps {
		if p.added {
			out = append(out, p)
			continue
		}
		out = f(p, out)
	}
	return out
}

type behavior uint8

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// span is a part of a string that did (m) or did not match a pattern.
type span struct {
	a, b int
	m    bool
}

// spansOf turns the matches of a pattern into spans covering all of s, as
// HF's Pattern::find_matches does.
func spansOf(s string, matches [][2]int) []span {
	out := make([]span, 0, 2*len(matches)+1)
	prev := 0
	for _, m := range matches {
		if prev != m[0] {
			out = append(out, span{prev, m[0], false})
		}
		out = append(out, span{m[0], m[1], true})
		prev = m[1]
	}
	if prev != len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out
}

// charSpans matches every single character for which f holds (HF's
// Pattern for a char predicate: each character is its own match).
func charSpans(s string, f func(rune) bool) []span {
	var out []span
	last := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if f(r) {
			if last < i {
				out = append(out, span{last, i, false})
			}
			out = append(out, span{i, i + n, true})
			last = i + n
		}
		i += n
	}
	if last < len(s) {
		out = append(out, span{last, len(s), false})
	}
	return out
}

// splitSpans is HF's NormalizedString::split: it applies the behavior to the
// spans and appends the resulting non-empty pieces of p to out.
func splitSpans(p piece, sp []span, beh behavior, invert bool, out []piece) []piece {
	if invert {
		for i := range sp {
			sp[i].m = !sp[i].m
		}
	}
	type kept struct {
		a, b   int
		remove bool
	}
	var ks []kept
	switch beh {
	case isolated:
		ks = make([]kept, len(sp))
		for i, s := range sp {
			ks[i] = kept{s.a, s.b, false}
		}
	case removed:
		ks = make([]kept, len(sp))
		for i, s := range sp {
			ks[i] = kept{s.a, s.b, s.m}
		}
	case contiguous:
		prev := false
		for _, s := range sp {
			if s.m == prev && len(ks) > 0 {
				ks[len(ks)-1].b = s.b
			} else {
				ks = append(ks, kept{s.a, s.b, false})
			}
			prev = s.m
		}
	case mergedWithPrevious:
		prev := false
		for _, s := range sp {
			if s.m && !prev && len(ks) > 0 {
				ks[len(ks)-1].b = s.b
			} else {
				ks = append(ks, kept{s.a, s.b, false})
			}
			prev = s.m
		}
	case mergedWithNext:
		prev := false
		for i := len(sp) - 1; i >= 0; i-- {
			s := sp[i]
			if s.m && !prev && len(ks) > 0 {
				ks[len(ks)-1].a = s.a
			} else {
				ks = append(ks, kept{s.a, s.b, false})
			}
			prev = s.m
		}
		for i, j := 0, len(ks)-1; i < j; i, j = i+1, j-1 {
			ks[i], ks[j] = ks[j], ks[i]
		}
	}
	for _, k := range ks {
		if k.remove || k.a == k.b {
			continue
		}
		out = append(out, piece{s: p.s[k.a:k.b], off: p.off + k.a})
	}
	return out
}

type seqPre []preTokenizer

func (q seqPre) preTokenize(ps []piece) []piece {
	for _, p := range q {
		ps = p.preTokenize(ps)
	}
	return ps
}

type splitPre struct {
	pat    pattern
	beh    behavior
	invert bool
}

func (sp *splitPre) preTokenize(ps []piece) []piece {
	return eachText(ps, func(p piece, out []piece) []piece {
		if p.s == "" {
			return out
		}
		if sp.pat.known != knownNone && sp.beh == isolated && !sp.invert {
			// Fast path: the known patterns tile the text.
			scanKnown(sp.pat.known, p.s, func(a, b int) {
				out = append(out, piece{s: p.s[a:b], off: p.off + a})
			})
			return out
		}
		return splitSpans(p, spansOf(p.s, sp.pat.findAll(p.s)), sp.beh, sp.invert, out)
	})
}

type byteLevelPre struct{ addPrefixSpace, useRegex bool }

func (bl *byteLevelPre) preTokenize(ps []piece) []piece {
	return eachText(ps, func(p piece, out []piece) []piece {
		s := p.s
		if s == "" {
			return out
		}
		if bl.addPrefixSpace && s[0] != ' ' {
			s = " " + s
		}
		if !bl.useRegex {
			return append(out, piece{s: byteLevelMap(s), off: p.off})
		}
		scanKnown(knownGPT2, s, func(a, b int) {
			out = append(out, piece{s: byteLevelMap(s[a:b]), off: p.off + a})
		})
		return out
	})
}

type digitsPre struct{ individual bool }

func (d digitsPre) preTokenize(ps []piece) []piece {
	beh := contiguous
	if d.individual {
		beh = isolated
	}
	return eachText(ps, func(p piece, out []piece) []piece {
		return splitSpans(p, charSpans(p.s, unicode.IsNumber), beh, false, out)
	})
}

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	repl   string
	scheme prependScheme
	split  bool
}

func (m *metaspacePre) preTokenize(ps []piece) []piece {
	r, _ := utf8.DecodeRuneInString(m.repl)
	return eachText(ps, func(p piece, out []piece) []piece {
		if p.s == "" {
			return out // HF's prepend is a no-op on an empty string
		}
		s := strings.ReplaceAll(p.s, " ", m.repl)
		switch m.scheme {
		case prependAlways:
			if !strings.HasPrefix(s, m.repl) {
				s = m.repl + s
			}
		case prependFirst:
			if !strings.HasPrefix(s, m.repl) && p.off == 0 {
				s = m.repl + s
			}
		}
		q := piece{s: s, off: p.off}
		if !m.split {
			if s != "" {
				out = append(out, q)
			}
			return out
		}
		return splitSpans(q, charSpans(s, func(c rune) bool { return c == r }), mergedWithNext, false, out)
	})
}

type whitespacePre struct{ re *regexp2.Regexp }

func (w whitespacePre) preTokenize(ps []piece) []piece {
	return eachText(ps, func(p piece, out []piece) []piece {
		return splitSpans(p, spansOf(p.s, regexFindAll(w.re, p.s)), removed, true, out)
	})
}

type whitespaceSplitPre struct{}

func (whitespaceSplitPre) preTokenize(ps []piece) []piece {
	return eachText(ps, func(p piece, out []piece) []piece {
		return splitSpans(p, charSpans(p.s, unicode.IsSpace), removed, false, out)
	})
}

type punctuationPre struct{ beh behavior }

// isPunct is HF's is_punc: ASCII punctuation (which includes the ASCII
// symbols $+<=>^`|~) or a Unicode punctuation (P*) character.
func isPunct(r rune) bool {
	return (r < utf8.RuneSelf && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r)) || unicode.IsPunct(r)
}

func (pp punctuationPre) preTokenize(ps []piece) []piece {
	return eachText(ps, func(p piece, out []piece) []piece {
		return splitSpans(p, charSpans(p.s, isPunct), pp.beh, false, out)
	})
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var c struct {
			Pre []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Sequence: %w", err)
		}
		var q seqPre
		for i, r := range c.Pre {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if p != nil {
				q = append(q, p)
			}
		}
		return q, nil
	case "ByteLevel":
		var c struct {
			AddPrefixSpace *bool `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("ByteLevel: %w", err)
		}
		return &byteLevelPre{
			addPrefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace,
			useRegex:       c.UseRegex == nil || *c.UseRegex,
		}, nil
	case "Split":
		var c struct {
			Pattern  json.RawMessage `json:"pattern"`
			Behavior string          `json:"behavior"`
			Invert   bool            `json:"invert"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		if isNull(c.Pattern) {
			return nil, errors.New(`Split: missing "pattern"`)
		}
		p, err := parsePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		b, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		return &splitPre{pat: p, beh: b, invert: c.Invert}, nil
	case "Digits":
		var c struct {
			Individual bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Digits: %w", err)
		}
		return digitsPre{c.Individual}, nil
	case "Metaspace":
		var c struct {
			Replacement    *string `json:"replacement"`
			PrependScheme  *string `json:"prepend_scheme"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			Split          *bool   `json:"split"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Metaspace: %w", err)
		}
		m := &metaspacePre{repl: "\u2581", split: c.Split == nil || *c.Split}
		if c.Replacement != nil {
			if utf8.RuneCountInString(*c.Replacement) != 1 {
				return nil, fmt.Errorf("Metaspace: replacement %q is not one character", *c.Replacement)
			}
			m.repl = *c.Replacement
		}
		sch, err := parsePrependScheme(c.PrependScheme, c.AddPrefixSpace)
		if err != nil {
			return nil, fmt.Errorf("Metaspace: %w", err)
		}
		m.scheme = sch
		return m, nil
	case "Whitespace":
		re := regexp2.MustCompile(`\w+|[^\w\s]+`, regexp2.None)
		re.MatchTimeout = regexTimeout
		return whitespacePre{re}, nil
	case "WhitespaceSplit":
		return whitespaceSplitPre{}, nil
	case "Punctuation":
		var c struct {
			Behavior *string `json:"behavior"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Punctuation: %w", err)
		}
		b := isolated
		if c.Behavior != nil {
			if b, err = parseBehavior(*c.Behavior); err != nil {
				return nil, fmt.Errorf("Punctuation: %w", err)
			}
		}
		return punctuationPre{b}, nil
	case "":
		return nil, errors.New(`missing "type"`)
	}
	return nil, fmt.Errorf("unsupported pre-tokenizer type %q", typ)
}

func parsePrependScheme(s *string, addPrefixSpace *bool) (prependScheme, error) {
	if s == nil {
		if addPrefixSpace != nil && !*addPrefixSpace {
			return prependNever, nil
		}
		return prependAlways, nil
	}
	switch *s {
	case "always":
		return prependAlways, nil
	case "first":
		return prependFirst, nil
	case "never":
		return prependNever, nil
	}
	return 0, fmt.Errorf("unknown prepend_scheme %q", *s)
}
