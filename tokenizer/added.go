package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// piece is one split of the text on its way through the pipeline: either an
// added token already resolved to an id, or text still to be tokenized.
type piece struct {
	s     string
	off   int // offset in the original text where the piece starts (approximate after normalization)
	added bool
	id    int32
}

type addedToken struct {
	id                         int32
	content                    string
	singleWord, lstrip, rstrip bool
	normalized, special        bool
}

// matcher finds added tokens leftmost-longest, like the Aho-Corasick
// automaton (MatchKind::LeftmostLongest) HF builds.
type matcher struct {
	pats    []string
	toks    []*addedToken
	byFirst [256][]int32 // pattern indices by first byte, longest first
	any     bool
}

func newMatcher(pats []string, toks []*addedToken) *matcher {
	m := &matcher{pats: pats, toks: toks}
	for i, p := range pats {
		if p == "" {
			continue
		}
		m.byFirst[p[0]] = append(m.byFirst[p[0]], int32(i))
		m.any = true
	}
	for b := range m.byFirst {
		l := m.byFirst[b]
		sort.SliceStable(l, func(i, j int) bool { return len(pats[l[i]]) > len(pats[l[j]]) })
	}
	return m
}

// next returns the leftmost-longest match starting at or after from.
func (m *matcher) next(s string, from int) (start, end int, tok *addedToken) {
	for i := from; i < len(s); i++ {
		cands := m.byFirst[s[i]]
		for _, c := range cands {
			p := m.pats[c]
			if len(s)-i >= len(p) && s[i:i+len(p)] == p {
				return i, i + len(p), m.toks[c]
			}
		}
	}
	return -1, -1, nil
}

type addedVocab struct {
	byContent map[string]*addedToken
	raw       *matcher // tokens with normalized=false, matched on the raw text
	norm      *matcher // tokens with normalized=true, matched on the normalized text
}

func newAddedVocab(toks []addedToken, norm normalizer) *addedVocab {
	v := &addedVocab{byContent: make(map[string]*addedToken, len(toks))}
	// HF orders the tries' patterns special tokens first, then the others;
	// with leftmost-longest the order only matters for equal patterns.
	var rawP, normP []string
	var rawT, normT []*addedToken
	seen := make(map[string]bool, len(toks))
	for pass := 0; pass < 2; pass++ {
		for i := range toks {
			a := &toks[i]
			if a.special != (pass == 0) || seen[a.content] {
				continue
			}
			seen[a.content] = true
			v.byContent[a.content] = a
			if a.normalized {
				p := a.content
				if norm != nil {
					p = norm.normalize(p)
				}
				normP, normT = append(normP, p), append(normT, a)
			} else {
				rawP, rawT = append(rawP, a.content), append(rawT, a)
			}
		}
	}
	v.raw = newMatcher(rawP, rawT)
	v.norm = newMatcher(normP, normT)
	return v
}

// extract splits text on added tokens and normalizes the rest, as HF's
// AddedVocabulary::extract_and_normalize does, emitting the pieces in order.
func (v *addedVocab) extract(text string, norm normalizer, emit func(piece)) {
	v.split(text, 0, v.raw, func(p piece) {
		if p.added {
			emit(p)
			return
		}
		s := p.s
		if norm != nil {
			s = norm.normalize(s)
		}
		v.split(s, p.off, v.norm, emit)
	})
}

// split is HF's find_matches: it emits the pieces covering s in order.
func (v *addedVocab) split(s string, off int, m *matcher, emit func(piece)) {
	if !m.any || s == "" {
		emit(piece{s: s, off: off})
		return
	}
	startOff := 0
	for pos := 0; pos < len(s); {
		start, stop, tok := m.next(s, pos)
		if tok == nil {
			break
		}
		pos = stop // the automaton resumes after the match, not after stripped spaces
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			start = max(spaceLeftmostAtEnd(s[:start]), startOff)
		}
		if tok.rstrip {
			stop += spaceRightmostAtStart(s[stop:])
		}
		if startOff < start {
			emit(piece{s: s[startOff:start], off: off + startOff})
		}
		emit(piece{s: s[start:stop], off: off + start, added: true, id: tok.id})
		startOff = stop
	}
	if startOff != len(s) {
		emit(piece{s: s[startOff:], off: off + startOff})
	}
}

// isWordChar is Rust regex's Unicode \w: alphabetic, marks, decimal
// digits, connector punctuation and join controls.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordChar(r)
}

func spaceLeftmostAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

func spaceRightmostAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
