package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/quant"
	"github.com/qppl/qppl/tokenizer"
)

// evalOptions are the flags of `qppl eval`.
type evalOptions struct {
	Model     string
	Revision  string
	Label     string
	Tokenizer string // --tokenizer: tokenizer.json of a GGUF --model

	Text    string // --text FILE
	Tokens  string // --tokens FILE.i32
	Dataset string // --dataset wikitext2
	Data    string // --data FILE
	Join    string // --join

	Method string
	Ctx    int
	Stride int
	Rows   int
	// CtxFromModel: --ctx was not given for lm-eval, whose window is the
	// model's max_length: config.json's max_position_embeddings.
	CtxFromModel bool

	Backend backendOptions

	JSON      string
	NLLOut    string
	TokensOut string

	SaveLogits   string
	LogitsFormat string // u16 | f32 | f64 | llamacpp
	KLDBase      string
	KLDMode      string // scored | compare_q ("" = from the store, or scored)
	KLDRows      int
	KLDAllPos    bool
	TopK         int

	Bootstrap int
	Seed      uint64

	RunDir string // --run-dir DIR: journal windows, resume
	Shard  string // --shard I/N
}

func newEvalCmd() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "perplexity (and KL divergence against a base) of one model",
		UsageText: "qppl eval --model DIR (--text FILE | --tokens FILE.i32 | --dataset wikitext2 [--data FILE]) [options]",
		Before:    requireFlags("model"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "model directory or Hugging Face hub id (org/name)"},
			&cli.StringFlag{Name: "revision", Usage: "hub revision of --model"},
			&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json (or its directory) of a GGUF --model (default: beside the file); refused when it disagrees with the file's vocabulary"},
			&cli.StringFlag{Name: "label", Usage: "label of the model in results and plots"},
			&cli.StringFlag{Name: "text", Usage: "UTF-8 text file, tokenized with the model's tokenizer.json"},
			&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file, used as is"},
			&cli.StringFlag{Name: "dataset", Usage: "named dataset: wikitext2 (WikiText-2 raw v1 test)"},
			&cli.StringFlag{Name: "data", Usage: "file for --dataset (rows JSONL, parquet, wiki.test.raw or text)"},
			&cli.StringFlag{Name: "join", Usage: "row join for --dataset: compare_q, filtered or llamacpp (default: llamacpp for --method llamacpp, else compare_q)"},
			&cli.StringFlag{Name: "method", Value: "compare_q", Usage: "windowing: compare_q, exl3-ppl, llamacpp, hf-strided or lm-eval"},
			&cli.IntFlag{Name: "ctx", Value: 2048, Usage: "window length in tokens", DefaultText: "2048; lm-eval: the model's max_position_embeddings, as lm-eval's max_length"},
			&cli.IntFlag{Name: "stride", Value: 512, Usage: "window stride (compare_q, hf-strided)"},
			&cli.IntFlag{Name: "rows", Value: 0, Usage: "at most this many windows (lm-eval: documents); 0 = all"},
			&cli.StringFlag{Name: "backend", Value: "reference", Usage: "reference, emu or cuda"},
			&cli.StringFlag{Name: "precision", Usage: "bf16, fp16 or fp32 (emu, cuda)"},
			&cli.StringFlag{Name: "gpus", Usage: "GPU ids, e.g. 0,1 (cuda)"},
			&cli.StringFlag{Name: "gpu-split", Usage: "GB per GPU (cuda)"},
			&cli.StringFlag{Name: "json", Usage: "write the result JSON to this file"},
			&cli.StringFlag{Name: "nll-out", Usage: "write every scored token's NLL (float64 LE, window order)"},
			&cli.StringFlag{Name: "tokens-out", Usage: "per-token dump: FILE.jsonl or FILE.csv (window, position, token, NLL, KLD, top-1 of both)"},
			&cli.StringFlag{Name: "save-logits", Usage: "store this (base) model's log-probs of the KL positions in FILE"},
			&cli.StringFlag{Name: "logits-format", Value: "u16", Usage: "--save-logits encoding: u16 (llama.cpp's 16-bit scheme), f32, f64 (lossless), llamacpp (u16 in llama.cpp's --kl-divergence-base file; method llamacpp)"},
			&cli.StringFlag{Name: "kld-base", Usage: "base log-probs (from --save-logits or llama-perplexity --kl-divergence-base): compute KL divergence and paired statistics"},
			&cli.StringFlag{Name: "kld-mode", Usage: "KL coverage for --save-logits: scored (every scored token, llama.cpp) or compare_q (all positions of the first --kld-rows windows)", DefaultText: "scored"},
			&cli.IntFlag{Name: "kld-rows", Value: compare.DefaultKLRows, Usage: "windows with KL in compare_q mode"},
			&cli.BoolFlag{Name: "kld-all-positions", Usage: "same as --kld-mode compare_q"},
			&cli.IntFlag{Name: "top-k", Value: 5, Usage: "K of the top-K agreement with the base (< 2: off)"},
			&cli.IntFlag{Name: "bootstrap", Value: compare.DefaultBootstrap, Usage: "window-bootstrap resamples for the PPL interval (negative: off)"},
			&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "bootstrap seed"},
			&cli.StringFlag{Name: "run-dir", Usage: "journal every finished window in DIR; the same command resumes an interrupted run (docs/runs.md)"},
			&cli.StringFlag{Name: "shard", Usage: "evaluate only shard I of N (windows with index % N == I) into --run-dir; combine with qppl merge"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("eval: unexpected argument %q", c.Args().First()))
			}
			o := evalOptions{
				Model: c.String("model"), Revision: c.String("revision"), Label: c.String("label"), Tokenizer: c.String("tokenizer"),
				Text: c.String("text"), Tokens: c.String("tokens"), Dataset: c.String("dataset"), Data: c.String("data"), Join: c.String("join"),
				Method: c.String("method"), Ctx: c.Int("ctx"), Stride: c.Int("stride"), Rows: c.Int("rows"),
				Backend: backendOptions{Name: c.String("backend"), Precision: c.String("precision"), GPUs: c.String("gpus"), GPUSplit: c.String("gpu-split"), MaxTokens: c.Int("ctx"), Log: c.App.ErrWriter},
				JSON:    c.String("json"), NLLOut: c.String("nll-out"), TokensOut: c.String("tokens-out"),
				SaveLogits: c.String("save-logits"), LogitsFormat: c.String("logits-format"), KLDBase: c.String("kld-base"),
				KLDMode: c.String("kld-mode"), KLDRows: c.Int("kld-rows"), KLDAllPos: c.Bool("kld-all-positions"), TopK: c.Int("top-k"),
				Bootstrap: c.Int("bootstrap"), Seed: c.Uint64("seed"),
				RunDir: c.String("run-dir"), Shard: c.String("shard"),
			}
			if o.Method == string(compare.MethodLMEval) && !c.IsSet("ctx") {
				o.CtxFromModel = true
			}
			if !c.IsSet("kld-rows") {
				o.KLDRows = 0 // unset: compare_q's 10 when saving, the store's when reading
			}
			return runEval(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// evalData is the token stream of a run and where it came from.
type evalData struct {
	tokens    []int32
	docs      []compare.Document // lm-eval only
	source    string
	join      string
	tokenizer string
	bos       int32 // llamacpp chunk BOS, -1 = none
	prefix    int32 // lm-eval document prefix token
}

// runEval reads top to bottom: model → dataset → tokenizer → windows →
// backend → run → metrics → report.
func runEval(ctx context.Context, o evalOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	method, err := compare.ParseMethod(o.Method)
	if err != nil {
		return usageErr(err)
	}
	if err := o.check(method); err != nil {
		return usageErr(err)
	}
	shard, err := compare.ParseShard(o.Shard)
	if err != nil {
		return usageErr(fmt.Errorf("eval: --%w", err))
	}

	// Model: a directory, hub id or GGUF file (ggufmodel.go).
	m, err := openEvalModel(ctx, o.Model, o.Revision, o.Tokenizer, stderr)
	if err != nil {
		return usageErr(err)
	}
	defer m.Close()
	dir := m.path
	if o.CtxFromModel {
		o.Ctx = m.Config.MaxPositionEmbeddings
		o.Backend.MaxTokens = o.Ctx
	}
	if method == compare.MethodLMEval {
		o.Backend.MaxTokens = o.Ctx + 1 // a window holds its input and the last target
	}
	// An unsupported quantization is an input error, found before anything
	// runs.
	if _, err := quant.ParseJSON(m.Config.QuantizationConfig, m.Config.TorchDtype, filepath.Join(dir, checkpoint.ConfigFile)); err != nil {
		return usageErr(fmt.Errorf("eval: %w", err))
	}

	// Dataset and tokenizer.
	data, err := evalLoadData(ctx, o, method, m.tokDir, m.Config, stderr)
	if err != nil {
		return usageErr(err)
	}
	vocab := m.Config.VocabSize
	if err := evalCheckTokens(data, vocab); err != nil {
		return usageErr(err)
	}

	// Windows.
	var ws []backends.Window
	var words, bytes int64
	if method == compare.MethodLMEval {
		ws, _, err = compare.LMEvalWindows(data.docs, o.Ctx, data.prefix, o.Rows)
		docs := data.docs
		if o.Rows > 0 && o.Rows <= len(docs) {
			docs = docs[:o.Rows]
		}
		for _, d := range docs {
			words += int64(d.Words)
			bytes += int64(d.Bytes)
		}
	} else {
		ws, err = compare.Windows(data.tokens, compare.WindowOptions{Method: method, Ctx: o.Ctx, Stride: o.Stride, Rows: o.Rows, BOS: data.bos})
	}
	if err != nil {
		return usageErr(err)
	}
	spec := compare.DataSpec{
		Source: data.source, Join: data.join, Tokenizer: data.tokenizer, NumTokens: len(data.tokens),
		TokensHash: compare.TokensHash(data.tokens), Method: string(method), Ctx: o.Ctx, Stride: o.Stride, Rows: o.Rows,
		Documents: len(data.docs),
	}
	if !method.UsesStride() {
		spec.Stride = 0
	}
	specHash := spec.Hash()

	// Output files are written after the run: a directory that is not there
	// must not cost the run. (--run-dir is created later, with its parents,
	// which the outputs may share, so only those are taken as existing.)
	if err := checkOutputDirs("eval", map[string]string{"json": o.JSON, "nll-out": o.NLLOut, "tokens-out": o.TokensOut, "save-logits": o.SaveLogits}, o.RunDir); err != nil {
		return usageErr(err)
	}

	// Base log-probs: read (--kld-base) or write (--save-logits).
	var base *compare.Store
	klMode := compare.KLScored
	if o.KLDBase != "" {
		base, err = compare.OpenStore(o.KLDBase)
		if err != nil {
			return usageErr(err)
		}
		defer base.Close()
		if err := base.Check(compare.StoreExpect{DataSpecHash: specHash, Vocab: vocab}); err != nil {
			return usageErr(err)
		}
		klMode = base.KLMode()
		if want := o.klMode(); want != "" && want != klMode {
			return usageErr(fmt.Errorf("--kld-mode %s, but %s holds %s-mode log-probs", want, o.KLDBase, klMode))
		}
		if o.KLDRows > 0 && o.KLDRows != base.Header().KLRows {
			return usageErr(fmt.Errorf("--kld-rows %d, but %s holds %d rows", o.KLDRows, o.KLDBase, base.Header().KLRows))
		}
		for _, w := range ws { // shapes and (llama.cpp file) tokens, before any forward pass
			if _, ok, err := base.Window(w); err != nil {
				return usageErr(err)
			} else if !ok && klMode == compare.KLScored {
				return usageErr(fmt.Errorf("%s holds no base log-probs for window %d: it was made for a different run", o.KLDBase, w.Index))
			}
		}
	}
	var save *compare.StoreWriter
	var modelHash string
	if o.SaveLogits != "" {
		if klMode = o.klMode(); klMode == "" {
			klMode = compare.KLScored
		}
		if klMode == compare.KLCompareQ && (o.LogitsFormat == "" || o.LogitsFormat == string(compare.EncodingU16)) {
			fmt.Fprintf(stderr, "qppl: warning: --logits-format u16 drops base log-probs below -16 nats from the KL (llama.cpp's scheme); compare_q's KL is full-vocabulary: use --logits-format f32 to match it\n")
		}
		save, modelHash, err = evalCreateStore(o, dir, klMode, ws, data.tokens, spec, specHash, vocab)
		if err != nil {
			return err
		}
		defer save.Abort()
	}

	// Backend.
	be, err := m.openBackend(o.Backend)
	if err != nil {
		return err
	}
	defer be.Close()
	info := be.Info()

	// Identity: everything that decides the result but the windows' scores.
	id := &runIdentity{
		Version: identityVersion, Command: "eval",
		Model: o.Model, ModelHash: modelHash, Label: o.Label, Backend: info.Name, Precision: info.Precision,
		Data: spec, DataSpecHash: specHash, Windows: len(ws),
		KLMode: string(klMode), TopK: o.TopK, Words: words, Bytes: bytes, Bootstrap: o.Bootstrap, Seed: o.Seed,
	}
	if o.Shard != "" {
		id.Shard = fmt.Sprintf("%d/%d", shard.I, shard.N)
	}
	if rep, err := m.inspect(); err != nil {
		fmt.Fprintf(stderr, "qppl: warning: bits per weight not available: %v\n", err)
	} else {
		id.BPWLayer, id.BPWHead, id.VRAMGB, id.Format = rep.BPWLayer, rep.BPWHead, rep.VRAMGB, rep.Format
	}
	if base != nil {
		h := base.Header()
		id.KLBaseFormat = string(h.Encoding)
		if h.Container == compare.ContainerLlamaCpp {
			id.KLBaseFormat = "llamacpp-u16"
		}
		id.KLBaseKey = h.Key()
	}

	// Run directory: journal, resume.
	var rd *runDir
	if o.RunDir != "" {
		if id.ModelHash == "" {
			if id.ModelHash, err = compare.ModelHash(dir); err != nil {
				return err
			}
		}
		if rd, err = openRunDir(o.RunDir, id, ws); err != nil {
			return err
		}
		defer rd.close()
	}
	total := 0
	for _, w := range ws {
		if shard.Has(w.Index) {
			total++
		}
	}
	var done []compare.WindowResult
	if rd != nil {
		done = rd.done
		if len(done) > 0 {
			fmt.Fprintf(stderr, "qppl: resuming from %s: %d of %d windows already done\n", journalPath(o.RunDir), len(done), total)
		}
	}

	// Run.
	start := time.Now()
	runner := &compare.Runner{
		Backend: be, Windows: ws, Base: base, Save: save, TopK: o.TopK, Top1: o.TokensOut != "" || rd != nil,
		Progress: &compare.Progress{W: stderr},
		Skip:     compare.SkipFunc(done, shard),
	}
	if rd != nil {
		runner.OnWindow = rd.append
	}
	fresh, err := runner.Run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return &interruptedError{err: err, runDir: o.RunDir, done: len(done) + len(fresh), total: total}
		}
		return err
	}
	elapsed := time.Since(start)
	results := append(slices.Clip(done), fresh...)
	if o.Shard != "" {
		fmt.Fprintf(stdout, "shard %s: %d windows done (%d this time) in %s\n", id.Shard, len(results), len(fresh), journalPath(o.RunDir))
		fmt.Fprintf(stdout, "when all %d shards are done: qppl merge DIR... --json FILE\n", shard.N)
		return nil
	}

	// Metrics.
	res, err := reduceRun(results, id)
	if err != nil {
		return err
	}
	var fwd int64
	for _, w := range ws {
		if !runner.Skip(w.Index) {
			fwd += int64(len(w.Tokens))
		}
	}
	res.Timing = &compare.Timing{Seconds: elapsed.Seconds(), TokensPerSec: float64(fwd) / elapsed.Seconds()}

	// Report: files first (each atomic), then the summary.
	if save != nil {
		if err := save.Close(); err != nil {
			return err
		}
		if fi, err := os.Stat(o.SaveLogits); err == nil {
			fmt.Fprintf(stderr, "qppl: wrote base log-probs %s (%s, %s mode, vocab %d): %d bytes (%.1f MB)\n",
				o.SaveLogits, o.LogitsFormat, klMode, vocab, fi.Size(), float64(fi.Size())/1e6)
		}
	}
	if o.JSON != "" {
		if err := writeResultJSON(o.JSON, &res); err != nil {
			return err
		}
	}
	if o.NLLOut != "" {
		if err := compare.WriteNLL(o.NLLOut, results); err != nil {
			return err
		}
	}
	if o.TokensOut != "" {
		if err := compare.WriteTokens(o.TokensOut, ws, results); err != nil {
			return err
		}
	}
	return compare.WriteSummary(stdout, &res)
}

// check validates flag combinations before anything is read.
func (o *evalOptions) check(method compare.Method) error {
	n := 0
	for _, s := range []string{o.Text, o.Tokens, o.Dataset} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("eval: give exactly one of --text FILE, --tokens FILE.i32 or --dataset wikitext2")
	}
	if o.Dataset != "" && o.Dataset != "wikitext2" {
		return fmt.Errorf("eval: unknown --dataset %q (want wikitext2)", o.Dataset)
	}
	if o.Data != "" && o.Dataset == "" {
		return errors.New("eval: --data goes with --dataset wikitext2")
	}
	if method == compare.MethodLMEval && o.Dataset == "" {
		return errors.New("eval: --method lm-eval needs --dataset wikitext2 (it scores whole articles)")
	}
	if o.Ctx < 2 {
		return fmt.Errorf("eval: --ctx %d: need at least 2", o.Ctx)
	}
	if method.UsesStride() && o.Stride < 1 {
		return fmt.Errorf("eval: --stride %d: must be >= 1", o.Stride)
	}
	if o.Rows < 0 {
		return fmt.Errorf("eval: --rows %d: must be >= 0 (0 = all)", o.Rows)
	}
	if o.Shard != "" && o.RunDir == "" {
		return errors.New("eval: --shard needs --run-dir DIR (the shard's windows are journaled there and combined by qppl merge)")
	}
	if o.Shard != "" && (o.JSON != "" || o.NLLOut != "" || o.TokensOut != "") {
		return errors.New("eval: a shard holds only part of the windows: write --json/--nll-out with qppl merge DIR... once every shard is done")
	}
	if o.RunDir != "" && o.SaveLogits != "" {
		return errors.New("eval: --save-logits runs cannot be resumed: run the base model without --run-dir")
	}
	if o.SaveLogits != "" && o.KLDBase != "" {
		return errors.New("eval: --save-logits (base run) and --kld-base (quantized run) exclude each other")
	}
	if o.KLDMode != "" && o.KLDMode != string(compare.KLScored) && o.KLDMode != string(compare.KLCompareQ) {
		return fmt.Errorf("eval: unknown --kld-mode %q (want scored or compare_q)", o.KLDMode)
	}
	if o.KLDAllPos && o.KLDMode == string(compare.KLScored) {
		return errors.New("eval: --kld-all-positions contradicts --kld-mode scored")
	}
	if err := checkBackendName(o.Backend.Name); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if o.TokensOut != "" {
		if ext := strings.ToLower(filepath.Ext(o.TokensOut)); ext != ".jsonl" && ext != ".csv" {
			return fmt.Errorf("eval: --tokens-out %s: want a .jsonl or .csv file name", o.TokensOut)
		}
	}
	return nil
}

// klMode is the KL mode asked for on the command line ("" = not given).
func (o *evalOptions) klMode() compare.KLMode {
	if o.KLDAllPos {
		return compare.KLCompareQ
	}
	return compare.KLMode(o.KLDMode)
}

// evalLoadData reads the token stream (and lm-eval documents): --tokens
// as is; --text and --dataset tokenized with the model's tokenizer.json,
// with special tokens exactly when the method's reference adds them.
func evalLoadData(ctx context.Context, o evalOptions, method compare.Method, dir string, cfg *checkpoint.Config, stderr io.Writer) (*evalData, error) {
	d := &evalData{bos: -1, prefix: -1}
	var tok *tokenizer.Tokenizer
	if o.Text != "" || o.Dataset != "" {
		var err error
		if tok, err = tokenizer.Load(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("eval: %s has no tokenizer.json to tokenize the text with: add the model's tokenizer.json, or tokenize elsewhere and pass --tokens FILE.i32", dir)
			}
			return nil, fmt.Errorf("eval: %w", err)
		}
		d.tokenizer = dir
	} else if t, err := tokenizer.Load(dir); err == nil {
		tok = t // only for the BOS id
	}
	if tok != nil {
		if tv := tok.VocabSize(); tv > cfg.VocabSize {
			return nil, fmt.Errorf("eval: %s has %d token ids but config.json's vocab_size is %d: the tokenizer does not belong to this model", filepath.Join(dir, "tokenizer.json"), tv, cfg.VocabSize)
		}
		if b, ok := tok.BOS(); ok {
			d.bos = b
		}
	}
	if d.bos < 0 && cfg.BOSTokenID >= 0 && tok == nil {
		d.bos = int32(cfg.BOSTokenID)
	}
	switch {
	case o.Tokens != "":
		ids, err := dataset.ReadTokens(o.Tokens)
		if err != nil {
			return nil, err
		}
		d.tokens, d.source = ids, o.Tokens
	case o.Text != "":
		b, err := os.ReadFile(o.Text)
		if err != nil {
			return nil, fmt.Errorf("eval: --text: %w", err)
		}
		if err := dataset.CheckUTF8(o.Text, b); err != nil {
			return nil, fmt.Errorf("eval: --text: %w", err)
		}
		text := string(b)
		if method == compare.MethodLlamaCpp {
			// llama-perplexity -f drops one trailing "\n" (common/arg.cpp).
			text = strings.TrimSuffix(text, "\n")
		}
		d.tokens, d.source = tok.Encode(text, method.AddSpecialTokens()), o.Text
	default:
		r, err := hub.ResolveWikiText(ctx, hub.WikiTextOptions{Data: o.Data, Progress: stderr})
		if err != nil {
			return nil, err
		}
		corpus, err := dataset.LoadAll(r.Paths, dataset.LoadOptions{})
		if err != nil {
			return nil, err
		}
		d.source = "wikitext2:" + strings.Join(r.Paths, ",")
		if method == compare.MethodLMEval {
			d.join = "documents"
			d.prefix = d.bos
			if d.prefix < 0 {
				if cfg.EOSTokenID < 0 {
					return nil, fmt.Errorf("eval: lm-eval needs a BOS or EOS token as document prefix; %s has neither", dir)
				}
				d.prefix = int32(cfg.EOSTokenID)
			}
			for _, doc := range corpus.Documents() {
				ids := tok.Encode(doc.Detokenized, false)
				d.docs = append(d.docs, compare.Document{Tokens: ids, Words: doc.Words, Bytes: doc.Bytes})
				d.tokens = append(d.tokens, ids...)
			}
			return d, nil
		}
		join := o.Join
		if join == "" && method == compare.MethodLlamaCpp {
			join = string(dataset.JoinLlamaCpp)
		}
		jm, err := dataset.ParseJoinMode(join)
		if err != nil {
			return nil, err
		}
		text, err := corpus.Text(jm)
		if err != nil {
			return nil, err
		}
		d.join = string(jm)
		d.tokens = tok.Encode(text, method.AddSpecialTokens())
	}
	return d, nil
}

// evalCheckTokens rejects ids outside the model's vocabulary.
func evalCheckTokens(d *evalData, vocab int) error {
	for i, t := range d.tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("eval: %s: token %d (position %d) is outside the model's vocabulary [0, %d)", d.source, t, i, vocab)
		}
	}
	for _, t := range []int32{d.bos, d.prefix} {
		if int(t) >= vocab {
			return fmt.Errorf("eval: special token %d is outside the model's vocabulary [0, %d)", t, vocab)
		}
	}
	return nil
}

// evalCreateStore opens the --save-logits store, keyed by the data spec
// and the model files.
func evalCreateStore(o evalOptions, dir string, mode compare.KLMode, ws []backends.Window, tokens []int32, spec compare.DataSpec, specHash string, vocab int) (*compare.StoreWriter, string, error) {
	container, enc := compare.ContainerQPPL, compare.Encoding(o.LogitsFormat)
	if o.LogitsFormat == "llamacpp" {
		container, enc = compare.ContainerLlamaCpp, compare.EncodingU16
	} else if _, err := compare.ParseEncoding(o.LogitsFormat); err != nil {
		return nil, "", usageErr(err)
	}
	klRows := 0
	if mode == compare.KLCompareQ {
		klRows = o.KLDRows
		if klRows == 0 {
			klRows = min(compare.DefaultKLRows, len(ws))
		}
	}
	layout, err := compare.StoreLayout(ws, mode, klRows)
	if err != nil {
		return nil, "", usageErr(err)
	}
	modelHash, err := compare.ModelHash(dir)
	if err != nil {
		return nil, "", err
	}
	h := compare.StoreHeader{
		Container: container, Encoding: enc, Vocab: vocab, KLMode: mode, KLRows: klRows,
		DataSpecHash: specHash, ModelHash: modelHash, TokensHash: spec.TokensHash,
		Method: spec.Method, Ctx: spec.Ctx, Stride: spec.Stride, Rows: spec.Rows, Windows: layout,
	}
	s, err := compare.CreateStore(o.SaveLogits, h, tokens)
	if err != nil {
		return nil, "", usageErr(err)
	}
	return s, modelHash, nil
}

// reduceRun reduces window results and fills the result's descriptive
// fields from the run identity. eval and merge both end here, so a merged
// run writes exactly what the unsharded run writes.
func reduceRun(results []compare.WindowResult, id *runIdentity) (compare.Result, error) {
	res, err := compare.Reduce(results, compare.ReduceOptions{
		Method: compare.Method(id.Data.Method), Words: id.Words, Bytes: id.Bytes, KLMode: id.KLMode, TopK: id.TopK,
		Bootstrap: id.Bootstrap, Seed: id.Seed, Ctx: id.Data.Ctx, Stride: id.Data.Stride,
	})
	if err != nil {
		return res, err
	}
	res.Label, res.Model, res.ModelHash = id.Label, id.Model, id.ModelHash
	res.Backend, res.Precision = id.Backend, id.Precision
	res.Method, res.Ctx, res.Stride, res.Rows = id.Data.Method, id.Data.Ctx, id.Data.Stride, id.Data.Rows
	res.Data, res.DataSpecHash, res.TokensHash = id.Data, id.DataSpecHash, id.Data.TokensHash
	res.BPWLayer, res.BPWHead, res.VRAMGB, res.Format = id.BPWLayer, id.BPWHead, id.VRAMGB, id.Format
	if res.KLD != nil && id.KLBaseKey != "" {
		res.KLD.BaseFormat = id.KLBaseFormat
		res.KLD.BaseKey = id.KLBaseKey
	}
	return res, nil
}

// writeResultJSON writes one result as indented JSON, atomically.
func writeResultJSON(path string, res *compare.Result) error {
	return compare.WriteFileAtomic(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	})
}
