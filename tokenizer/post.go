package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// postProcessor adds special tokens around an encoded sequence (HF's
// PostProcessor for a single sequence).
type postProcessor interface {
	process(ids []int32, addSpecial bool) []int32
}

type templatePiece struct {
	seq     bool    // the sequence itself ($A)
	special []int32 // ids of a special token
}

type templateProcessor struct{ single []templatePiece }

func (tp *templateProcessor) process(ids []int32, addSpecial bool) []int32 {
	if !addSpecial {
		return ids
	}
	n := len(ids)
	for _, p := range tp.single {
		n += len(p.special)
	}
	out := make([]int32, 0, n)
	for _, p := range tp.single {
		if p.seq {
			out = append(out, ids...)
		} else {
			out = append(out, p.special...)
		}
	}
	return out
}

// wrapProcessor is RobertaProcessing/BertProcessing for one sequence:
// cls, the ids, sep.
type wrapProcessor struct{ cls, sep int32 }

func (w wrapProcessor) process(ids []int32, addSpecial bool) []int32 {
	if !addSpecial {
		return ids
	}
	out := make([]int32, 0, len(ids)+2)
	out = append(out, w.cls)
	out = append(out, ids...)
	return append(out, w.sep)
}

type noopProcessor struct{}

func (noopProcessor) process(ids []int32, _ bool) []int32 { return ids }

type seqProcessor []postProcessor

func (q seqProcessor) process(ids []int32, addSpecial bool) []int32 {
	for _, p := range q {
		ids = p.process(ids, addSpecial)
	}
	return ids
}

func parsePostProcessor(raw json.RawMessage, t *Tokenizer) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		q, err := parseSequence(raw, "processors", func(r json.RawMessage) (postProcessor, error) { return parsePostProcessor(r, t) })
		if err != nil {
			return nil, err
		}
		return seqProcessor(q), nil
	case "ByteLevel":
		return noopProcessor{}, nil
	case "TemplateProcessing":
		return parseTemplate(raw, t)
	case "RobertaProcessing", "BertProcessing":
		var c struct {
			Sep []json.RawMessage `json:"sep"`
			Cls []json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		var ids [2]int32
		for i, x := range [][]json.RawMessage{c.Cls, c.Sep} {
			var id int64
			if len(x) != 2 || json.Unmarshal(x[1], &id) != nil {
				return nil, fmt.Errorf(`%s: "cls" and "sep" must be [token, id]`, typ)
			}
			if id < 0 || id >= int64(len(t.idToTok)) {
				return nil, fmt.Errorf("%s: id %d out of range", typ, id)
			}
			ids[i] = int32(id)
		}
		return wrapProcessor{cls: ids[0], sep: ids[1]}, nil
	case "":
		return nil, errors.New(`missing "type"`)
	}
	return nil, fmt.Errorf("unsupported post-processor type %q", typ)
}

func parseTemplate(raw json.RawMessage, t *Tokenizer) (postProcessor, error) {
	var c struct {
		Single        json.RawMessage `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("TemplateProcessing: %w", err)
	}
	special := func(name string) ([]int32, error) {
		st, ok := c.SpecialTokens[name]
		if !ok {
			return nil, fmt.Errorf("TemplateProcessing: special token %q missing from special_tokens", name)
		}
		ids := make([]int32, len(st.IDs))
		for i, id := range st.IDs {
			if id < 0 || id >= int64(len(t.idToTok)) {
				return nil, fmt.Errorf("TemplateProcessing: special token %q: id %d out of range", name, id)
			}
			ids[i] = int32(id)
		}
		return ids, nil
	}
	tp := &templateProcessor{}
	// The template is a list of pieces, or (in hand-written files) a string
	// such as "<s> $A".
	var str string
	if err := json.Unmarshal(c.Single, &str); err == nil {
		for _, f := range strings.Fields(str) {
			name, _, _ := strings.Cut(f, ":")
			if strings.HasPrefix(name, "$") {
				if name != "$" && name != "$A" && name != "$0" {
					return nil, fmt.Errorf("TemplateProcessing: single template uses %q", name)
				}
				tp.single = append(tp.single, templatePiece{seq: true})
				continue
			}
			ids, err := special(name)
			if err != nil {
				return nil, err
			}
			tp.single = append(tp.single, templatePiece{special: ids})
		}
		return tp, nil
	}
	var pieces []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	}
	if err := json.Unmarshal(c.Single, &pieces); err != nil {
		return nil, fmt.Errorf("TemplateProcessing: single: %w", err)
	}
	for i, p := range pieces {
		switch {
		case p.SpecialToken != nil && p.Sequence == nil:
			ids, err := special(p.SpecialToken.ID)
			if err != nil {
				return nil, err
			}
			tp.single = append(tp.single, templatePiece{special: ids})
		case p.Sequence != nil && p.SpecialToken == nil:
			if p.Sequence.ID != "A" {
				return nil, fmt.Errorf("TemplateProcessing: single[%d] uses sequence %q", i, p.Sequence.ID)
			}
			tp.single = append(tp.single, templatePiece{seq: true})
		default:
			return nil, fmt.Errorf("TemplateProcessing: single[%d] is neither a SpecialToken nor a Sequence", i)
		}
	}
	return tp, nil
}
