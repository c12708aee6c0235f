// Package tokenizer encodes and decodes text exactly as the Hugging Face
// tokenizers library does, from a tokenizer.json file.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package tokenizer

import "errors"

// Tokenizer is a loaded tokenizer.json.
type Tokenizer struct{}

// Load reads a tokenizer.json file, or the tokenizer.json (and
// tokenizer_config.json) of a model directory.
func Load(path string) (*Tokenizer, error) { return nil, errors.New("tokenizer: not implemented yet") }

// Encode returns the ids of text; addSpecial applies the post-processor
// (BOS etc.) as HF's add_special_tokens=True does.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 { return nil }

// Decode turns ids back into text.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string { return "" }

// VocabSize is the number of ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return 0 }
