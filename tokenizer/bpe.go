package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is HF's BPE model.
type bpe struct {
	vocab       map[string]int32
	merges      map[uint64]uint64 // (left<<32 | right) -> (rank<<32 | merged id)
	unk         int32             // -1: none
	fuseUnk     bool
	byteFB      bool
	byteIDs     [256]int32 // <0xNN> ids, -1 when missing
	prefix      string     // continuing_subword_prefix
	suffix      string     // end_of_word_suffix
	ignoreMerge bool
	// splitMeta: no vocabulary token contains U+2581 after another
	// character, so a word can be cut before every U+2581 that follows
	// another character without changing the result (no merge can cross
	// the cut). SentencePiece-style files tokenize whole texts as one word;
	// the cut makes that linear and lets the word cache work.
	splitMeta bool

	mu    sync.RWMutex
	cache map[string][]int32
}

// cacheMax bounds the per-word cache; words longer than cacheWordMax bytes
// are not cached.
const (
	cacheMax     = 1 << 18
	cacheWordMax = 256
)

type bpeJSON struct {
	Type        *string         `json:"type"`
	Dropout     *float64        `json:"dropout"`
	Unk         *string         `json:"unk_token"`
	Prefix      *string         `json:"continuing_subword_prefix"`
	Suffix      *string         `json:"end_of_word_suffix"`
	FuseUnk     bool            `json:"fuse_unk"`
	ByteFB      bool            `json:"byte_fallback"`
	IgnoreMerge bool            `json:"ignore_merges"`
	Vocab       json.RawMessage `json:"vocab"`
	Merges      json.RawMessage `json:"merges"`
}

func parseModel(raw json.RawMessage) (*bpe, error) {
	// One pass over the model object; vocab and merges stay raw until the
	// type is known to be BPE.
	var c bpeJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	typ := ""
	if c.Type != nil {
		typ = *c.Type
	} else if !isNull(c.Merges) {
		typ = "BPE" // old files leave the type out
	}
	if typ != "BPE" {
		if typ == "" {
			return nil, errors.New(`missing "type"`)
		}
		return nil, fmt.Errorf("unsupported model type %q (only BPE is implemented)", typ)
	}
	var vocab map[string]int32
	if !isNull(c.Vocab) {
		if err := json.Unmarshal(c.Vocab, &vocab); err != nil {
			return nil, fmt.Errorf("BPE: vocab: %w", err)
		}
	}
	if vocab == nil {
		return nil, errors.New(`BPE: missing "vocab"`)
	}
	m := &bpe{
		vocab:       vocab,
		unk:         -1,
		fuseUnk:     c.FuseUnk,
		byteFB:      c.ByteFB,
		ignoreMerge: c.IgnoreMerge,
		cache:       make(map[string][]int32),
	}
	if c.Prefix != nil {
		m.prefix = *c.Prefix
	}
	if c.Suffix != nil {
		m.suffix = *c.Suffix
	}
	bound := maxIDFor(len(vocab))
	for tok, id := range vocab {
		if id < 0 || int64(id) > bound {
			return nil, fmt.Errorf("BPE: vocab entry %q has id %d out of range", tok, id)
		}
	}
	if c.Unk != nil {
		id, ok := m.vocab[*c.Unk]
		if !ok {
			return nil, fmt.Errorf("BPE: unk_token %q is not in the vocabulary", *c.Unk)
		}
		m.unk = id
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
	if _, ok := m.vocab[metaspace]; ok && m.prefix == "" && m.suffix == "" {
		m.splitMeta = true
		for tok := range m.vocab {
			// Every U+2581 of the token must start it or follow another.
			for j := strings.Index(tok, metaspace); j >= 0; {
				if j > 0 && !strings.HasSuffix(tok[:j], metaspace) {
					m.splitMeta = false
					break
				}
				k := strings.Index(tok[j+len(metaspace):], metaspace)
				if k < 0 {
					break
				}
				j += len(metaspace) + k
			}
			if !m.splitMeta {
				break
			}
		}
	}
	pairs, err := parseMerges(c.Merges)
	if err != nil {
		return nil, fmt.Errorf("BPE: %w", err)
	}
	m.merges = make(map[uint64]uint64, len(pairs))
	for rank, p := range pairs {
		a, ok := m.vocab[p[0]]
		if !ok {
			return nil, fmt.Errorf("BPE: merges[%d] %q: token %q is not in the vocabulary", rank, p[0]+" "+p[1], p[0])
		}
		b, ok := m.vocab[p[1]]
		if !ok {
			return nil, fmt.Errorf("BPE: merges[%d] %q: token %q is not in the vocabulary", rank, p[0]+" "+p[1], p[1])
		}
		right := p[1]
		if len(m.prefix) > 0 {
			if len(right) < len(m.prefix) {
				return nil, fmt.Errorf("BPE: merges[%d]: %q is shorter than continuing_subword_prefix", rank, right)
			}
			right = right[len(m.prefix):]
		}
		merged := p[0] + right
		id, ok := m.vocab[merged]
		if !ok {
			return nil, fmt.Errorf("BPE: merges[%d] %q: merged token %q is not in the vocabulary", rank, p[0]+" "+p[1], merged)
		}
		key := pairKey(a, b) // a repeated pair keeps its last rank, as HF's HashMap collect does
		m.merges[key] = uint64(rank)<<32 | uint64(uint32(id))
	}
	return m, nil
}

// parseMerges accepts ["a b", ...] and [["a", "b"], ...].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	// Fast paths for the two uniform layouts.
	switch firstElem(raw) {
	case '"':
		var ss []string
		if err := json.Unmarshal(raw, &ss); err == nil {
			out := make([][2]string, len(ss))
			for i, s := range ss {
				a, b, ok := strings.Cut(s, " ")
				if !ok {
					return nil, fmt.Errorf("merges[%d] %q: not two tokens separated by a space", i, s)
				}
				out[i] = [2]string{a, b}
			}
			return out, nil
		}
	case '[':
		var ps [][]string
		if err := json.Unmarshal(raw, &ps); err == nil {
			out := make([][2]string, len(ps))
			for i, p := range ps {
				if len(p) != 2 {
					return nil, fmt.Errorf("merges[%d]: not a \"a b\" string or a pair of strings", i)
				}
				out[i] = [2]string{p[0], p[1]}
			}
			return out, nil
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	out := make([][2]string, len(items))
	for i, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("merges[%d] %q: not two tokens separated by a space", i, s)
			}
			out[i] = [2]string{a, b}
			continue
		}
		var p []string
		if err := json.Unmarshal(it, &p); err != nil || len(p) != 2 {
			return nil, fmt.Errorf("merges[%d]: not a \"a b\" string or a pair of strings", i)
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

// tokenize appends the ids of one pre-tokenized word.
func (m *bpe) tokenize(w string, out []int32) []int32 {
	if w == "" {
		return out
	}
	if m.ignoreMerge {
		if id, ok := m.vocab[w]; ok {
			return append(out, id)
		}
	}
	if m.splitMeta && len(w) > 2*len(metaspace) {
		start := 0
		for i := len(metaspace); i < len(w); {
			j := strings.Index(w[i:], metaspace)
			if j < 0 {
				break
			}
			i += j
			if !strings.HasSuffix(w[:i], metaspace) {
				out = m.tokenizeCached(w[start:i], out)
				start = i
			}
			i += len(metaspace)
		}
		return m.tokenizeCached(w[start:], out)
	}
	return m.tokenizeCached(w, out)
}

const metaspace = "\u2581"

// tokenizeCached appends the ids of w, through the word cache.
func (m *bpe) tokenizeCached(w string, out []int32) []int32 {
	cacheable := len(w) <= cacheWordMax
	if cacheable {
		m.mu.RLock()
		ids, ok := m.cache[w]
		m.mu.RUnlock()
		if ok {
			return append(out, ids...)
		}
	}
	n0 := len(out)
	out = m.merge(w, out)
	if cacheable {
		ids := append([]int32(nil), out[n0:]...)
		m.mu.Lock()
		if len(m.cache) < cacheMax {
			m.cache[w] = ids
		}
		m.mu.Unlock()
	}
	return out
}

type symbol struct {
	id         int32
	prev, next int32
	alive      bool
}

type mergeCand struct {
	rank, pos uint32
	id        int32
}

// candHeap is a binary min-heap on (rank, pos).
type candHeap []mergeCand

func (h candHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || (h[i].rank == h[j].rank && h[i].pos < h[j].pos)
}

func (h *candHeap) push(c mergeCand) {
	*h = append(*h, c)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h candHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func (h *candHeap) pop() mergeCand {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	*h = q[:last]
	if last > 0 {
		(*h).down(0)
	}
	return top
}

// initial splits w into characters and maps them to ids as HF's
// BPE::merge_word does (prefix/suffix, byte fallback, unk fusing).
func (m *bpe) initial(w string, syms []symbol) []symbol {
	add := func(id int32) {
		syms = append(syms, symbol{id: id, alive: true})
	}
	unkPending := false
	var buf []byte
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		s := w[i : i+n]
		if m.prefix != "" || m.suffix != "" {
			buf = buf[:0]
			if i > 0 {
				buf = append(buf, m.prefix...)
			}
			buf = append(buf, s...)
			if i+n == len(w) {
				buf = append(buf, m.suffix...)
			}
			s = string(buf)
		}
		i += n
		if id, ok := m.vocab[s]; ok {
			if unkPending {
				add(m.unk)
				unkPending = false
			}
			add(id)
			continue
		}
		if m.byteFB {
			all := true
			for k := 0; k < len(s); k++ {
				if m.byteIDs[s[k]] < 0 {
					all = false
					break
				}
			}
			if all {
				// HF pushes the byte tokens without flushing a pending unk.
				for k := 0; k < len(s); k++ {
					add(m.byteIDs[s[k]])
				}
				continue
			}
		}
		if m.unk >= 0 {
			if unkPending && !m.fuseUnk {
				add(m.unk)
			}
			unkPending = true
		}
	}
	if unkPending {
		add(m.unk)
	}
	return syms
}

// merge runs the BPE merges on w (lowest rank first, leftmost on ties),
// appending the resulting ids to out.
func (m *bpe) merge(w string, out []int32) []int32 {
	syms := m.initial(w, make([]symbol, 0, len(w)))
	n := len(syms)
	if n == 0 {
		return out
	}
	for i := range syms {
		syms[i].prev = int32(i - 1)
		syms[i].next = int32(i + 1)
	}
	syms[n-1].next = -1
	h := make(candHeap, 0, n)
	for i := 0; i+1 < n; i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = append(h, mergeCand{rank: uint32(v >> 32), pos: uint32(i), id: int32(uint32(v))})
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	for len(h) > 0 {
		top := h.pop()
		cur := &syms[top.pos]
		if !cur.alive || cur.next < 0 {
			continue
		}
		nxt := cur.next
		right := &syms[nxt]
		v, ok := m.merges[pairKey(cur.id, right.id)]
		if !ok || int32(uint32(v)) != top.id {
			continue
		}
		cur.id = top.id
		cur.next = right.next
		right.alive = false
		if cur.next >= 0 {
			syms[cur.next].prev = int32(top.pos)
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(mergeCand{rank: uint32(v >> 32), pos: uint32(cur.prev), id: int32(uint32(v))})
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(mergeCand{rank: uint32(v >> 32), pos: top.pos, id: int32(uint32(v))})
			}
		}
	}
	for i := range syms {
		if syms[i].alive {
			out = append(out, syms[i].id)
		}
	}
	return out
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// resetCache empties the word cache (benchmarks measure cold encodes).
func (m *bpe) resetCache() {
	m.mu.Lock()
	m.cache = make(map[string][]int32)
	m.mu.Unlock()
}

// firstElem returns the first non-space byte after the opening bracket of
// a JSON array, or 0.
func firstElem(raw []byte) byte {
	seen := false
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '[':
			if !seen {
				seen = true
				continue
			}
		}
		if seen {
			return c
		}
		return 0
	}
	return 0
}
