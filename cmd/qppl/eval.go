package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/eval"
)

// evalOptions are the flags of `qppl eval`.
type evalOptions struct {
	Model    string
	Revision string
	Label    string

	Text      string    // --text FILE
	Tokenizer string    // --tokenizer (default: the model directory's, or tokenizer.json beside a GGUF file)
	Stdin     io.Reader // read for --text -
	Tokens    string    // --tokens FILE.i32
	Dataset   string    // --dataset wikitext2
	Data      string    // --data FILE
	Join      string    // --join

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

	AllowGaps bool // --allow-gaps: a stride larger than ctx
	// given holds the flags set on the command line, for the flags a
	// method or backend would ignore (usage errors, never dropped).
	given map[string]bool
}

func newEvalCmd() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "perplexity (and KL divergence against a base) of one model",
		UsageText: "qppl eval --model DIR (--text FILE | --tokens FILE.i32 | --dataset wikitext2 [--data FILE]) [options]",
		Before:    requireFlags("model"),
		Flags:     append(evalFlags(), backendFlags(backendFlagSet{name: true, kv: true})...),
		Action: func(c *cli.Context) error {
			o, err := evalOptionsFrom(c)
			if err != nil {
				return err
			}
			return runEval(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// evalFlags are the flags of `qppl eval` but the shared backend flags.
func evalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "model directory, GGUF file or Hugging Face hub id (org/name)"},
		&cli.StringFlag{Name: "revision", Usage: "hub revision of --model"},
		&cli.StringFlag{Name: "label", Usage: "label of the model in results and plots"},
		&cli.StringFlag{Name: "text", Usage: "UTF-8 text file, tokenized with the model's tokenizer.json"},
		&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or its directory (as compare's --tokenizer); for a GGUF --model, refused when it disagrees with the file's vocabulary", DefaultText: "the model's; tokenizer.json beside a GGUF file"},
		&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file, used as is"},
		&cli.StringFlag{Name: "dataset", Usage: "named dataset: wikitext2 (WikiText-2 raw v1 test)"},
		&cli.StringFlag{Name: "data", Usage: "file for --dataset (rows JSONL, parquet, wiki.test.raw or text)"},
		&cli.StringFlag{Name: "join", Usage: "row join for --dataset: compare_q, filtered or llamacpp (default: llamacpp for --method llamacpp, else compare_q)"},
		&cli.StringFlag{Name: "method", Value: "compare_q", Usage: "windowing: compare_q, exl3-ppl, llamacpp, hf-strided or lm-eval"},
		&cli.IntFlag{Name: "ctx", Value: 2048, Usage: "window length in tokens", DefaultText: "2048; lm-eval: the model's max_position_embeddings, as lm-eval's max_length"},
		&cli.IntFlag{Name: "stride", Usage: "window stride (compare_q, hf-strided)", DefaultText: "ctx/4"},
		allowGapsFlag,
		&cli.IntFlag{Name: "rows", Value: 0, Usage: "at most this many windows (lm-eval: documents); 0 = all"},
		&cli.StringFlag{Name: "json", Usage: "write the result JSON to this file"},
		&cli.StringFlag{Name: "nll-out", Usage: "write every scored token's NLL (float64 LE, window order)"},
		&cli.StringFlag{Name: "tokens-out", Usage: "per-token dump: FILE.jsonl or FILE.csv (window, position, token, NLL, KLD, top-1 of both)"},
		&cli.StringFlag{Name: "save-logits", Usage: "store this (base) model's log-probs of the KL positions in FILE"},
		&cli.StringFlag{Name: "logits-format", Value: string(compare.DefaultEncoding), Usage: "--save-logits encoding: f32 (lossless to float32; as compare), f64 (exact), u16 (llama.cpp's 16-bit scheme: KL ignores base log-probs <= -16), llamacpp (u16 in llama.cpp's --kl-divergence-base file; method llamacpp). Every figure but KLD uses the base run's exact NLL whatever the encoding"},
		&cli.StringFlag{Name: "kld-base", Usage: "base log-probs (from --save-logits or llama-perplexity --kl-divergence-base): compute KL divergence and paired statistics"},
		&cli.StringFlag{Name: "kld-mode", Usage: "KL coverage for --save-logits: scored (every scored token, llama.cpp) or compare_q (all positions of the first --kld-rows windows)", DefaultText: "scored"},
		&cli.IntFlag{Name: "kld-rows", Value: compare.DefaultKLRows, Usage: "windows with KL in compare_q mode"},
		&cli.BoolFlag{Name: "kld-all-positions", Usage: "same as --kld-mode compare_q (kept for old scripts)", Hidden: true},
		&cli.IntFlag{Name: "top-k", Value: 5, Usage: "K of the top-K agreement with the base (< 2: off)"},
		&cli.IntFlag{Name: "bootstrap", Value: compare.DefaultBootstrap, Usage: fmt.Sprintf("window-bootstrap resamples for the 95%% PPL interval: 0 = off, else %d to %d", compare.MinBootstrap, compare.MaxBootstrap)},
		&cli.Uint64Flag{Name: "bootstrap-seed", Value: 0, Usage: "seed of the window-bootstrap resampling"},
		&cli.Uint64Flag{Name: "seed", Usage: "old name of --bootstrap-seed", Hidden: true},
		&cli.StringFlag{Name: "run-dir", Usage: "journal every finished window in DIR; the same command resumes an interrupted run (docs/runs.md)"},
		&cli.StringFlag{Name: "shard", Usage: "evaluate only shard I of N (windows with index % N == I) into --run-dir; combine with qppl merge; auto: from a Slurm job array or a Kubernetes Indexed Job (docs/runs.md)"},
		&cli.IntFlag{Name: "shards", Usage: "number of shards for --shard auto in a Kubernetes Indexed Job (its completions)"},
	}
}

// evalOptionsFrom reads the flags of `qppl eval`.
func evalOptionsFrom(c *cli.Context) (evalOptions, error) {
	if c.NArg() > 0 {
		return evalOptions{}, usageErr(fmt.Errorf("eval: unexpected argument %q", c.Args().First()))
	}
	if err := adoptOldNames(c, "eval", renamedFlag{name: "bootstrap-seed", old: "seed"}); err != nil {
		return evalOptions{}, err
	}
	o := evalOptions{
		Model: c.String("model"), Revision: c.String("revision"), Label: c.String("label"),
		Text: c.String("text"), Tokenizer: c.String("tokenizer"), Tokens: c.String("tokens"), Dataset: c.String("dataset"), Data: c.String("data"), Join: c.String("join"),
		Method: c.String("method"), Ctx: c.Int("ctx"), Stride: c.Int("stride"), Rows: c.Int("rows"),
		Backend: backendFromFlags(c, c.Int("ctx")),
		JSON:    c.String("json"), NLLOut: c.String("nll-out"), TokensOut: c.String("tokens-out"),
		SaveLogits: c.String("save-logits"), LogitsFormat: c.String("logits-format"), KLDBase: c.String("kld-base"),
		KLDMode: c.String("kld-mode"), KLDRows: c.Int("kld-rows"), KLDAllPos: c.Bool("kld-all-positions"), TopK: c.Int("top-k"),
		Bootstrap: c.Int("bootstrap"), Seed: c.Uint64("bootstrap-seed"),
		RunDir: c.String("run-dir"), Shard: c.String("shard"),
	}
	if o.Method == string(compare.MethodLMEval) && !c.IsSet("ctx") {
		o.CtxFromModel = true
	}
	o.AllowGaps = c.Bool("allow-gaps")
	o.Stdin = c.App.Reader
	shard, err := resolveShard(o.Shard, c.Int("shards"), os.Getenv)
	if err != nil {
		return o, usageErr(fmt.Errorf("eval: %w", err))
	}
	o.Shard = shard
	o.given = map[string]bool{}
	for _, f := range []string{"stride", "join", "logits-format", "kld-mode", "kld-rows", "kld-all-positions"} {
		o.given[f] = c.IsSet(f)
	}
	if !c.IsSet("kld-rows") {
		o.KLDRows = 0 // unset: compare_q's 10 when saving, the store's when reading
	}
	return o, nil
}

// runEval reads top to bottom: model → data (eval.Prepare) → base
// log-probs → backend → identity and run directory → eval.Evaluate →
// report.
func runEval(ctx context.Context, o evalOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	method, shard, err := o.check()
	if err != nil {
		return usageErr(err)
	}
	m, err := openEvalModel(ctx, o.Model, o.Revision, o.Tokenizer, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	dir := m.path // the model directory, or the .gguf file
	o.fitWindow(method, m.Config)
	if err := checkLongContext(o.Ctx, m.Config, stderr); err != nil {
		return usageErr(fmt.Errorf("eval: %s: %w", dir, err))
	}
	kvState, kvScheme, err := kvCacheState(m.ckpt, o.Backend.KVCacheQuant)
	if err != nil {
		return err
	}
	po, err := m.withTokenizer(o.prepareOptions(method, m.tokDir, m.configDir(), m.Config, stderr))
	if err != nil {
		return err
	}
	data, err := eval.Prepare(ctx, po)
	if err != nil {
		return usageErr(prefixDataError("eval", err))
	}
	// Output files are written after the run: a directory that is not there
	// must not cost the run. (--run-dir is created later, with its parents,
	// which the outputs may share, so only those are taken as existing.)
	if err := checkOutputDirs("eval", map[string]string{"json": o.JSON, "nll-out": o.NLLOut, "tokens-out": o.TokensOut, "save-logits": o.SaveLogits}, o.RunDir); err != nil {
		return usageErr(err)
	}
	base, klMode, err := o.openBase(data, m.Config.VocabSize)
	if err != nil {
		return err
	}
	if base != nil {
		defer base.Close()
	}
	// The model files' hash identifies the model in the result, the base
	// store and the run directory (its path is information only). It is
	// computed while the backend loads the weights (a load is mostly
	// single-threaded), and while the model runs when nothing needs it
	// before the result.
	modelHash := hashInBackground(dir)
	defer modelHash()
	var save *compare.StoreWriter
	if o.SaveLogits != "" {
		h, err := modelHash()
		if err != nil {
			return err
		}
		if save, err = o.createStore(h, klMode, data, m.Config.VocabSize, stderr); err != nil {
			return err
		}
		defer save.Abort()
	}
	usage := m.trackUsage() // the backend refuses unused tensors unless allowed: then they are recorded
	be, err := m.openBackend(o.Backend)
	usage.Stop()
	if err != nil {
		return err
	}
	defer be.Close()
	// Without a run directory or a base store the hash is needed only by
	// the result: it goes on while the model runs (the result waits).
	var hash string
	lateHash := modelHash
	if o.RunDir != "" || save != nil {
		if hash, err = modelHash(); err != nil {
			return err
		}
		lateHash = nil
	}
	id := o.identity(m, be.Info(), data, klMode, hash, shard, base, stderr)
	id.KVCacheQuant, id.KVCacheScheme = kvState, kvScheme
	id.IgnoredTensors = m.ignoredTensors()
	for _, g := range id.IgnoredTensors { // a vision tower: not evaluated, on purpose
		fmt.Fprintf(stderr, "qppl: ignored: %s %d tensors (%s*)\n", g.What, g.Tensors, g.Prefix)
	}
	if o.Backend.AllowUnused {
		id.AllowUnusedTensors, id.UnusedTensors = true, m.withoutIgnored(usage.Unused())
		if len(id.UnusedTensors) > 0 {
			fmt.Fprintf(stderr, "qppl: warning: --allow-unused-tensors: %d tensor(s) of %s are not used: %s\n", len(id.UnusedTensors), dir, strings.Join(id.UnusedTensors, ", "))
		}
	}
	var rd *eval.RunDir
	if o.RunDir != "" {
		if rd, err = openEvalRunDir(o.RunDir, id, data.Windows, stderr); err != nil {
			return err
		}
		defer rd.Close()
	}
	out, err := eval.Evaluate(ctx, be, eval.Options{
		Windows: data.Windows, Identity: id, Base: base, Save: save, TopK: o.TopK, Top1: o.TokensOut != "" || rd != nil,
		Shard: shard, RunDir: rd, Progress: stderr, ProgressHeader: progressHeader(data, dir, id), ModelHash: lateHash,
	})
	if err != nil {
		return err
	}
	if o.Shard != "" {
		fmt.Fprintf(stdout, "shard %s: %d windows done (%d this time) in %s\n", id.Shard, len(out.Windows), out.Fresh, journalPath(o.RunDir))
		fmt.Fprintf(stdout, "when all %d shards are done: qppl merge DIR... --json FILE\n", shard.N)
		return nil
	}
	return o.report(out, data, klMode, m.Config.VocabSize, stdout, stderr)
}

// hashInBackground starts compare.ModelHash(dir) on its own goroutine and
// returns a function that waits for its result (callable any number of
// times; the caller defers one call so that the goroutine never outlives
// it).
func hashInBackground(dir string) func() (string, error) {
	var h string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		h, err = compare.ModelHash(dir)
	}()
	return func() (string, error) {
		<-done
		return h, err
	}
}

// writeResultTo writes one result as indented JSON, atomically, or to
// stdout for --json -.
func writeResultTo(path string, stdout io.Writer, res *compare.Result) error {
	return writeOutput(path, stdout, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	})
}

// progressHeader says what a long run is evaluating, before its first
// progress line.
func progressHeader(data *eval.Data, dir string, id *eval.Identity) string {
	h := fmt.Sprintf("data: %s, %d tokens (sha256 %.12s), %d windows of %d (method %s), %d scored tokens\n",
		data.Spec.Source, data.Spec.NumTokens, data.Spec.TokensHash, len(data.Windows), data.Spec.Ctx, data.Spec.Method, compare.ScoredTokens(data.Windows))
	format := id.Format
	if format == "" {
		format = "bits per weight unknown"
	}
	return h + fmt.Sprintf("model: %s (%s; backend %s %s)", dir, format, id.Backend, id.Precision)
}

// fitWindow sets the window length lm-eval takes from the model
// (max_position_embeddings, as lm-eval's max_length) and the backend's
// maximum window.
func (o *evalOptions) fitWindow(method compare.Method, cfg *checkpoint.Config) {
	if o.CtxFromModel {
		o.Ctx = cfg.MaxPositionEmbeddings
		o.Backend.MaxTokens = o.Ctx
	}
	if method == compare.MethodLMEval {
		o.Backend.MaxTokens = o.Ctx + 1 // a window holds its input and the last target
	}
}

// checkLongContext refuses windows longer than the positions a RoPE
// scaling reaches (max_position_embeddings, or original_max_position_embeddings
// × factor for llama3, max_position_embeddings × factor for linear, when
// larger) and warns when they are longer than max_position_embeddings
// without a scaling: positions beyond it were never trained.
func checkLongContext(ctx int, cfg *checkpoint.Config, stderr io.Writer) error {
	n := cfg.MaxPositionEmbeddings
	if n <= 0 || ctx <= n {
		return nil
	}
	if rs := cfg.RopeScaling; rs != nil {
		reach := float64(n) * rs.Factor
		if rs.Type == "llama3" {
			reach = max(float64(n), float64(rs.OriginalMaxPositionEmbeddings)*rs.Factor)
		}
		if float64(ctx) > reach {
			return fmt.Errorf("--ctx %d is longer than the model's max_position_embeddings %d, and its rope_scaling (%s, factor %g) does not extend it that far (%d positions): use a --ctx of at most %d",
				ctx, n, rs.Type, rs.Factor, int(reach), int(reach))
		}
		fmt.Fprintf(stderr, "qppl: warning: --ctx %d is longer than the model's max_position_embeddings %d: only its rope_scaling (%s, factor %g) reaches that far\n", ctx, n, rs.Type, rs.Factor)
		return nil
	}
	fmt.Fprintf(stderr, "qppl: warning: --ctx %d is longer than the model's max_position_embeddings %d: positions beyond it were never trained\n", ctx, n)
	return nil
}

// prefixDataError names the command in the errors eval.Prepare finds in
// the data itself.
func prefixDataError(cmd string, err error) error {
	var de *eval.DataError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return err
}

// prepareOptions maps the data flags onto eval.Prepare: --tokens as is;
// --text and --dataset tokenized with the model's tokenizer.json.
//
// tokDir is where the model's tokenizer.json is looked for, cfgDir the
// directory of its config.json and generation_config.json ("" for a GGUF
// file).
func (o *evalOptions) prepareOptions(method compare.Method, tokDir, cfgDir string, cfg *checkpoint.Config, stderr io.Writer) eval.PrepareOptions {
	tok := o.Tokenizer
	if tok == "" {
		tok = tokDir
	}
	return eval.PrepareOptions{
		Source:    eval.Source{Text: o.Text, TextReader: o.stdinFor(o.Text), Tokens: o.Tokens, Dataset: o.Dataset, Join: o.Join},
		Tokenizer: tok,
		Model:     modelVocabulary(cfg, cfgDir),
		Method:    method, Ctx: o.Ctx, Stride: o.Stride, Rows: o.Rows,
		ResolveDataset: func(ctx context.Context, _ string) ([]string, error) {
			r, err := hub.ResolveWikiText(ctx, hub.WikiTextOptions{Data: o.Data, Progress: stderr})
			return r.Paths, err
		},
	}
}

// stdinFor returns the command's standard input for the file name "-".
func (o *evalOptions) stdinFor(name string) io.Reader {
	if name == stdoutPath {
		return o.Stdin
	}
	return nil
}

// modelVocabulary is what eval.Prepare needs of config.json.
func modelVocabulary(cfg *checkpoint.Config, dir string) eval.Vocabulary {
	return eval.Vocabulary{Size: cfg.VocabSize, BOS: cfg.BOSTokenID, EOS: cfg.EOSTokenID, Dir: dir}
}

// openBase opens --kld-base and checks it against the run before any
// forward pass; it returns the KL mode of the run.
func (o *evalOptions) openBase(data *eval.Data, vocab int) (*compare.Store, compare.KLMode, error) {
	if o.KLDBase == "" {
		mode := o.klMode() // --save-logits: the mode asked for
		if mode == "" || o.SaveLogits == "" {
			mode = compare.KLScored
		}
		return nil, mode, nil
	}
	base, err := compare.OpenStore(o.KLDBase)
	if err != nil {
		return nil, "", usageErr(err)
	}
	fail := func(err error) (*compare.Store, compare.KLMode, error) {
		base.Close()
		return nil, "", usageErr(err)
	}
	if err := base.Check(compare.StoreExpect{DataSpecHash: data.Hash, Vocab: vocab}); err != nil {
		return fail(err)
	}
	mode := base.KLMode()
	if want := o.klMode(); want != "" && want != mode {
		return fail(fmt.Errorf("--kld-mode %s, but %s holds %s-mode log-probs", want, o.KLDBase, mode))
	}
	if o.KLDRows > 0 && o.KLDRows != base.Header().KLRows {
		return fail(fmt.Errorf("--kld-rows %d, but %s holds %d rows", o.KLDRows, o.KLDBase, base.Header().KLRows))
	}
	for _, w := range data.Windows { // shapes and (llama.cpp file) tokens, before any forward pass
		if _, ok, err := base.Window(w); err != nil {
			return fail(err)
		} else if !ok && mode == compare.KLScored {
			return fail(fmt.Errorf("%s holds no base log-probs for window %d: it was made for a different run", o.KLDBase, w.Index))
		}
	}
	return base, mode, nil
}

// identity is everything that decides this run's result but the windows'
// scores (the journal header of --run-dir).
func (o *evalOptions) identity(m *evalModel, info backends.Info, data *eval.Data, klMode compare.KLMode, modelHash string, shard compare.Shard, base *compare.Store, stderr io.Writer) *eval.Identity {
	id := &eval.Identity{
		Version: eval.IdentityVersion, Command: "eval",
		Model: o.Model, ModelHash: modelHash, Label: o.Label, Backend: info.Name, Precision: info.Precision,
		Data: data.Spec, DataSpecHash: data.Hash, Windows: len(data.Windows),
		KLMode: string(klMode), TopK: o.TopK, Words: data.Words, Bytes: data.Bytes, Bootstrap: o.Bootstrap, Seed: o.Seed,
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
		id.KLBaseFormat, id.KLBaseKey = eval.BaseDescription(base.Header())
	}
	return id
}

// openEvalRunDir opens --run-dir and says how much of the run is already
// done.
func openEvalRunDir(dir string, id *eval.Identity, ws []backends.Window, stderr io.Writer) (*eval.RunDir, error) {
	rd, err := eval.OpenRunDir(dir, id, ws)
	if err != nil {
		return nil, err
	}
	if n := len(rd.Done); n > 0 {
		shard, _ := compare.ParseShard(id.Shard)
		total := 0
		for _, w := range ws {
			if shard.Has(w.Index) {
				total++
			}
		}
		fmt.Fprintf(stderr, "qppl: resuming from %s: %d of %d windows already done\n", journalPath(dir), n, total)
	}
	return rd, nil
}

// report writes the output files (each atomic), then the summary; the
// summary is printed even when a file cannot be written, so the result of
// the run is never lost.
func (o *evalOptions) report(out *eval.Outcome, data *eval.Data, klMode compare.KLMode, vocab int, stdout, stderr io.Writer) error {
	summary := summaryWriter(stdout, stderr, o.JSON)
	if err := o.writeFiles(out, data, klMode, vocab, stdout, stderr); err != nil {
		if serr := compare.WriteSummary(summary, &out.Result); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	return compare.WriteSummary(summary, &out.Result)
}

// writeFiles writes --json, --nll-out and --tokens-out.
func (o *evalOptions) writeFiles(out *eval.Outcome, data *eval.Data, klMode compare.KLMode, vocab int, stdout, stderr io.Writer) error {
	if o.SaveLogits != "" {
		if fi, err := os.Stat(o.SaveLogits); err == nil {
			fmt.Fprintf(stderr, "qppl: wrote base log-probs %s (%s, %s mode, vocab %d): %d bytes (%.1f MB)\n",
				o.SaveLogits, o.LogitsFormat, klMode, vocab, fi.Size(), float64(fi.Size())/1e6)
		}
	}
	if o.JSON != "" {
		if err := writeResultTo(o.JSON, stdout, &out.Result); err != nil {
			return err
		}
	}
	if o.NLLOut != "" {
		if err := compare.WriteNLL(o.NLLOut, out.Windows); err != nil {
			return err
		}
	}
	if o.TokensOut != "" {
		if err := compare.WriteTokens(o.TokensOut, data.Windows, out.Windows); err != nil {
			return err
		}
	}
	return nil
}

// check validates flag combinations before anything is read.
func (o *evalOptions) check() (compare.Method, compare.Shard, error) {
	method, err := compare.ParseMethod(o.Method)
	if err != nil {
		return "", compare.Shard{}, err
	}
	if err := o.checkFlags(method); err != nil {
		return "", compare.Shard{}, err
	}
	shard, err := compare.ParseShard(o.Shard)
	if err != nil {
		return "", compare.Shard{}, fmt.Errorf("eval: --%w", err)
	}
	return method, shard, nil
}

// checkFlags validates the flag combinations of method.
func (o *evalOptions) checkFlags(method compare.Method) error {
	n := 0
	for _, s := range []string{o.Text, o.Tokens, o.Dataset} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("eval: give exactly one of --text FILE, --tokens FILE.i32 or --dataset wikitext2")
	}
	if err := compare.CheckBootstrap(o.Bootstrap); err != nil {
		return fmt.Errorf("eval: %w", err)
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
	if o.Stride == 0 && !o.given["stride"] {
		o.Stride = defaultStride(o.Ctx)
	}
	if method.UsesStride() && o.Stride < 1 {
		return fmt.Errorf("eval: --stride %d: must be >= 1", o.Stride)
	}
	if err := o.checkIgnored(method); err != nil {
		return err
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
	if o.SaveLogits != "" && o.LogitsFormat != "llamacpp" {
		if _, err := compare.ParseEncoding(o.LogitsFormat); err != nil {
			return err
		}
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

// checkIgnored refuses the flags the chosen data, method or backend would
// ignore: a silently dropped flag is a wrong number with exit 0.
func (o *evalOptions) checkIgnored(method compare.Method) error {
	if err := checkStrideUsed("eval", method, o.given["stride"]); err != nil {
		return err
	}
	if !o.CtxFromModel {
		if err := checkGaps("eval", method, o.Ctx, o.Stride, o.AllowGaps); err != nil {
			return err
		}
	}
	if o.given["join"] && o.Dataset == "" {
		return errors.New("eval: --join joins the rows of --dataset; --text and --tokens are read as they are")
	}
	if o.given["join"] && method == compare.MethodLMEval {
		return errors.New("eval: --join: method lm-eval scores whole articles, it joins no rows")
	}
	if o.given["logits-format"] && o.SaveLogits == "" {
		return errors.New("eval: --logits-format is the encoding of --save-logits, which is not given")
	}
	for _, f := range []string{"kld-mode", "kld-rows", "kld-all-positions"} {
		if o.given[f] && o.SaveLogits == "" && o.KLDBase == "" {
			return fmt.Errorf("eval: --%s goes with --save-logits (or --kld-base, which it is checked against)", f)
		}
	}
	if err := o.Backend.checkDevices(); err != nil {
		return fmt.Errorf("eval: %w", err)
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

// createStore opens the --save-logits store, keyed by the data spec and
// the model files; it returns the model files' hash.
func (o *evalOptions) createStore(modelHash string, mode compare.KLMode, data *eval.Data, vocab int, stderr io.Writer) (*compare.StoreWriter, error) {
	if mode == compare.KLCompareQ && (o.LogitsFormat == "" || o.LogitsFormat == string(compare.EncodingU16)) {
		fmt.Fprintf(stderr, "qppl: warning: --logits-format u16 drops base log-probs below -16 nats from the KL (llama.cpp's scheme); compare_q's KL is full-vocabulary: use --logits-format f32 to match it\n")
	}
	bs := eval.BaseStore{Path: o.SaveLogits, Encoding: compare.Encoding(o.LogitsFormat), KLMode: mode, KLRows: o.KLDRows, Vocab: vocab, ModelHash: modelHash}
	if o.LogitsFormat == "llamacpp" {
		bs.Container, bs.Encoding = compare.ContainerLlamaCpp, compare.EncodingU16
	} else if _, err := compare.ParseEncoding(o.LogitsFormat); err != nil {
		return nil, usageErr(err)
	}
	if mode == compare.KLCompareQ && bs.KLRows == 0 {
		bs.KLRows = min(compare.DefaultKLRows, len(data.Windows))
	}
	s, err := eval.CreateBaseStore(bs, data.Windows, data.Tokens, data.Spec, data.Hash)
	if err != nil {
		return nil, usageErr(err)
	}
	return s, nil
}
