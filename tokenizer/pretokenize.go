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

// preTokenizer splits a text piece into words (HF's PreTokenizer),
// passing them to emit in order; empty words are dropped. Pieces stream
// through, so encoding a large text never holds all its words at once.
type preTokenizer interface {
	split(p piece, emit func(piece))
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
// spans and emits the resulting non-empty pieces of p.
func splitSpans(p piece, sp []span, beh behavior, invert bool, emit func(piece)) {
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
		emit(piece{s: p.s[k.a:k.b], off: p.off + k.a})
	}
}

type seqPre []preTokenizer

func (q seqPre) split(p piece, emit func(piece)) { chain(q, emit)(p) }

// chain returns a function that runs pre on a piece and passes the words
// to sink; a Sequence becomes a pipeline of stages built once, so that no
// closure is allocated per piece.
func chain(pre preTokenizer, sink func(piece)) func(piece) {
	if q, ok := pre.(seqPre); ok {
		for i := len(q) - 1; i >= 0; i-- {
			sink = chain(q[i], sink)
		}
		return sink
	}
	return func(p piece) { pre.split(p, sink) }
}

type splitPre struct {
	pat    pattern
	beh    behavior
	invert bool
}

func (sp *splitPre) split(p piece, emit func(piece)) {
	if p.s == "" {
		return
	}
	if sp.pat.known != knownNone && sp.beh == isolated && !sp.invert {
		// Fast path: the known patterns tile the text.
		scanKnown(sp.pat.known, p.s, func(a, b int) {
			emit(piece{s: p.s[a:b], off: p.off + a})
		})
		return
	}
	splitSpans(p, spansOf(p.s, sp.pat.findAll(p.s)), sp.beh, sp.invert, emit)
}

type byteLevelPre struct{ addPrefixSpace, useRegex bool }

func (bl *byteLevelPre) split(p piece, emit func(piece)) {
	s := p.s
	if s == "" {
		return
	}
	if bl.addPrefixSpace && s[0] != ' ' {
		s = " " + s
	}
	if !bl.useRegex {
		emit(piece{s: byteLevelMap(s), off: p.off})
		return
	}
	scanKnown(knownGPT2, s, func(a, b int) {
		emit(piece{s: byteLevelMap(s[a:b]), off: p.off + a})
	})
}

type digitsPre struct{ individual bool }

func (d digitsPre) split(p piece, emit func(piece)) {
	beh := contiguous
	if d.individual {
		beh = isolated
	}
	splitSpans(p, charSpans(p.s, isRustNumeric), beh, false, emit)
}

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	repl    string
	scheme  prependScheme
	splitOn bool
}

func (m *metaspacePre) split(p piece, emit func(piece)) {
	if p.s == "" {
		return // HF's prepend is a no-op on an empty string
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
	if !m.splitOn {
		emit(q)
		return
	}
	r, _ := utf8.DecodeRuneInString(m.repl)
	splitSpans(q, charSpans(s, func(c rune) bool { return c == r }), mergedWithNext, false, emit)
}

type whitespacePre struct{ re *regexp2.Regexp }

func (w whitespacePre) split(p piece, emit func(piece)) {
	splitSpans(p, spansOf(p.s, regexFindAll(w.re, p.s)), removed, true, emit)
}

type whitespaceSplitPre struct{}

func (whitespaceSplitPre) split(p piece, emit func(piece)) {
	splitSpans(p, charSpans(p.s, unicode.IsSpace), removed, false, emit)
}

type punctuationPre struct{ beh behavior }

// isPunct is HF's is_punc: ASCII punctuation (which includes the ASCII
// symbols $+<=>^`|~) or a Unicode punctuation (P*) character.
func isPunct(r rune) bool {
	return (r < utf8.RuneSelf && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r)) || unicode.IsPunct(r)
}

func (pp punctuationPre) split(p piece, emit func(piece)) {
	splitSpans(p, charSpans(p.s, isPunct), pp.beh, false, emit)
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
		q, err := parseSequence(raw, "pretokenizers", parsePreTokenizer)
		if err != nil {
			return nil, err
		}
		return seqPre(q), nil
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
		m := &metaspacePre{repl: "\u2581", splitOn: c.Split == nil || *c.Split}
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
