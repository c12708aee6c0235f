package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrModelMismatch: a tokenizer whose id range or special token ids
// disagree with the model's config.json or generation_config.json, so that
// its ids would be scored by a model they do not belong to.
var ErrModelMismatch = errors.New("tokenizer does not match the model")

// CheckModel checks the tokenizer loaded from tokDir (a model directory or
// a tokenizer.json path, as for Load) against the model directory
// modelDir, whose config.json declares vocab token ids:
//
//   - every tokenizer id must be below vocab;
//   - BOS (the token the post-processor prepends, else tokenizer_config's
//     bos_token), EOS (eos_token: one of the model's eos_token_id when that
//     is a list) and PAD (pad_token) must equal the ids config.json and,
//     when present, generation_config.json give for them, where both sides
//     define one;
//   - the model's BOS and EOS ids must be tokens of the tokenizer;
//   - a tokenizer with fewer ids than vocab (padded vocabularies are
//     common) must share at least one special id with the model, as
//     evidence that they belong together.
//
// Errors wrap ErrModelMismatch and name both values and both files.
func (t *Tokenizer) CheckModel(tokDir, modelDir string, vocab int) error {
	tokFile := tokDir
	if st, err := os.Stat(tokDir); err == nil && st.IsDir() {
		tokFile = filepath.Join(tokDir, "tokenizer.json")
	}
	tokCfgFile := filepath.Join(filepath.Dir(tokFile), "tokenizer_config.json")
	cfgFile := filepath.Join(modelDir, "config.json")
	n := t.VocabSize()
	if n > vocab {
		return mismatchf("%s has %d token ids but config.json's vocab_size is %d: the tokenizer does not belong to this model", tokFile, n, vocab)
	}

	// The tokenizer's side.
	type tokSide struct {
		id   int32
		what string // e.g. `tokenizer_config.json bos_token "<s>"`
	}
	side := map[string]*tokSide{}
	if b, ok := t.BOS(); ok {
		side["bos"] = &tokSide{b, fmt.Sprintf("%s's post-processor BOS %q", tokFile, t.idToTok[b])}
	}
	if data, err := readBounded(tokCfgFile); err == nil {
		var c map[string]json.RawMessage
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("tokenizer %s: %w", tokCfgFile, err)
		}
		for _, k := range []string{"bos", "eos", "pad"} {
			raw, ok := c[k+"_token"]
			if !ok || side[k] != nil {
				continue
			}
			s, err := tokenContent(raw)
			if err != nil || s == "" {
				continue
			}
			if id, ok := t.TokenToID(s); ok {
				side[k] = &tokSide{id, fmt.Sprintf("%s %s_token %q", tokCfgFile, k, s)}
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tokenizer: %w", err)
	}

	// The model's side: config.json, then generation_config.json.
	agreed := false
	for _, file := range []string{cfgFile, filepath.Join(modelDir, "generation_config.json")} {
		ids, err := readSpecialIDs(file)
		if errors.Is(err, fs.ErrNotExist) && file != cfgFile {
			continue
		}
		if err != nil {
			return err
		}
		for _, k := range []string{"bos", "eos", "pad"} {
			want := ids[k]
			if len(want) == 0 {
				continue
			}
			key := fmt.Sprintf("%s %s_token_id %s", file, k, formatIDs(want))
			if got := side[k]; got != nil {
				if !slices.Contains(want, int64(got.id)) {
					return mismatchf("%s is id %d, but %s: the tokenizer does not belong to this model", got.what, got.id, key)
				}
				agreed = true
			}
			for _, id := range want {
				if k != "pad" && (id >= int64(n) || !t.present[id]) {
					return mismatchf("%s is not a token of %s (%d ids): the tokenizer does not belong to this model", key, tokFile, n)
				}
			}
		}
	}
	if n < vocab && !agreed {
		return mismatchf("%s has %d token ids, fewer than %s's vocab_size %d, and no BOS/EOS/PAD id in common with it to show that they belong together", tokFile, n, cfgFile, vocab)
	}
	return nil
}

// readSpecialIDs reads bos_token_id, eos_token_id (an integer or a list)
// and pad_token_id of a config.json or generation_config.json; null or
// absent keys are left out.
func readSpecialIDs(file string) (map[string][]int64, error) {
	data, err := readBounded(file)
	if err != nil {
		return nil, err
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := map[string][]int64{}
	for _, k := range []string{"bos", "eos", "pad"} {
		raw := bytes.TrimSpace(c[k+"_token_id"])
		if isNull(raw) {
			continue
		}
		var ids []int64
		if raw[0] == '[' {
			if err := json.Unmarshal(raw, &ids); err != nil {
				return nil, fmt.Errorf("%s: %s_token_id: want an integer or a list of integers, got %s", file, k, raw)
			}
		} else {
			var id int64
			if err := json.Unmarshal(raw, &id); err != nil {
				return nil, fmt.Errorf("%s: %s_token_id: want an integer, got %s", file, k, raw)
			}
			ids = []int64{id}
		}
		for _, id := range ids {
			if id < 0 {
				return nil, fmt.Errorf("%s: %s_token_id %d is negative", file, k, id)
			}
		}
		if len(ids) > 0 {
			out[k] = ids
		}
	}
	return out, nil
}

func formatIDs(ids []int64) string {
	if len(ids) == 1 {
		return fmt.Sprint(ids[0])
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// mismatchError is an error of CheckModel: its own message, wrapping
// ErrModelMismatch.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }
func (e *mismatchError) Unwrap() error { return ErrModelMismatch }

func mismatchf(format string, a ...any) error {
	return &mismatchError{fmt.Sprintf(format, a...)}
}
