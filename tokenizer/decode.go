package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// decoder turns tokens back into text pieces (HF's Decoder::decode_chain);
// the pieces are joined with "" at the end.
type decoder interface {
	decode(toks []string) []string
}

type seqDecoder []decoder

func (q seqDecoder) decode(toks []string) []string {
	for _, d := range q {
		toks = d.decode(toks)
	}
	return toks
}

type byteLevelDecoder struct{}

func (byteLevelDecoder) decode(toks []string) []string {
	var buf []byte
	for _, t := range toks {
		n := len(buf)
		ok := true
		for _, r := range t {
			b, in := runeToByte[r]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:n], t...)
		}
	}
	return []string{lossyUTF8(buf)}
}

type metaspaceDecoder struct {
	repl   rune
	scheme prependScheme
}

func (m metaspaceDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		drop := i == 0 && m.scheme != prependNever
		out[i] = strings.Map(func(r rune) rune {
			if r != m.repl {
				return r
			}
			if drop {
				return -1
			}
			return ' '
		}, t)
	}
	return out
}

type byteFallbackDecoder struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(t[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func (byteFallbackDecoder) decode(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pend []byte
	flush := func() {
		if len(pend) == 0 {
			return
		}
		if utf8.Valid(pend) {
			out = append(out, string(pend))
		} else {
			for range pend {
				out = append(out, "\uFFFD")
			}
		}
		pend = pend[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			pend = append(pend, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDecoder struct{}

func (fuseDecoder) decode(toks []string) []string { return []string{strings.Join(toks, "")} }

type stripDecoder struct {
	content     rune
	start, stop int
}

func (s stripDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		a := 0
		for a < s.start && a < len(rs) && rs[a] == s.content {
			a++
		}
		b := len(rs)
		for k := 0; k < s.stop && b > a && rs[b-1] == s.content; k++ {
			b--
		}
		out[i] = string(rs[a:b])
	}
	return out
}

type replaceDecoder struct {
	pat     pattern
	content string
}

func (r *replaceDecoder) decode(toks []string) []string {
	rn := replaceNormalizer{pat: r.pat, content: r.content}
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = rn.normalize(t)
	}
	return out
}

type bpeDecoder struct{ suffix string }

func (d bpeDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rep := " "
		if i == len(toks)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

func parseDecoder(raw json.RawMessage) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		q, err := parseSequence(raw, "decoders", parseDecoder)
		if err != nil {
			return nil, err
		}
		return seqDecoder(q), nil
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "Metaspace":
		var c struct {
			Replacement    *string `json:"replacement"`
			PrependScheme  *string `json:"prepend_scheme"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("Metaspace: %w", err)
		}
		d := metaspaceDecoder{repl: '\u2581'}
		if c.Replacement != nil {
			r, n := utf8.DecodeRuneInString(*c.Replacement)
			if n == 0 || n != len(*c.Replacement) {
				return nil, fmt.Errorf("Metaspace: replacement %q is not one character", *c.Replacement)
			}
			d.repl = r
		}
		if d.scheme, err = parsePrependScheme(c.PrependScheme, c.AddPrefixSpace); err != nil {
			return nil, fmt.Errorf("Metaspace: %w", err)
		}
		return d, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		var c struct {
			Content *string `json:"content"`
			Start   int     `json:"start"`
			Stop    int     `json:"stop"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Content == nil {
			return nil, fmt.Errorf("Strip: missing or bad \"content\" (%v)", err)
		}
		r, n := utf8.DecodeRuneInString(*c.Content)
		if n == 0 || n != len(*c.Content) || c.Start < 0 || c.Stop < 0 {
			return nil, fmt.Errorf("Strip: content %q must be one character, start/stop non-negative", *c.Content)
		}
		return stripDecoder{content: r, start: c.Start, stop: c.Stop}, nil
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
		p.known = knownNone
		return &replaceDecoder{pat: p, content: *c.Content}, nil
	case "BPEDecoder":
		var c struct {
			Suffix *string `json:"suffix"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("BPEDecoder: %w", err)
		}
		d := bpeDecoder{suffix: "</w>"}
		if c.Suffix != nil {
			d.suffix = *c.Suffix
		}
		if d.suffix == "" {
			return nil, errors.New("BPEDecoder: empty suffix")
		}
		return d, nil
	case "":
		return nil, errors.New(`missing "type"`)
	}
	return nil, fmt.Errorf("unsupported decoder type %q", typ)
}
