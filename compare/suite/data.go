package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/qppl/qppl/tokenizer"
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
}

// compareQRowsKL is compare_q's KL coverage: rows 0..9.
const compareQRowsKL = 10

// Prepare reads and tokenizes the data of s (once; cached by content) and
// cuts the windows.
func Prepare(s *DataSpec, o PrepareOptions) (*Data, error) {
	method, err := compare.ParseMethod(s.Method)
	if err != nil {
		return nil, fmt.Errorf("data spec: %w", err)
	}
	if method == compare.MethodLMEval {
		return nil, errors.New("data spec: method lm-eval is unsupported in compare (it scores documents, not a token stream); use qppl eval --method lm-eval")
	}
	d := &Data{Spec: s, KLMode: s.KLMode}
	if d.KLMode == "" {
		d.KLMode = "scored"
	}
	addSpecial := method.AddSpecialTokens()
	if s.AddSpecialTokens != nil {
		addSpecial = *s.AddSpecialTokens
	}
	bos := int32(-1)
	join, err := dataset.ParseJoinMode(s.Join)
	if err != nil {
		return nil, fmt.Errorf("data spec: %w", err)
	}
	if s.Join == "" && method == compare.MethodLlamaCpp {
		join = dataset.JoinLlamaCpp
	}
	switch {
	case s.TokensFile != "":
		ids, err := dataset.ReadTokens(s.TokensFile)
		if err != nil {
			return nil, err
		}
		d.Tokens = ids
		d.Info.Source = s.TokensFile
		if method == compare.MethodLlamaCpp && s.TokenizerDir != "" {
			tok, err := tokenizer.Load(s.TokenizerDir)
			if err != nil {
				return nil, err
			}
			if b, ok := tok.BOS(); ok {
				bos = b
			}
		}
	default:
		file := s.DataFile
		if file == "" {
			if o.ResolveDataset == nil {
				return nil, fmt.Errorf("data spec: dataset %q: set \"data_file\" in the spec (or --data FILE) to a local copy: rows JSONL, HF parquet (test-00000-of-00001.parquet), wiki.test.raw or a text file", s.Dataset)
			}
			if _, ok := datasetAliases[strings.ToLower(s.Dataset)]; !ok {
				return nil, fmt.Errorf("data spec: dataset %q is unsupported without data_file (qppl finds WikiText-2 only)", s.Dataset)
			}
			file, err = o.ResolveDataset(s.Dataset)
			if err != nil {
				return nil, fmt.Errorf("data spec: dataset %q: %w", s.Dataset, err)
			}
		}
		tokFile := s.TokenizerDir
		if st, err := os.Stat(tokFile); err == nil && st.IsDir() {
			tokFile = filepath.Join(tokFile, "tokenizer.json")
		}
		key, err := tokenCacheKey(s, file, tokFile, join, addSpecial)
		if err != nil {
			return nil, err
		}
		var cached string
		if o.CacheDir != "" {
			cached = filepath.Join(o.CacheDir, "tokens", key+".i32")
			if ids, err := dataset.ReadTokens(cached); err == nil {
				d.Tokens = ids
			}
		}
		tok, err := tokenizer.Load(s.TokenizerDir)
		if err != nil {
			return nil, err
		}
		if b, ok := tok.BOS(); ok {
			bos = b
		}
		if d.Tokens == nil {
			corpus, err := dataset.Load(file, dataset.LoadOptions{Column: s.TextColumn})
			if err != nil {
				return nil, err
			}
			if s.MaxTextRows > 0 && corpus.Rows != nil && len(corpus.Rows) > s.MaxTextRows {
				corpus.Rows = corpus.Rows[:s.MaxTextRows]
				corpus.Raw = ""
				if corpus.Kind == dataset.KindRaw {
					corpus.Kind = dataset.KindJSONL
				}
			}
			text, err := corpus.Text(join)
			if err != nil {
				return nil, err
			}
			d.Tokens = tok.Encode(text, addSpecial)
			if cached != "" {
				if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
					return nil, fmt.Errorf("token cache: %w", err)
				}
				if err := dataset.WriteTokens(cached, d.Tokens); err != nil {
					return nil, fmt.Errorf("token cache: %w", err)
				}
			}
		}
		d.Info.Source = file
		if s.Dataset != "" {
			d.Info.Source = s.DisplayName()
		}
		d.Info.Join = string(join)
		d.Info.Tokenizer = tokFile
	}

	// compare_q: range(0, n - eval_len, eval_stride), break at max_rows.
	all, err := compare.Windows(d.Tokens, compare.WindowOptions{Method: method, Ctx: s.EvalLen, Stride: s.EvalStride, BOS: bos})
	if err != nil {
		return nil, fmt.Errorf("data spec: %w", err)
	}
	if s.MaxRows > 0 && len(all) > s.MaxRows {
		all = all[:s.MaxRows]
	} else if s.MaxRows > len(all) {
		d.Warnings = append(d.Warnings, fmt.Sprintf("max_rows %d: the token stream (%d tokens) gives only %d windows; using all of them, as compare_q does", s.MaxRows, len(d.Tokens), len(all)))
	}
	d.Windows = all
	d.Info.NumTokens = len(d.Tokens)
	d.Info.TokensHash = compare.TokensHash(d.Tokens)
	d.Info.Method = string(method)
	d.Info.Ctx = s.EvalLen
	d.Info.Stride = s.EvalStride
	if !method.UsesStride() {
		d.Info.Stride = 0
	}
	d.Info.Rows = s.MaxRows
	d.Hash = d.Info.Hash()
	return d, nil
}

// tokenCacheKey identifies a tokenized stream by everything it depends on:
// the data file's and tokenizer files' contents and the options.
func tokenCacheKey(s *DataSpec, dataFile, tokFile string, join dataset.JoinMode, addSpecial bool) (string, error) {
	dh, err := fileHash(dataFile)
	if err != nil {
		return "", fmt.Errorf("data file: %w", err)
	}
	th, err := fileHash(tokFile)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	ch, err := fileHash(filepath.Join(filepath.Dir(tokFile), "tokenizer_config.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("tokenizer config: %w", err)
	}
	b, _ := json.Marshal(map[string]any{
		"v": 1, "data": dh, "tokenizer": th, "tokenizer_config": ch, "join": join,
		"add_special": addSpecial, "max_text_rows": s.MaxTextRows, "text_column": s.TextColumn,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// fileHash is the hex sha256 of a file's content.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
