package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// obj is a JSON object literal for building tokenizer.json files in tests.
type obj = map[string]any

// charVocab returns a vocabulary with one entry per character of chars
// (ids in order) plus extra entries after them.
func charVocab(chars string, extra ...string) obj {
	v := obj{}
	n := 0
	for _, r := range chars {
		v[string(r)] = n
		n++
	}
	for _, e := range extra {
		v[e] = n
		n++
	}
	return v
}

func bpeModel(vocab obj, merges any, opts obj) obj {
	m := obj{"type": "BPE", "vocab": vocab, "merges": merges}
	for k, v := range opts {
		m[k] = v
	}
	return m
}

func build(t *testing.T, file obj) *Tokenizer {
	t.Helper()
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON(b, nil)
	if err != nil {
		t.Fatalf("FromJSON: %v", err)
	}
	return tk
}

// tokens returns the token strings of ids.
func tokens(tk *Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		s, ok := tk.IDToToken(id)
		if !ok {
			s = "<?>"
		}
		out[i] = s
	}
	return out
}

// preSplit runs only the pre-tokenizer described by pre on s.
func preSplit(t *testing.T, pre obj, s string) []string {
	t.Helper()
	b, _ := json.Marshal(pre)
	p, err := parsePreTokenizer(b)
	if err != nil {
		t.Fatalf("parsePreTokenizer(%s): %v", b, err)
	}
	var out []string
	p.split(piece{s: s}, func(q piece) { out = append(out, q.s) })
	return out
}

// The expected splits are the examples of the HF tokenizers documentation.
func TestPreTokenizers(t *testing.T) {
	split := func(beh string) obj {
		return obj{"type": "Split", "pattern": obj{"String": "-"}, "behavior": beh, "invert": false}
	}
	for _, tc := range []struct {
		name string
		pre  obj
		in   string
		want []string
	}{
		{"Removed", split("Removed"), "the-final--countdown", []string{"the", "final", "countdown"}},
		{"Isolated", split("Isolated"), "the-final--countdown", []string{"the", "-", "final", "-", "-", "countdown"}},
		{"MergedWithPrevious", split("MergedWithPrevious"), "the-final--countdown", []string{"the-", "final-", "-", "countdown"}},
		{"MergedWithNext", split("MergedWithNext"), "the-final--countdown", []string{"the", "-final", "-", "-countdown"}},
		{"Contiguous", split("Contiguous"), "the-final--countdown", []string{"the", "-", "final", "--", "countdown"}},
		{"InvertRegex", obj{"type": "Split", "pattern": obj{"Regex": `\d+`}, "behavior": "Removed", "invert": true}, "ab12cd345", []string{"12", "345"}},
		{"RegexIsolated", obj{"type": "Split", "pattern": obj{"Regex": `\s+`}, "behavior": "Isolated", "invert": false}, "a  b", []string{"a", "  ", "b"}},
		{"DigitsIndividual", obj{"type": "Digits", "individual_digits": true}, "Call 123 please", []string{"Call ", "1", "2", "3", " please"}},
		{"DigitsContiguous", obj{"type": "Digits", "individual_digits": false}, "Call 123 please", []string{"Call ", "123", " please"}},
		{"MetaspaceAlways", obj{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}, "Hey friend!", []string{"▁Hey", "▁friend!"}},
		{"MetaspaceNever", obj{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": true}, "Hey friend!", []string{"Hey", "▁friend!"}},
		{"MetaspaceNoSplit", obj{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}, "Hey friend!", []string{"▁Hey▁friend!"}},
		{"Whitespace", obj{"type": "Whitespace"}, "Hey friend!  How are you?!?", []string{"Hey", "friend", "!", "How", "are", "you", "?!?"}},
		{"WhitespaceSplit", obj{"type": "WhitespaceSplit"}, "Hey friend!", []string{"Hey", "friend!"}},
		{"Punctuation", obj{"type": "Punctuation"}, "Hey friend!?", []string{"Hey friend", "!", "?"}},
		{"PunctuationSymbols", obj{"type": "Punctuation", "behavior": "Contiguous"}, "$a^`b«»€", []string{"$", "a", "^`", "b", "«»", "€"}},
		{"ByteLevel", obj{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}, "Hello my friend, how is your day going?",
			[]string{"ĠHello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}},
		{"ByteLevelNoRegex", obj{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}, "a b\n", []string{"aĠbĊ"}},
		{"Sequence", obj{"type": "Sequence", "pretokenizers": []any{obj{"type": "WhitespaceSplit"}, obj{"type": "Digits", "individual_digits": true}}},
			"ab12 c", []string{"ab", "1", "2", "c"}},
		{"Llama3Split", obj{"type": "Split", "pattern": obj{"Regex": llama3Regex}, "behavior": "Isolated", "invert": false},
			"I've 12345 cats!\n\n", []string{"I", "'ve", " ", "123", "45", " cats", "!\n\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := preSplit(t, tc.pre, tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestNormalizers(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    obj
		in   string
		want string
	}{
		{"NFC", obj{"type": "NFC"}, "e\u0301", "é"},
		{"NFD", obj{"type": "NFD"}, "é", "e\u0301"},
		{"NFKC", obj{"type": "NFKC"}, "ﬁ²", "fi2"},
		{"NFKD", obj{"type": "NFKD"}, "ﬁé", "fie\u0301"},
		{"Lowercase", obj{"type": "Lowercase"}, "HeLLo İΣ", "hello i\u0307σ"},
		{"Strip", obj{"type": "Strip", "strip_left": true, "strip_right": false}, "  a b  ", "a b  "},
		{"StripAccents", obj{"type": "Sequence", "normalizers": []any{obj{"type": "NFD"}, obj{"type": "StripAccents"}}}, "café", "cafe"},
		{"Prepend", obj{"type": "Prepend", "prepend": "▁"}, "a", "▁a"},
		{"PrependEmpty", obj{"type": "Prepend", "prepend": "▁"}, "", ""},
		{"ReplaceString", obj{"type": "Replace", "pattern": obj{"String": " "}, "content": "▁"}, "a b  c", "a▁b▁▁c"},
		{"ReplaceRegex", obj{"type": "Replace", "pattern": obj{"Regex": ` {2,}`}, "content": " "}, "a b   c", "a b c"},
		{"Sequence", obj{"type": "Sequence", "normalizers": []any{obj{"type": "Prepend", "prepend": "▁"}, obj{"type": "Replace", "pattern": obj{"String": " "}, "content": "▁"}}}, "Hi you", "▁Hi▁you"},
		{"ByteLevel", obj{"type": "ByteLevel"}, "a é", "aĠÃ©"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.n)
			n, err := parseNormalizer(b)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.normalize(tc.in); got != tc.want {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestBPEModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model obj
		in    string
		want  []string
	}{
		{"RankOrder", bpeModel(charVocab("abc", "ab", "bc"), []string{"b c", "a b"}, nil), "abc", []string{"a", "bc"}},
		{"RankOrder2", bpeModel(charVocab("abc", "ab", "bc"), []string{"a b", "b c"}, nil), "abc", []string{"ab", "c"}},
		{"LeftmostTie", bpeModel(charVocab("ab", "ab"), []string{"a b"}, nil), "abab", []string{"ab", "ab"}},
		{"OverlapLeftFirst", bpeModel(charVocab("a", "aa"), []string{"a a"}, nil), "aaa", []string{"aa", "a"}},
		{"Chain", bpeModel(charVocab("abc", "ab", "abc"), [][]string{{"a", "b"}, {"ab", "c"}}, nil), "abcab", []string{"abc", "ab"}},
		{"UnkFused", bpeModel(charVocab("ab", "<unk>"), []string{}, obj{"unk_token": "<unk>", "fuse_unk": true}), "axyb", []string{"a", "<unk>", "b"}},
		{"UnkNotFused", bpeModel(charVocab("ab", "<unk>"), []string{}, obj{"unk_token": "<unk>"}), "axyb", []string{"a", "<unk>", "<unk>", "b"}},
		{"NoUnkDrops", bpeModel(charVocab("ab"), []string{}, nil), "axb", []string{"a", "b"}},
		{"ByteFallback", bpeModel(charVocab("a", "<0xC3>", "<0xA9>", "<unk>"), []string{}, obj{"byte_fallback": true, "unk_token": "<unk>"}), "aéa", []string{"a", "<0xC3>", "<0xA9>", "a"}},
		{"ByteFallbackMissingByte", bpeModel(charVocab("a", "<0xC3>", "<unk>"), []string{}, obj{"byte_fallback": true, "unk_token": "<unk>"}), "éa", []string{"<unk>", "a"}},
		{"Prefix", bpeModel(charVocab("a", "##b", "##c", "ab", "abc"), []string{"a ##b", "ab ##c"}, obj{"continuing_subword_prefix": "##"}), "abc", []string{"abc"}},
		{"PrefixPartial", bpeModel(charVocab("a", "##b", "##c", "ab"), []string{"a ##b"}, obj{"continuing_subword_prefix": "##"}), "abc", []string{"ab", "##c"}},
		{"Suffix", bpeModel(charVocab("a", "b</w>", "ab</w>"), []string{"a b</w>"}, obj{"end_of_word_suffix": "</w>"}), "ab", []string{"ab</w>"}},
		{"IgnoreMergesOff", bpeModel(charVocab("abc", "ab", "abc"), []string{"a b"}, nil), "abc", []string{"ab", "c"}},
		{"IgnoreMergesOn", bpeModel(charVocab("abc", "ab", "abc"), []string{"a b"}, obj{"ignore_merges": true}), "abc", []string{"abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := build(t, obj{"model": tc.model})
			if got := tokens(tk, tk.Encode(tc.in, false)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

// TestSplitMeta checks that cutting SentencePiece-style words before U+2581
// is only enabled when no token holds U+2581 after another character, and
// that it gives the same ids as the uncut word.
func TestSplitMeta(t *testing.T) {
	vocab := charVocab("▁ab", "▁a", "▁▁", "▁▁a", "b▁")
	merges := []string{"b ▁", "▁ a", "▁ ▁", "▁▁ a"}
	tk := build(t, obj{"model": bpeModel(vocab, merges, nil)})
	if tk.model.splitMeta {
		t.Fatal("splitMeta enabled although the vocabulary has \"b▁\"")
	}
	if got, want := tokens(tk, tk.Encode("ab▁a", false)), []string{"a", "b▁", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
	delete(vocab, "b▁")
	tk = build(t, obj{"model": bpeModel(vocab, merges[1:], nil)})
	if !tk.model.splitMeta {
		t.Fatal("splitMeta disabled")
	}
	for _, s := range []string{"ab▁a", "▁▁a▁a▁▁▁ab", "a▁▁▁▁a", "▁", "▁▁"} {
		got := tk.Encode(s, false)
		tk.model.splitMeta = false
		want := tk.Encode(s, false)
		tk.model.splitMeta = true
		tk.model.resetCache()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: cut %v, uncut %v", s, tokens(tk, got), tokens(tk, want))
		}
	}
}

func TestAddedTokens(t *testing.T) {
	model := bpeModel(charVocab("abcdxyz <>M"), []string{}, nil)
	tok := func(content string, opts obj) obj {
		o := obj{"id": 100, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
		for k, v := range opts {
			o[k] = v
		}
		return o
	}
	for _, tc := range []struct {
		name  string
		added []any
		norm  any
		in    string
		want  []string
	}{
		{"Plain", []any{tok("<M>", nil)}, nil, "a <M> b", []string{"a", " ", "<M>", " ", "b"}},
		{"Lstrip", []any{tok("<M>", obj{"lstrip": true})}, nil, "a  <M> b", []string{"a", "<M>", " ", "b"}},
		{"Rstrip", []any{tok("<M>", obj{"rstrip": true})}, nil, "a <M>  b", []string{"a", " ", "<M>", "b"}},
		{"SingleWordNo", []any{tok("<M>", obj{"single_word": true})}, nil, "a<M> b", []string{"a", "<", "M", ">", " ", "b"}},
		{"SingleWordYes", []any{tok("<M>", obj{"single_word": true})}, nil, "a <M> b", []string{"a", " ", "<M>", " ", "b"}},
		{"Longest", []any{tok("<M>", nil), obj{"id": 101, "content": "<M>x", "special": true, "normalized": false}}, nil, "<M>x<M>", []string{"<M>x", "<M>"}},
		{"NotNormalizedMissesLowercased", []any{tok("<m>", nil)}, obj{"type": "Lowercase"}, "<M>", []string{"<", ">"}},
		{"NormalizedMatchesAfter", []any{tok("<m>", obj{"normalized": true})}, obj{"type": "Lowercase"}, "<M>", []string{"<m>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := obj{"model": model, "added_tokens": tc.added}
			if tc.norm != nil {
				f["normalizer"] = tc.norm
			}
			tk := build(t, f)
			if got := tokens(tk, tk.Encode(tc.in, false)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestPostProcessors(t *testing.T) {
	model := bpeModel(charVocab("ab", "<s>", "</s>"), []string{}, nil)
	s, e := map[string]any{"id": "<s>", "ids": []int{2}, "tokens": []string{"<s>"}}, map[string]any{"id": "</s>", "ids": []int{3}, "tokens": []string{"</s>"}}
	list := obj{"type": "TemplateProcessing",
		"single":         []any{obj{"SpecialToken": obj{"id": "<s>", "type_id": 0}}, obj{"Sequence": obj{"id": "A", "type_id": 0}}, obj{"SpecialToken": obj{"id": "</s>", "type_id": 0}}},
		"special_tokens": obj{"<s>": s, "</s>": e}}
	for _, tc := range []struct {
		name    string
		post    any
		want    []int32
		bos     int32
		hasBOS  bool
		without []int32
	}{
		{"None", nil, []int32{0, 1}, 0, false, []int32{0, 1}},
		{"TemplateList", list, []int32{2, 0, 1, 3}, 2, true, []int32{0, 1}},
		{"TemplateString", obj{"type": "TemplateProcessing", "single": "$A:0 </s>:0", "special_tokens": obj{"</s>": e}}, []int32{0, 1, 3}, 0, false, []int32{0, 1}},
		{"Roberta", obj{"type": "RobertaProcessing", "cls": []any{"<s>", 2}, "sep": []any{"</s>", 3}}, []int32{2, 0, 1, 3}, 2, true, []int32{0, 1}},
		{"Sequence", obj{"type": "Sequence", "processors": []any{obj{"type": "ByteLevel"}, list}}, []int32{2, 0, 1, 3}, 2, true, []int32{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := obj{"model": model}
			if tc.post != nil {
				f["post_processor"] = tc.post
			}
			tk := build(t, f)
			if got := tk.Encode("ab", true); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("addSpecial: got %v want %v", got, tc.want)
			}
			if got := tk.Encode("ab", false); !reflect.DeepEqual(got, tc.without) {
				t.Errorf("no special: got %v want %v", got, tc.without)
			}
			if bos, ok := tk.BOS(); ok != tc.hasBOS || bos != tc.bos {
				t.Errorf("BOS() = %d, %v; want %d, %v", bos, ok, tc.bos, tc.hasBOS)
			}
		})
	}
}

func TestDecoders(t *testing.T) {
	vocab := charVocab("ab▁ ", "<0xC3>", "<0xA9>", "<0xFF>", "▁a", "ĠaÃ©", "Ġ", "<s>")
	for _, tc := range []struct {
		name   string
		dec    any
		toks   []string
		want   string
		skipSp bool
	}{
		{"None", nil, []string{"a", "b"}, "a b", false},
		{"Mistral", obj{"type": "Sequence", "decoders": []any{
			obj{"type": "Replace", "pattern": obj{"String": "▁"}, "content": " "}, obj{"type": "ByteFallback"},
			obj{"type": "Fuse"}, obj{"type": "Strip", "content": " ", "start": 1, "stop": 0}}},
			[]string{"▁a", "<0xC3>", "<0xA9>", "▁", "b"}, "aé b", false},
		{"ByteFallbackInvalid", obj{"type": "ByteFallback"}, []string{"a", "<0xC3>", "<0xFF>", "b"}, "a\uFFFD\uFFFDb", false},
		{"MetaspaceFirst", obj{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}, []string{"▁a", "▁a"}, "a a", false},
		{"MetaspaceNever", obj{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"}, []string{"▁a", "▁a"}, " a a", false},
		{"ByteLevel", obj{"type": "ByteLevel"}, []string{"ĠaÃ©", "Ġ"}, " aé ", false},
		{"ByteLevelLossy", obj{"type": "ByteLevel"}, []string{"ĠaÃ©", "<0xC3>", "a"}, " aé<0xC3>a", false},
		{"StripStop", obj{"type": "Sequence", "decoders": []any{obj{"type": "Fuse"}, obj{"type": "Strip", "content": "b", "start": 0, "stop": 2}}}, []string{"a", "b", "b", "b"}, "ab", false},
		{"SkipSpecial", obj{"type": "Fuse"}, []string{"<s>", "a"}, "a", true},
		{"KeepSpecial", obj{"type": "Fuse"}, []string{"<s>", "a"}, "<s>a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := obj{"model": bpeModel(vocab, []string{}, nil),
				"added_tokens": []any{obj{"id": vocab["<s>"], "content": "<s>", "special": true}}}
			if tc.dec != nil {
				f["decoder"] = tc.dec
			}
			tk := build(t, f)
			var ids []int32
			for _, s := range tc.toks {
				id, ok := tk.TokenToID(s)
				if !ok {
					t.Fatalf("no token %q", s)
				}
				ids = append(ids, id)
			}
			if got := tk.Decode(ids, tc.skipSp); got != tc.want {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"a\xe2\x82b", "a\uFFFDb"},             // truncated 3-byte sequence: one replacement
		{"a\xff\xfeb", "a\uFFFD\uFFFDb"},       // two invalid bytes: two replacements
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: each byte
		{"\xf0\x9f\x98", "\uFFFD"},
	} {
		if got := lossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyUTF8(%q) = %q want %q", tc.in, got, tc.want)
		}
	}
}

func TestMalformed(t *testing.T) {
	good := bpeModel(charVocab("ab", "ab"), []string{"a b"}, nil)
	for _, tc := range []struct {
		name string
		json string
		want string
	}{
		{"NotJSON", `{"model":`, "invalid JSON"},
		{"NoModel", `{"normalizer": null}`, "no model"},
		{"UnknownModel", `{"model": {"type": "Unigram", "vocab": []}}`, `unsupported model type "Unigram"`},
		{"MergeUnknownToken", mustJSON(obj{"model": bpeModel(charVocab("ab"), []string{"a c"}, nil)}), `token "c" is not in the vocabulary`},
		{"MergedUnknown", mustJSON(obj{"model": bpeModel(charVocab("ab"), []string{"a b"}, nil)}), `merged token "ab" is not in the vocabulary`},
		{"MergeNoSpace", mustJSON(obj{"model": bpeModel(charVocab("ab"), []string{"ab"}, nil)}), "not two tokens"},
		{"MergeTriple", mustJSON(obj{"model": bpeModel(charVocab("ab"), [][]string{{"a", "b", "c"}}, nil)}), "merges[0]"},
		{"UnkMissing", mustJSON(obj{"model": bpeModel(charVocab("ab"), []string{}, obj{"unk_token": "<unk>"})}), `unk_token "<unk>"`},
		{"BadRegex", mustJSON(obj{"model": good, "pre_tokenizer": obj{"type": "Split", "pattern": obj{"Regex": "(a"}, "behavior": "Isolated"}}), "bad regex"},
		{"BadBehavior", mustJSON(obj{"model": good, "pre_tokenizer": obj{"type": "Split", "pattern": obj{"String": "a"}, "behavior": "Sideways"}}), `unknown split behavior "Sideways"`},
		{"UnknownNormalizer", mustJSON(obj{"model": good, "normalizer": obj{"type": "Precompiled"}}), `unsupported normalizer type "Precompiled"`},
		{"UnknownPre", mustJSON(obj{"model": good, "pre_tokenizer": obj{"type": "Bogus"}}), `unsupported pre-tokenizer type "Bogus"`},
		{"UnknownDecoder", mustJSON(obj{"model": good, "decoder": obj{"type": "Bogus"}}), `unsupported decoder type "Bogus"`},
		{"UnknownPost", mustJSON(obj{"model": good, "post_processor": obj{"type": "Bogus"}}), `unsupported post-processor type "Bogus"`},
		{"TemplateUnknownSpecial", mustJSON(obj{"model": good, "post_processor": obj{"type": "TemplateProcessing", "single": "<s> $A", "special_tokens": obj{}}}), `special token "<s>" missing`},
		{"IDOutOfRange", mustJSON(obj{"model": good, "added_tokens": []any{obj{"id": 1 << 30, "content": "<x>"}}}), "out of range"},
		{"NegativeID", mustJSON(obj{"model": bpeModel(obj{"a": -1}, []string{}, nil)}), "out of range"},
		{"PatternBoth", mustJSON(obj{"model": good, "normalizer": obj{"type": "Replace", "pattern": obj{"String": "a", "Regex": "b"}, "content": ""}}), "exactly one"},
		{"MissingType", mustJSON(obj{"model": good, "decoder": obj{"x": 1}}), `missing "type"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte(tc.json), nil)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tokenizer.json: ") {
				t.Errorf("error %q does not name tokenizer.json and contain %q", err, tc.want)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestLoadErrorsNameFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(p, []byte(`{"model": {"type": "WordPiece"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{p, dir} {
		_, err := Load(arg)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "WordPiece") {
			t.Errorf("Load(%s) error %v: want the file name and the problem", arg, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing path succeeded")
	}
	if err := os.WriteFile(p, []byte(mustJSON(obj{"model": bpeModel(charVocab("ab"), []string{}, nil)})), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(cfg, []byte(`{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "bos_token": "<s>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), cfg) || !strings.Contains(err.Error(), `"<s>" is not in the vocabulary`) {
		t.Errorf("bad tokenizer_config.json: error %v", err)
	}
}

// TestConfigAddBOS: transformers' LlamaTokenizerFast rebuilds the
// post-processor from add_bos_token/add_eos_token.
func TestConfigAddBOS(t *testing.T) {
	f := mustJSON(obj{"model": bpeModel(charVocab("ab", "<s>", "</s>"), []string{}, nil),
		"added_tokens": []any{obj{"id": 2, "content": "<s>", "special": true}, obj{"id": 3, "content": "</s>", "special": true}}})
	for _, tc := range []struct {
		cfg  string
		want []int32
	}{
		{``, []int32{0}},
		{`{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "bos_token": "<s>"}`, []int32{2, 0}},
		{`{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_eos_token": true, "eos_token": {"content": "</s>"}}`, []int32{0, 3}},
		{`{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>"}`, []int32{2, 0, 3}},
		{`{"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": true, "bos_token": "<s>"}`, []int32{0}},
		{`{"tokenizer_class": "LlamaTokenizerFast"}`, []int32{2, 0}}, // transformers' defaults: add_bos_token, "<s>"
		{`{"tokenizer_class": "LlamaTokenizer", "add_bos_token": false}`, []int32{0}},
	} {
		var cfg []byte
		if tc.cfg != "" {
			cfg = []byte(tc.cfg)
		}
		tk, err := FromJSON([]byte(f), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.cfg, err)
		}
		if got := tk.Encode("a", true); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v want %v", tc.cfg, got, tc.want)
		}
	}
}

func TestAccessors(t *testing.T) {
	tk := build(t, obj{"model": bpeModel(charVocab("ab"), []string{}, nil),
		"added_tokens": []any{obj{"id": 5, "content": "<x>", "special": true}, obj{"id": 3, "content": "<y>", "special": false}}})
	if got := tk.VocabSize(); got != 6 {
		t.Errorf("VocabSize = %d want 6", got)
	}
	if id, ok := tk.TokenToID("<x>"); !ok || id != 5 {
		t.Errorf("TokenToID(<x>) = %d %v", id, ok)
	}
	if _, ok := tk.IDToToken(4); ok {
		t.Error("IDToToken(4) found a token in a hole")
	}
	if s, ok := tk.IDToToken(1); !ok || s != "b" {
		t.Errorf("IDToToken(1) = %q %v", s, ok)
	}
	if !tk.IsSpecial(5) || tk.IsSpecial(3) || tk.IsSpecial(99) {
		t.Error("IsSpecial wrong")
	}
	if got := tk.Decode([]int32{0, 4, 99, -1, 3, 5}, true); got != "a <y>" {
		t.Errorf("Decode skipping holes and specials = %q", got)
	}
}

// byteLevelTestTokenizer is a small GPT-2-style tokenizer: all 256 byte
// symbols plus a few merges.
func byteLevelTestTokenizer(t *testing.T) *Tokenizer {
	var chars strings.Builder
	for b := 0; b < 256; b++ {
		chars.WriteString(byteToStr[b])
	}
	vocab := charVocab(chars.String(), "Ġt", "he", "Ġthe", "in", "Ġin")
	return build(t, obj{
		"model":         bpeModel(vocab, []string{"Ġ t", "h e", "Ġt he", "i n", "Ġ in"}, nil),
		"pre_tokenizer": obj{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       obj{"type": "ByteLevel"},
	})
}

// TestConcurrentEncode shares one tokenizer (and its word cache) between
// goroutines; run with -race.
func TestConcurrentEncode(t *testing.T) {
	tk := byteLevelTestTokenizer(t)
	texts := []string{"the thin in the inn", " the\n\nthe in", "é in the 😀 the", "inininin the"}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tk.Encode(s, false)
	}
	if got := tokens(tk, want[0]); !reflect.DeepEqual(got, []string{"t", "he", "Ġt", "h", "in", "Ġin", "Ġthe", "Ġin", "n"}) {
		t.Fatalf("byte-level tokens %q", got)
	}
	tk.model.resetCache()
	errs := make(chan string, 8)
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for k := 0; k < 50; k++ {
				i := (g + k) % len(texts)
				if got := tk.Encode(texts[i], false); !reflect.DeepEqual(got, want[i]) {
					errs <- texts[i]
					break
				}
				if d := tk.Decode(want[i], false); d != texts[i] {
					errs <- "decode " + texts[i]
					break
				}
			}
			done <- true
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Errorf("concurrent encode/decode differs: %q", e)
	}
}

// TestDuplicateIDs: a vocabulary giving one id to two strings decodes
// deterministically (the smaller string).
func TestDuplicateIDs(t *testing.T) {
	for i := 0; i < 20; i++ {
		tk := build(t, obj{"model": bpeModel(obj{"b": 0, "a": 0, "c": 1}, []string{}, nil)})
		if got := tk.Decode([]int32{0, 1}, false); got != "a c" {
			t.Fatalf("Decode = %q, want \"a c\"", got)
		}
	}
}

// TestMetaspaceDecoderQuirk: HF drops every U+2581 of the first token, not
// only the leading one (checked against HF tokenizers 0.23.2).
func TestMetaspaceDecoderQuirk(t *testing.T) {
	toks := []string{"▁▁a▁", "▁b"}
	if got := strings.Join(metaspaceDecoder{repl: '▁', scheme: prependAlways}.decode(toks), ""); got != "a b" {
		t.Errorf("always: %q", got)
	}
	if got := strings.Join(metaspaceDecoder{repl: '▁', scheme: prependNever}.decode(toks), ""); got != "  a  b" {
		t.Errorf("never: %q", got)
	}
}
