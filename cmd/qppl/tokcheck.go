package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/tokenizer"
)

// checkTokenizerModels refuses, before anything runs, a tokenizer whose id
// range or special ids disagree with a model's config.json or
// generation_config.json (tokenizer.CheckModel), or whose vocabulary
// disagrees with a GGUF model's tokenizer.ggml.tokens. A model directory that
// cannot be read is left to the evaluation, which names its own error.
func checkTokenizerModels(tokDir string, models []suite.ModelSpec) error {
	if tokDir == "" {
		return nil
	}
	if _, err := os.Stat(tokDir); errors.Is(err, fs.ErrNotExist) {
		return nil // runCompare's model-directory check (or data preparation) names it, before any work
	}
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		return err
	}
	for _, m := range models {
		if isGGUFPath(m.ModelDir) { // its tokenizer.ggml.tokens against the tokenizer
			if err := checkGGUFVocab(m.ModelDir, tokDir, tok); err != nil {
				return fmt.Errorf("%s: %w", m.Source, err)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(m.ModelDir, checkpoint.ConfigFile)); errors.Is(err, fs.ErrNotExist) {
			continue // the evaluation names the missing file
		}
		cfg, err := arch.LoadConfig(m.ModelDir)
		if err != nil {
			return err
		}
		if err := tok.CheckModel(tokDir, m.ModelDir, cfg.VocabSize); err != nil {
			return fmt.Errorf("%s: %w", m.Source, err)
		}
	}
	return nil
}

// checkGGUFVocab checks the GGUF file's vocabulary against the tokenizer; a
// file that cannot be opened is left to the evaluation, which names it.
func checkGGUFVocab(path, tokDir string, tok *tokenizer.Tokenizer) error {
	g, err := gguf.OpenModel(path, ggufOptions())
	if err != nil {
		return nil
	}
	defer g.Close()
	return g.CheckVocab(tokDir, tok.VocabSize(), tok.IDToToken)
}
