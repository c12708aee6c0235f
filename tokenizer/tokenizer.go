package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Tokenizer is a loaded tokenizer.json.
type Tokenizer struct {
	added   *addedVocab
	norm    normalizer   // nil: none
	pre     preTokenizer // nil: none
	model   *bpe
	post    postProcessor // nil: none
	dec     decoder       // nil: tokens joined with " "
	idToTok []string
	special []bool // by id: the token string is that of a special added token
	present []bool // by id: some token has this id
}

// Load reads a tokenizer.json file, or the tokenizer.json (and
// tokenizer_config.json) of a model directory. A tokenizer_config.json next
// to the file is read too: for LlamaTokenizer/GemmaTokenizer classes its
// add_bos_token/add_eos_token replace the post-processor, as transformers'
// fast tokenizers do.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	file := path
	if st.IsDir() {
		file = filepath.Join(path, "tokenizer.json")
	}
	data, err := readBounded(file)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfgFile := filepath.Join(filepath.Dir(file), "tokenizer_config.json")
	cfg, err := readBounded(cfgFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		cfg = nil
	}
	t, err := fromJSON(data, cfg)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("tokenizer %s: %w", cfgFile, ce.err)
		}
		return nil, fmt.Errorf("tokenizer %s: %w", file, err)
	}
	return t, nil
}

// maxFileSize bounds what Load reads: real tokenizer.json files are tens
// of megabytes.
const maxFileSize = 1 << 30

func readBounded(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("%s: %d bytes is too large for a tokenizer file", path, st.Size())
	}
	return os.ReadFile(path)
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json file;
// config is the optional contents of tokenizer_config.json (nil if none).
func FromJSON(tokenizerJSON, config []byte) (*Tokenizer, error) {
	t, err := fromJSON(tokenizerJSON, config)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("tokenizer_config.json: %w", ce.err)
		}
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

// Encode returns the ids of text; addSpecial applies the post-processor's
// special tokens (BOS etc.) as HF's add_special_tokens=True does.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	ids := make([]int32, 0, len(text)/3+4)
	word := func(p piece) { ids = t.model.tokenize(p.s, ids) }
	if t.pre != nil {
		word = chain(t.pre, word)
	}
	t.added.extract(text, t.norm, func(p piece) {
		if p.added {
			ids = append(ids, p.id)
			return
		}
		word(p)
	})
	if t.post != nil {
		ids = t.post.process(ids, addSpecial)
	}
	return ids
}

// Decode turns ids back into text through the decoder. Ids without a
// token are skipped; skipSpecial also skips special added tokens.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.idToTok) || !t.present[id] {
			continue
		}
		if skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, t.idToTok[id])
	}
	if t.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.dec.decode(toks), "")
}

// VocabSize is the number of ids, added tokens included: one more than the
// largest id of the model vocabulary and the added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.idToTok) }

// TokenToID returns the id of a token string (added tokens first, then the
// model vocabulary).
func (t *Tokenizer) TokenToID(tok string) (int32, bool) {
	if a, ok := t.added.byContent[tok]; ok {
		return a.id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// IDToToken returns the token string of id.
func (t *Tokenizer) IDToToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.idToTok) || !t.present[id] {
		return "", false
	}
	return t.idToTok[id], true
}

// IsSpecial reports whether the token of id is special: its string is the
// content of a special added token (what Decode with skipSpecial leaves out).
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// BOS returns the token the post-processor puts first when Encode is
// called with addSpecial (Llama's BOS); ok is false when it adds none.
func (t *Tokenizer) BOS() (int32, bool) {
	if t.post == nil {
		return 0, false
	}
	ids := t.post.process(nil, true)
	if len(ids) == 0 {
		return 0, false
	}
	// The first id of an empty single sequence is a prefix token only if
	// it also comes first for a non-empty sequence.
	probe := t.post.process([]int32{-1}, true)
	if len(probe) > 0 && probe[0] != -1 {
		return probe[0], true
	}
	return 0, false
}

// configError marks an error in tokenizer_config.json.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }

type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         json.RawMessage  `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// maxID bounds token ids so that a corrupt file cannot make us allocate an
// id table far larger than the file itself justifies.
func maxIDFor(entries int) int64 { return 2*int64(entries) + 1024 }

func fromJSON(data, config []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if isNull(f.Model) {
		return nil, errors.New("no model")
	}
	model, err := parseModel(f.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t := &Tokenizer{model: model}
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if t.dec, err = parseDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	bound := maxIDFor(len(model.vocab) + len(f.AddedTokens))
	maxID := int64(-1)
	for _, id := range model.vocab {
		maxID = max(maxID, int64(id))
	}
	toks := make([]addedToken, 0, len(f.AddedTokens))
	for i, a := range f.AddedTokens {
		if a.ID == nil {
			return nil, fmt.Errorf("added_tokens[%d] (%q): no id", i, a.Content)
		}
		if *a.ID < 0 || *a.ID > bound {
			return nil, fmt.Errorf("added_tokens[%d] (%q): id %d out of range", i, a.Content, *a.ID)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		norm := !a.Special
		if a.Normalized != nil {
			norm = *a.Normalized
		}
		toks = append(toks, addedToken{
			id: int32(*a.ID), content: a.Content, singleWord: a.SingleWord,
			lstrip: a.Lstrip, rstrip: a.Rstrip, normalized: norm, special: a.Special,
		})
		maxID = max(maxID, *a.ID)
	}
	if maxID > bound {
		return nil, fmt.Errorf("token id %d out of range for %d entries", maxID, len(model.vocab)+len(f.AddedTokens))
	}
	t.added = newAddedVocab(toks, t.norm)
	t.idToTok = make([]string, maxID+1)
	t.special = make([]bool, maxID+1)
	t.present = make([]bool, maxID+1)
	for tok, id := range model.vocab {
		// Two tokens sharing an id: keep the smaller string, so that the
		// result does not depend on map order.
		if !t.present[id] || tok < t.idToTok[id] {
			t.idToTok[id] = tok
		}
		t.present[id] = true
	}
	// As HF tokenizers 0.23: an added token with normalized=true is shown
	// (IDToToken, Decode) in its normalized form; a token string is special
	// when it equals the content of a special added token.
	specials := make(map[string]bool)
	for _, a := range toks {
		t.idToTok[a.id] = a.content
		if a.normalized && t.norm != nil {
			t.idToTok[a.id] = t.norm.normalize(a.content)
		}
		t.present[a.id] = true
		if a.special {
			specials[a.content] = true
		}
	}
	for id, tok := range t.idToTok {
		t.special[id] = t.present[id] && specials[tok]
	}
	if t.post, err = parsePostProcessor(f.PostProcessor, t); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if len(config) > 0 {
		if err := t.applyConfig(config); err != nil {
			return nil, &configError{err}
		}
	}
	return t, nil
}

func isNull(m json.RawMessage) bool {
	s := strings.TrimSpace(string(m))
	return s == "" || s == "null"
}

// typeOf reads the "type" field of a component.
func typeOf(m json.RawMessage) (string, error) {
	var h struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(m, &h); err != nil {
		return "", err
	}
	if h.Type == nil {
		return "", nil
	}
	return *h.Type, nil
}

// applyConfig implements what transformers' LlamaTokenizerFast (and the
// CodeLlama and Gemma fast tokenizers) do on load: update_post_processor
// rebuilds the post-processor as "[bos] $A [eos]" from add_bos_token
// (default true) and add_eos_token (default false). Other classes keep the
// tokenizer.json post-processor.
func (t *Tokenizer) applyConfig(data []byte) error {
	var c struct {
		Class  string          `json:"tokenizer_class"`
		AddBOS *bool           `json:"add_bos_token"`
		AddEOS *bool           `json:"add_eos_token"`
		BOS    json.RawMessage `json:"bos_token"`
		EOS    json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	var defBOS, defEOS string
	switch c.Class {
	case "LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast":
		defBOS, defEOS = "<s>", "</s>"
	case "GemmaTokenizer", "GemmaTokenizerFast":
		defBOS, defEOS = "<bos>", "<eos>"
	default:
		return nil
	}
	addBOS := c.AddBOS == nil || *c.AddBOS
	addEOS := c.AddEOS != nil && *c.AddEOS
	resolve := func(name string, raw json.RawMessage, def string) (int32, error) {
		tok := def
		if len(raw) > 0 {
			var err error
			if tok, err = tokenContent(raw); err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
		}
		if tok == "" {
			return 0, fmt.Errorf("add_%s is true but %s is not set", name, name)
		}
		id, ok := t.TokenToID(tok)
		if !ok {
			return 0, fmt.Errorf("%s %q is not in the vocabulary", name, tok)
		}
		return id, nil
	}
	tp := &templateProcessor{}
	if addBOS {
		id, err := resolve("bos_token", c.BOS, defBOS)
		if err != nil {
			return err
		}
		tp.single = append(tp.single, templatePiece{special: []int32{id}})
	}
	tp.single = append(tp.single, templatePiece{seq: true})
	if addEOS {
		id, err := resolve("eos_token", c.EOS, defEOS)
		if err != nil {
			return err
		}
		tp.single = append(tp.single, templatePiece{special: []int32{id}})
	}
	t.post = tp
	return nil
}

// tokenContent reads a token given as a string or as {"content": ...}.
func tokenContent(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", err
	}
	return o.Content, nil
}

// parseSequence parses the element list under key of a "Sequence"
// component (normalizer, pre-tokenizer, post-processor or decoder) with
// parse, dropping null elements.
func parseSequence[T comparable](raw json.RawMessage, key string, parse func(json.RawMessage) (T, error)) ([]T, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("Sequence: %w", err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(c[key], &list); c[key] != nil && err != nil {
		return nil, fmt.Errorf("Sequence: %s: %w", key, err)
	}
	var q []T
	var none T
	for i, r := range list {
		v, err := parse(r)
		if err != nil {
			return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
		}
		if v != none {
			q = append(q, v)
		}
	}
	return q, nil
}
