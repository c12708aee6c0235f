package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/eval"
)

// Data is a prepared token stream and its windows, shared by every model of
// a run.
type Data struct {
	Spec    *DataSpec
	Tokens  []int32
	Windows []backends.Window
	// Info describes the stream and windowing for results; Hash is
	// Info.Hash() (tokens hash, method, ctx, stride, rows).
	Info compare.DataSpec
	Hash string
	// KLMode is "scored" or "compare_q".
	KLMode string
	// Warnings collected while preparing (e.g. fewer windows than max_rows).
	Warnings []string
}

// PrepareOptions locate data and the token cache.
type PrepareOptions struct {
	// CacheDir holds tokenized streams (<CacheDir>/tokens/<key>.i32); ""
	// disables the token cache.
	CacheDir string
	// ResolveDataset finds a local file for a dataset name when the spec
	// has no data_file (for example in the Hugging Face cache); nil means
	// a data_file is required.
	ResolveDataset func(name string) (string, error)
	// Tokenizer, when the spec names none (a token file), is the model
	// directory whose tokenizer.json gives the llamacpp chunk BOS (else its
	// config.json's bos_token_id, Model.BOS), exactly as qppl eval.
	Tokenizer string
	// Model is what the base model's config.json says about token ids
	// (zero Size: unknown, ids not checked here).
	Model eval.Vocabulary
	// Stdin is read for a data file "-" (qppl compare --text -), as a
	// text tokenized as is, like qppl eval --text -.
	Stdin io.Reader
}

// StdinFile is the data file name that reads standard input.
const StdinFile = "-"

// Prepare reads and tokenizes the data of s (once; cached by content) and
// cuts the windows, through eval.Prepare: the same token stream, BOS and
// windows as qppl eval. More max_rows than the stream gives uses every
// window with a warning, as compare_q does.
func Prepare(s *DataSpec, o PrepareOptions) (*Data, error) {
	method, err := compare.ParseMethod(s.Method)
	if err != nil {
		return nil, fmt.Errorf("data spec: %w", err)
	}
	if method == compare.MethodLMEval {
		return nil, errors.New("data spec: method lm-eval is unsupported in compare (it scores documents, not a token stream); use qppl eval --method lm-eval")
	}
	if _, err := dataset.ParseJoinMode(s.Join); err != nil {
		return nil, fmt.Errorf("data spec: %w", err)
	}
	po := eval.PrepareOptions{
		Source:    eval.Source{Tokens: s.TokensFile, DataFile: s.DataFile, Join: s.Join, TextColumn: s.TextColumn, MaxTextRows: s.MaxTextRows},
		Tokenizer: s.TokenizerDir, Model: o.Model,
		Method: method, Ctx: s.EvalLen, Stride: s.EvalStride, Rows: s.MaxRows, AllRowsWhenShort: true,
		AddSpecialTokens: s.AddSpecialTokens, CacheDir: o.CacheDir,
	}
	if s.DataFile == StdinFile {
		if o.Stdin == nil {
			return nil, errors.New("data spec: data_file \"-\" (standard input) is not available here")
		}
		po.Source.DataFile, po.Source.Text, po.Source.TextReader = "", StdinFile, o.Stdin
	}
	if s.TokensFile != "" && po.Tokenizer == "" {
		po.Tokenizer = o.Tokenizer
	}
	if s.TokensFile == "" && s.DataFile == "" {
		if o.ResolveDataset == nil {
			return nil, fmt.Errorf("data spec: dataset %q: set \"data_file\" in the spec (or --data FILE) to a local copy: rows JSONL, HF parquet (test-00000-of-00001.parquet), wiki.test.raw or a text file", s.Dataset)
		}
		if _, ok := datasetAliases[strings.ToLower(s.Dataset)]; !ok {
			return nil, fmt.Errorf("data spec: dataset %q is unsupported without data_file (qppl finds WikiText-2 only)", s.Dataset)
		}
		if po.Source.DataFile, err = o.ResolveDataset(s.Dataset); err != nil {
			return nil, fmt.Errorf("data spec: dataset %q: %w", s.Dataset, err)
		}
	}
	ed, err := eval.Prepare(context.Background(), po)
	if err != nil {
		var de *eval.DataError
		if errors.As(err, &de) || errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("data spec: %w", err)
	}
	d := &Data{Spec: s, KLMode: s.KLMode, Tokens: ed.Tokens, Windows: ed.Windows, Info: ed.Spec, Hash: ed.Hash, Warnings: ed.Warnings}
	if d.KLMode == "" {
		d.KLMode = "scored"
	}
	if s.TokensFile == "" { // compare_q's names for the stream
		if s.Dataset != "" {
			d.Info.Source = s.DisplayName()
		}
		d.Info.Tokenizer = tokenizerFile(s.TokenizerDir)
	}
	return d, nil
}

// tokenizerFile is the tokenizer.json of a directory (or the file given).
func tokenizerFile(p string) string {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return filepath.Join(p, "tokenizer.json")
	}
	return p
}
