package gguf

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Building a Hugging Face tokenizer.json from tokenizer.ggml.* metadata.
//
// llama.cpp's converter (convert_hf_to_gguf.py) stores a byte-level BPE
// tokenizer as tokenizer.ggml.model "gpt2": the tokens by id with their
// types (normal, control, user-defined, unused padding), the merges, the
// special token ids and add_bos/add_eos flags. What it does not store —
// the normalizer, the pre-tokenizer and the BPE model's options — it names
// by tokenizer.ggml.pre, a label it gives a Hugging Face tokenizer after
// checking what that tokenizer does to a test text. For the labels below
// the Hugging Face components are known exactly (each is the pipeline of
// a published tokenizer.json, and llama.cpp's llama-vocab.cpp applies the
// same regexes for that label), so the tokenizer.json rebuilt from the
// metadata encodes like the original one; TestTokenizerFromGGUF proves
// it on the shared tokenizers (gpt2, llama3, qwen3, smollm2) over the
// WikiText-2 test text and the vocabulary tests. Every other label, and
// llama.cpp's SentencePiece ("llama") and other vocabularies, are refused:
// the original tokenizer.json must then be given.

// A hfPre is the Hugging Face pipeline behind tokenizer.ggml.pre labels.
type hfPre struct {
	names        []string // tokenizer.ggml.pre values (the first is written by Convert)
	normalizer   string   // JSON
	preTokenizer string   // JSON
	ignoreMerges bool     // the BPE model's ignore_merges
	addBOS       bool     // llama.cpp's add_bos when tokenizer.ggml.add_bos_token is absent
}

// hfPres returns the labels qppl rebuilds, with their pipelines: GPT-2's
// byte-level regex; Llama 3's split regex (digits in groups of up to 3,
// ignore_merges, BOS); Qwen2/2.5/3's split regex (single digits) behind
// an NFC normalizer; SmolLM's single digits before GPT-2's regex.
func hfPres() []hfPre {
	const byteLevelRegex = `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`
	return []hfPre{
		{names: []string{"gpt-2"}, normalizer: `null`, preTokenizer: byteLevelRegex},
		{
			names:      []string{"llama-bpe", "llama3", "llama-v3"},
			normalizer: `null`,
			preTokenizer: `{"type":"Sequence","pretokenizers":[` +
				`{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},` +
				`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`,
			ignoreMerges: true, addBOS: true,
		},
		{
			names:      []string{"qwen2"},
			normalizer: `{"type":"NFC"}`,
			preTokenizer: `{"type":"Sequence","pretokenizers":[` +
				`{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},` +
				`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]}`,
		},
		{
			names:        []string{"smollm"},
			normalizer:   `null`,
			preTokenizer: `{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},` + byteLevelRegex + `]}`,
		},
	}
}

// supportedPres lists the labels for messages.
func supportedPres() string {
	var s []string
	for _, p := range hfPres() {
		s = append(s, p.names...)
	}
	return strings.Join(s, ", ")
}

// canonical parses a pipeline component for comparison, without the
// fields that only change offsets (trim_offsets).
func canonical(raw json.RawMessage) any {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "trim_offsets")
			for k, e := range x {
				x[k] = strip(e)
			}
		case []any:
			for i, e := range x {
				x[i] = strip(e)
			}
		}
		return v
	}
	return strip(v)
}

// preLabel returns the tokenizer.ggml.pre label of a tokenizer.json's
// pipeline, or "default" when it is none of hfPres.
func preLabel(normalizer, preTokenizer json.RawMessage, ignoreMerges bool) string {
	n, p := canonical(normalizer), canonical(preTokenizer)
	for _, h := range hfPres() {
		if h.ignoreMerges == ignoreMerges && reflect.DeepEqual(n, canonical(json.RawMessage(h.normalizer))) && reflect.DeepEqual(p, canonical(json.RawMessage(h.preTokenizer))) {
			return h.names[0]
		}
	}
	return "default"
}

// Tokenizer metadata keys.
const (
	keyTokModel  = "tokenizer.ggml.model"
	keyTokPre    = "tokenizer.ggml.pre"
	keyTokTokens = "tokenizer.ggml.tokens"
	keyTokTypes  = "tokenizer.ggml.token_type"
	keyTokMerges = "tokenizer.ggml.merges"
)

// HasTokenizer reports whether the file carries tokenizer.ggml.* metadata.
func (m *Model) HasTokenizer() bool {
	_, ok := m.meta(keyTokModel)
	return ok
}

// TokenizerJSON rebuilds the Hugging Face tokenizer.json (and a
// tokenizer_config.json naming its BOS/EOS) from the file's tokenizer
// metadata, for the tokenizer.ggml.pre labels whose Hugging Face pipeline
// is known exactly (see hfPres); anything else is refused, wrapping
// ErrUnsupported, with a message asking for the original tokenizer.json.
func (m *Model) TokenizerJSON() (tokenizerJSON, config []byte, err error) {
	return BuildTokenizerJSON(m.Files[0].KVs, m.Files[0].Path)
}

// BuildTokenizerJSON is TokenizerJSON over metadata key/values; path names
// the file in errors.
func BuildTokenizerJSON(kvs []KV, path string) (tokenizerJSON, config []byte, err error) {
	get := func(key string) (Value, bool) {
		for _, kv := range kvs {
			if kv.Key == key {
				return kv.Value, true
			}
		}
		return Value{}, false
	}
	bad := func(key string, v Value, want string) error {
		return fmt.Errorf("%w: %s: metadata %q = %v (%s): %s", ErrFormat, path, key, v, v.Type, want)
	}
	refuse := func(what string) error {
		return fmt.Errorf("%w: %s: %s: qppl rebuilds a tokenizer from GGUF metadata only where it provably matches the Hugging Face one (tokenizer.ggml.model gpt2 with tokenizer.ggml.pre %s); pass the original model's tokenizer.json with --tokenizer (or put it beside the .gguf file)", ErrUnsupported, path, what, supportedPres())
	}
	str := func(key string) (string, bool, error) {
		v, ok := get(key)
		if !ok {
			return "", false, nil
		}
		s, ok := v.Str()
		if !ok {
			return "", false, bad(key, v, "want a string")
		}
		return s, true, nil
	}
	model, ok, err := str(keyTokModel)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s: no tokenizer.ggml.* metadata: pass the original model's tokenizer.json with --tokenizer", ErrUnsupported, path)
	}
	if model != "gpt2" {
		return nil, nil, refuse(fmt.Sprintf("tokenizer.ggml.model %q", model))
	}
	preName, _, err := str(keyTokPre)
	if err != nil {
		return nil, nil, err
	}
	var pre *hfPre
	for _, h := range hfPres() {
		if slices.Contains(h.names, preName) {
			pre = &h
			break
		}
	}
	if pre == nil {
		return nil, nil, refuse(fmt.Sprintf("tokenizer.ggml.pre %q", preName))
	}
	strs := func(key string) ([]string, error) {
		v, ok := get(key)
		if !ok {
			return nil, fmt.Errorf("%w: %s: metadata %q is missing", ErrFormat, path, key)
		}
		a, ok := v.Array()
		if !ok {
			return nil, bad(key, v, "want an array of strings")
		}
		ss, ok := a.Strings()
		if !ok {
			return nil, bad(key, v, "want an array of strings")
		}
		return ss, nil
	}
	tokens, err := strs(keyTokTokens)
	if err != nil {
		return nil, nil, err
	}
	merges, err := strs(keyTokMerges)
	if err != nil {
		return nil, nil, err
	}
	tv, ok := get(keyTokTypes)
	if !ok {
		return nil, nil, refuse("metadata \"tokenizer.ggml.token_type\" is missing (control tokens cannot be told apart)")
	}
	ta, ok := tv.Array()
	if !ok || ta.Len != len(tokens) {
		return nil, nil, bad(keyTokTypes, tv, fmt.Sprintf("want an array of %d integers (one per token)", len(tokens)))
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	vocab := make(map[string]int, len(tokens))
	var addedToks []added
	seen := make(map[string]int, len(tokens))
	for id, s := range tokens {
		typ, ok := ta.At(id).Int()
		if !ok {
			return nil, nil, bad(keyTokTypes, tv, "want integers")
		}
		if typ == tokenUnused {
			continue // llama.cpp's [PAD<id>] padding: no token in the Hugging Face tokenizer
		}
		if prev, dup := seen[s]; dup {
			return nil, nil, fmt.Errorf("%w: %s: metadata %q: tokens %d and %d are both %q", ErrFormat, path, keyTokTokens, prev, id, s)
		}
		seen[s] = id
		switch typ {
		case tokenNormal:
			vocab[s] = id
		case tokenControl, tokenUserDefined:
			// Added tokens, matched in the raw text before the
			// pre-tokenizer, as the Hugging Face tokenizer does.
			addedToks = append(addedToks, added{ID: id, Content: s, Special: typ == tokenControl})
		default:
			return nil, nil, refuse(fmt.Sprintf("token %d %q has token type %d (a byte-level BPE has normal, control, user-defined and unused tokens only)", id, s, typ))
		}
	}
	for i, mg := range merges {
		a, b, ok := strings.Cut(mg, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return nil, nil, fmt.Errorf("%w: %s: metadata %q: merge %d %q is not two tokens", ErrFormat, path, keyTokMerges, i, mg)
		}
	}
	special := func(key string) (int, bool, error) {
		v, ok := get(key)
		if !ok {
			return 0, false, nil
		}
		n, ok := v.Int()
		if !ok || n < 0 || n >= int64(len(tokens)) {
			return 0, false, bad(key, v, fmt.Sprintf("want a token id below %d", len(tokens)))
		}
		return int(n), true, nil
	}
	flag := func(key string, def bool) (bool, error) {
		v, ok := get(key)
		if !ok {
			return def, nil
		}
		b, ok := v.Bool()
		if !ok {
			return false, bad(key, v, "want a bool")
		}
		return b, nil
	}
	addBOS, err := flag("tokenizer.ggml.add_bos_token", pre.addBOS)
	if err != nil {
		return nil, nil, err
	}
	addEOS, err := flag("tokenizer.ggml.add_eos_token", false)
	if err != nil {
		return nil, nil, err
	}
	bos, hasBOS, err := special("tokenizer.ggml.bos_token_id")
	if err != nil {
		return nil, nil, err
	}
	eos, hasEOS, err := special("tokenizer.ggml.eos_token_id")
	if err != nil {
		return nil, nil, err
	}
	post := json.RawMessage("null")
	if addBOS || addEOS {
		type piece map[string]map[string]any
		var single []piece
		specials := map[string]any{}
		add := func(id int) {
			s := tokens[id]
			single = append(single, piece{"SpecialToken": {"id": s, "type_id": 0}})
			specials[s] = map[string]any{"id": s, "ids": []int{id}, "tokens": []string{s}}
		}
		if addBOS {
			if !hasBOS {
				return nil, nil, fmt.Errorf("%w: %s: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is not set", ErrFormat, path)
			}
			add(bos)
		}
		single = append(single, piece{"Sequence": {"id": "A", "type_id": 0}})
		if addEOS {
			if !hasEOS {
				return nil, nil, fmt.Errorf("%w: %s: tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is not set", ErrFormat, path)
			}
			add(eos)
		}
		if post, err = json.Marshal(map[string]any{"type": "TemplateProcessing", "single": single, "special_tokens": specials}); err != nil {
			return nil, nil, err
		}
	}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   addedToks,
		"normalizer":     json.RawMessage(pre.normalizer),
		"pre_tokenizer":  json.RawMessage(pre.preTokenizer),
		"post_processor": post,
		"decoder":        json.RawMessage(`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`),
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": pre.ignoreMerges, "vocab": vocab, "merges": merges,
		},
	}
	if tokenizerJSON, err = json.Marshal(tj); err != nil {
		return nil, nil, err
	}
	cfg := map[string]any{}
	if hasBOS {
		cfg["bos_token"] = tokens[bos]
	}
	if hasEOS {
		cfg["eos_token"] = tokens[eos]
	}
	config, err = json.Marshal(cfg)
	return tokenizerJSON, config, err
}
