package eval

import (
	"context"
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

// Source is where a token stream comes from: exactly one of Text, Tokens,
// Dataset or DataFile.
type Source struct {
	// Text is a UTF-8 text file, tokenized as is (qppl eval --text); with
	// TextReader set, the text is read from it and Text only names it.
	Text       string
	TextReader io.Reader
	// Tokens is an int32 little-endian token file, used as is.
	Tokens string
	// Dataset names a dataset ("wikitext2"); its files come from
	// PrepareOptions.ResolveDataset. lm-eval's documents need one.
	Dataset string
	// DataFile is a local dataset file whose format is detected: rows
	// JSONL, parquet, arrow, wiki.test.raw or plain text.
	DataFile string
	// Join joins the rows of a dataset ("" = compare_q, or llamacpp for the
	// llamacpp method); TextColumn and MaxTextRows select them (compare_q's
	// text_column, max_text_rows).
	Join        string
	TextColumn  string
	MaxTextRows int
}

// Vocabulary is what a model's config.json says about token ids: Size (0 =
// unknown: ids are not range-checked) and the BOS and EOS ids (-1 = none).
type Vocabulary struct {
	Size     int
	BOS, EOS int
	// Dir is the model directory: its config.json and generation_config.json
	// are checked against the tokenizer (tokenizer.CheckModel: id range,
	// BOS/EOS/PAD ids). "" checks the id range only.
	Dir string
}

// PrepareOptions say how to turn a Source into windows.
type PrepareOptions struct {
	Source Source
	// Tokenizer is the directory holding tokenizer.json (or the file). A
	// Text or dataset source needs it; with Tokens it only supplies the
	// BOS id (absent: the model's bos_token_id).
	Tokenizer string
	// TokenizerJSON, when set, is the tokenizer.json to use (with
	// TokenizerConfig as its tokenizer_config.json), built elsewhere (from
	// a GGUF file's metadata); Tokenizer then only names where it came
	// from, and the token cache keys on these bytes.
	TokenizerJSON, TokenizerConfig []byte
	Model                          Vocabulary

	Method compare.Method
	Ctx    int
	Stride int
	Rows   int // at most this many windows (lm-eval: documents); 0 = all
	// AllRowsWhenShort: Rows beyond what the stream gives uses every window
	// with a warning (compare_q's max_rows) instead of an error.
	AllRowsWhenShort bool
	// AddSpecialTokens overrides the method's default (compare_q's data
	// spec field add_special_tokens).
	AddSpecialTokens *bool

	// CacheDir, when set, caches the tokenized stream of a single dataset
	// file under CacheDir/tokens, keyed by content.
	CacheDir string
	// ResolveDataset returns the local files of Source.Dataset.
	ResolveDataset func(ctx context.Context, name string) ([]string, error)
}

// Data is a prepared token stream and its windows.
type Data struct {
	Tokens    []int32
	Documents []compare.Document // lm-eval only
	Windows   []backends.Window
	// Spec describes the stream and windowing in results; Hash is
	// Spec.Hash() (tokens hash, method, ctx, stride, rows).
	Spec compare.DataSpec
	Hash string
	// BOS is the id that replaces the first token of each llamacpp chunk,
	// Prefix the lm-eval document prefix (-1 = none).
	BOS, Prefix int32
	// Words and Bytes count the original text of the lm-eval documents
	// evaluated (word and byte perplexity).
	Words, Bytes int64
	// Warnings collected while preparing (e.g. fewer windows than rows).
	Warnings []string
}

// DataError is an error Prepare itself finds in the data: a tokenizer that
// is missing, malformed or of another model, a text file that cannot be
// read, an id outside the vocabulary. (Errors of packages dataset and hub
// pass through as they are: they name their package.) A command prefixes
// it with its name.
type DataError struct{ Err error }

func (e *DataError) Error() string { return e.Err.Error() }
func (e *DataError) Unwrap() error { return e.Err }

func dataErr(err error) error {
	if err == nil {
		return nil
	}
	return &DataError{err}
}

// Prepare reads the data source, joins and tokenizes it (with the
// method's special tokens; llama.cpp's trailing-newline trim; BOS from the
// tokenizer, else the model's bos_token_id), checks the ids against the
// model's vocabulary, cuts the windows and hashes the data spec. Errors
// Prepare finds in the data are *DataError; errors cutting windows name
// the offending option.
func Prepare(ctx context.Context, o PrepareOptions) (*Data, error) {
	d, err := load(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := cut(d, o); err != nil {
		return nil, err
	}
	return d, nil
}

// load fills the tokens (and lm-eval documents), BOS and the descriptive
// fields of the data spec.
func load(ctx context.Context, o PrepareOptions) (*Data, error) {
	s, method := o.Source, o.Method
	d := &Data{BOS: -1, Prefix: -1}
	needTok := s.Tokens == ""
	var tok *tokenizer.Tokenizer
	var err error
	if len(o.TokenizerJSON) > 0 {
		if tok, err = tokenizer.FromJSON(o.TokenizerJSON, o.TokenizerConfig); err != nil {
			err = fmt.Errorf("%s: the tokenizer rebuilt from its metadata: %w", o.Tokenizer, err)
		}
	} else {
		tok, err = loadTokenizer(o.Tokenizer, needTok)
	}
	if err != nil {
		return nil, dataErr(err)
	}
	if tok != nil {
		if needTok {
			d.Spec.Tokenizer = o.Tokenizer
		}
		if o.Model.Dir != "" && o.Model.Size > 0 {
			if err := tok.CheckModel(o.Tokenizer, o.Model.Dir, o.Model.Size); err != nil {
				return nil, dataErr(err)
			}
		} else if tv := tok.VocabSize(); o.Model.Size > 0 && tv > o.Model.Size {
			return nil, dataErr(fmt.Errorf("%s has %d token ids but config.json's vocab_size is %d: the tokenizer does not belong to this model", tokenizerFile(o.Tokenizer), tv, o.Model.Size))
		}
		if b, ok := tok.BOS(); ok {
			d.BOS = b
		}
	} else if o.Model.BOS >= 0 {
		d.BOS = int32(o.Model.BOS)
	}
	addSpecial := method.AddSpecialTokens()
	if o.AddSpecialTokens != nil {
		addSpecial = *o.AddSpecialTokens
	}
	switch {
	case s.Tokens != "":
		ids, err := dataset.ReadTokens(s.Tokens)
		if err != nil {
			return nil, err
		}
		d.Tokens, d.Spec.Source = ids, s.Tokens
	case s.Text != "":
		var b []byte
		if s.TextReader != nil {
			b, err = io.ReadAll(s.TextReader)
		} else {
			b, err = os.ReadFile(s.Text)
		}
		if err != nil {
			return nil, dataErr(fmt.Errorf("--text: %w", err))
		}
		if err := dataset.CheckUTF8(s.Text, b); err != nil {
			return nil, dataErr(fmt.Errorf("--text: %w", err))
		}
		text := string(b)
		if method == compare.MethodLlamaCpp {
			text = dataset.LlamaCppPrompt(text) // llama-perplexity -f drops one trailing "\n"
		}
		d.Tokens, d.Spec.Source = tok.Encode(text, addSpecial), s.Text
	default:
		files := []string{s.DataFile}
		if s.DataFile == "" {
			if o.ResolveDataset == nil {
				return nil, fmt.Errorf("dataset %q: no local file given", s.Dataset)
			}
			if files, err = o.ResolveDataset(ctx, s.Dataset); err != nil {
				return nil, err
			}
			d.Spec.Source = s.Dataset + ":" + strings.Join(files, ",")
		} else {
			d.Spec.Source = s.DataFile
		}
		if method == compare.MethodLMEval {
			return d, loadDocuments(d, files, tok, o)
		}
		join, err := dataset.ParseJoinMode(s.Join)
		if err != nil {
			return nil, err
		}
		if s.Join == "" && method == compare.MethodLlamaCpp {
			join = dataset.JoinLlamaCpp
		}
		d.Spec.Join = string(join)
		var cached string
		if o.CacheDir != "" && len(files) == 1 {
			key, err := tokenCacheKey(s, files[0], tokenizerFile(o.Tokenizer), o.TokenizerJSON, o.TokenizerConfig, join, addSpecial)
			if err != nil {
				return nil, err
			}
			cached = filepath.Join(o.CacheDir, "tokens", key+".i32")
			if ids, err := dataset.ReadTokens(cached); err == nil {
				d.Tokens = ids
				break
			}
		}
		text, err := readCorpus(files, s, join, method)
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
	return d, checkTokens(d, o.Model.Size)
}

// readCorpus loads dataset files and joins their rows.
func readCorpus(files []string, s Source, join dataset.JoinMode, method compare.Method) (string, error) {
	corpus, err := dataset.LoadAll(files, dataset.LoadOptions{Column: s.TextColumn})
	if err != nil {
		return "", err
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
		return "", err
	}
	if corpus.Kind == dataset.KindText && method == compare.MethodLlamaCpp && join != dataset.JoinLlamaCpp {
		// A plain text file is what llama-perplexity -f reads, whatever
		// the row join: it drops one trailing "\n" (as for Source.Text).
		text = dataset.LlamaCppPrompt(text)
	}
	return text, nil
}

// loadDocuments reads lm-eval's documents: each article detokenized and
// tokenized without special tokens, prefixed by BOS (else EOS).
func loadDocuments(d *Data, files []string, tok *tokenizer.Tokenizer, o PrepareOptions) error {
	corpus, err := dataset.LoadAll(files, dataset.LoadOptions{Column: o.Source.TextColumn})
	if err != nil {
		return err
	}
	d.Spec.Join = "documents"
	d.Prefix = d.BOS
	if d.Prefix < 0 {
		if o.Model.EOS < 0 {
			return dataErr(fmt.Errorf("lm-eval needs a BOS or EOS token as document prefix; %s has neither", o.Tokenizer))
		}
		d.Prefix = int32(o.Model.EOS)
	}
	for _, doc := range corpus.Documents() {
		ids := tok.Encode(doc.Detokenized, false)
		d.Documents = append(d.Documents, compare.Document{Tokens: ids, Words: doc.Words, Bytes: doc.Bytes})
		d.Tokens = append(d.Tokens, ids...)
	}
	return checkTokens(d, o.Model.Size)
}

// loadTokenizer loads tokenizer.json from dir (a directory or the file).
// Without need, a missing file is no error (nil tokenizer).
func loadTokenizer(dir string, need bool) (*tokenizer.Tokenizer, error) {
	if dir == "" {
		if need {
			return nil, errors.New("no tokenizer to tokenize the text with")
		}
		return nil, nil
	}
	tok, err := tokenizer.Load(dir)
	if err == nil {
		return tok, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if !need {
			return nil, nil
		}
		return nil, fmt.Errorf("%s has no tokenizer.json to tokenize the text with: add the model's tokenizer.json, or tokenize elsewhere and pass --tokens FILE.i32", dir)
	}
	return nil, err
}

// tokenizerFile is the tokenizer.json of a directory (or the file given).
func tokenizerFile(p string) string {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return filepath.Join(p, "tokenizer.json")
	}
	return p
}

// checkTokens rejects ids outside the model's vocabulary [0, vocab).
func checkTokens(d *Data, vocab int) error {
	if vocab <= 0 {
		return nil
	}
	for i, t := range d.Tokens {
		if t < 0 || int(t) >= vocab {
			return dataErr(fmt.Errorf("%s: token %d (position %d) is outside the model's vocabulary [0, %d)", d.Spec.Source, t, i, vocab))
		}
	}
	for _, t := range []int32{d.BOS, d.Prefix} {
		if int(t) >= vocab {
			return dataErr(fmt.Errorf("special token %d is outside the model's vocabulary [0, %d)", t, vocab))
		}
	}
	return nil
}

// cut cuts the windows and completes the data spec.
func cut(d *Data, o PrepareOptions) error {
	method := o.Method
	var err error
	switch {
	case method == compare.MethodLMEval:
		d.Windows, _, err = compare.LMEvalWindows(d.Documents, o.Ctx, d.Prefix, o.Rows)
		docs := d.Documents
		if o.Rows > 0 && o.Rows <= len(docs) {
			docs = docs[:o.Rows]
		}
		for _, doc := range docs {
			d.Words += int64(doc.Words)
			d.Bytes += int64(doc.Bytes)
		}
	case o.AllRowsWhenShort:
		// compare_q: range(0, n - eval_len, eval_stride), break at max_rows.
		d.Windows, err = compare.Windows(d.Tokens, compare.WindowOptions{Method: method, Ctx: o.Ctx, Stride: o.Stride, BOS: d.BOS})
		if err == nil && o.Rows > 0 && len(d.Windows) > o.Rows {
			d.Windows = d.Windows[:o.Rows]
		} else if err == nil && o.Rows > len(d.Windows) {
			d.Warnings = append(d.Warnings, fmt.Sprintf("max_rows %d: the token stream (%d tokens) gives only %d windows; using all of them, as compare_q does", o.Rows, len(d.Tokens), len(d.Windows)))
		}
	default:
		d.Windows, err = compare.Windows(d.Tokens, compare.WindowOptions{Method: method, Ctx: o.Ctx, Stride: o.Stride, Rows: o.Rows, BOS: d.BOS})
	}
	if err != nil {
		return err
	}
	d.Spec.NumTokens = len(d.Tokens)
	d.Spec.TokensHash = compare.TokensHash(d.Tokens)
	d.Spec.Method, d.Spec.Ctx, d.Spec.Stride, d.Spec.Rows = string(method), o.Ctx, o.Stride, o.Rows
	d.Spec.Documents = len(d.Documents)
	if !method.UsesStride() {
		d.Spec.Stride = 0
	}
	d.Hash = d.Spec.Hash()
	return nil
}

// tokenCacheKey identifies a tokenized stream by everything it depends on:
// the data file's and tokenizer files' contents and the options.
func tokenCacheKey(s Source, dataFile, tokFile string, tokJSON, tokConfig []byte, join dataset.JoinMode, addSpecial bool) (string, error) {
	dh, err := fileHash(dataFile)
	if err != nil {
		return "", fmt.Errorf("data file: %w", err)
	}
	var th, ch string
	if len(tokJSON) > 0 {
		t, c := sha256.Sum256(tokJSON), sha256.Sum256(tokConfig)
		th, ch = hex.EncodeToString(t[:]), hex.EncodeToString(c[:])
	} else {
		if th, err = fileHash(tokFile); err != nil {
			return "", fmt.Errorf("tokenizer: %w", err)
		}
		ch, err = fileHash(filepath.Join(filepath.Dir(tokFile), "tokenizer_config.json"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("tokenizer config: %w", err)
		}
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
