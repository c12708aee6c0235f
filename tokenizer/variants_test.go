package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// hfVariants is testdata/hf_variants.json: edits of the shared
// tokenizer.json files exercising options the real files do not use
// (Metaspace schemes, lstrip/rstrip/single_word/normalized added tokens,
// Split behaviors with invert, Whitespace, Punctuation, NFKC/NFD,
// Lowercase, Strip, Replace, RobertaProcessing, unk without byte
// fallback, decoders), with the outputs of the HF tokenizers library.
type hfVariants struct {
	Variants []struct {
		Name      string                     `json:"name"`
		Base      string                     `json:"base"`
		Replace   map[string]json.RawMessage `json:"replace"`
		Model     map[string]json.RawMessage `json:"model"`
		AddTokens []json.RawMessage          `json:"add_tokens"`
		Cases     []struct {
			In          string  `json:"in"`
			IDs         []int32 `json:"ids"`
			Special     []int32 `json:"special"`
			Decoded     string  `json:"decoded"`
			DecodedSkip string  `json:"decodedSkip"`
		} `json:"cases"`
	} `json:"variants"`
}

func TestHFVariants(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hf_variants.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc hfVariants
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Variants) < 10 {
		t.Fatalf("only %d variants", len(doc.Variants))
	}
	for _, v := range doc.Variants {
		t.Run(v.Name, func(t *testing.T) {
			var file map[string]json.RawMessage
			if err := json.Unmarshal(readShared(t, "tokenizers", v.Base, "tokenizer.json"), &file); err != nil {
				t.Fatal(err)
			}
			for k, r := range v.Replace {
				file[k] = r
			}
			if len(v.Model) > 0 {
				var model map[string]json.RawMessage
				if err := json.Unmarshal(file["model"], &model); err != nil {
					t.Fatal(err)
				}
				for k, r := range v.Model {
					model[k] = r
				}
				file["model"], _ = json.Marshal(model)
			}
			if len(v.AddTokens) > 0 {
				var added []json.RawMessage
				if err := json.Unmarshal(file["added_tokens"], &added); err != nil {
					t.Fatal(err)
				}
				file["added_tokens"], _ = json.Marshal(append(added, v.AddTokens...))
			}
			js, _ := json.Marshal(file)
			tk, err := FromJSON(js, nil)
			if err != nil {
				t.Fatal(err)
			}
			nonNil := func(x []int32) []int32 {
				if x == nil {
					return []int32{}
				}
				return x
			}
			for _, c := range v.Cases {
				if got := nonNil(tk.Encode(c.In, false)); !reflect.DeepEqual(got, nonNil(c.IDs)) {
					t.Errorf("%q: got %v %q, want %v %q", c.In, got, tokens(tk, got), c.IDs, tokens(tk, c.IDs))
				}
				if got := nonNil(tk.Encode(c.In, true)); !reflect.DeepEqual(got, nonNil(c.Special)) {
					t.Errorf("%q with special tokens: got %v, want %v", c.In, got, c.Special)
				}
				if got := tk.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
				}
				if got := tk.Decode(c.Special, true); got != c.DecodedSkip {
					t.Errorf("Decode(%v, skip) = %q, want %q", c.Special, got, c.DecodedSkip)
				}
			}
		})
	}
}
