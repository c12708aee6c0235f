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
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/eval"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/plots"
	"github.com/qppl/qppl/quant"
)

func newCompareCmd() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "data-spec", Aliases: []string{"d"}, Usage: "compare_q data spec JSON (tokenize_fn, tokenizer_dir, dataset, eval_stride, eval_len, max_rows)"},
		&cli.StringSliceFlag{Name: "model-spec", Aliases: []string{"m"}, Usage: "compare_q model spec JSON list (repeatable, globs allowed); the entry with out_logits is the base"},
		&cli.StringSliceFlag{Name: "model", Usage: "model directory (repeatable)"},
		&cli.StringSliceFlag{Name: "label", Usage: "label of the --model at the same position (first word = format family)"},
		&cli.StringFlag{Name: "base", Usage: "base (unquantized) model directory: evaluated first, KL of every other model against it"},
		&cli.StringFlag{Name: "base-label", Usage: "label of --base (default: its directory name)"},
		&cli.StringFlag{Name: "text", Usage: "text file to evaluate (tokenized with the base model's tokenizer; - reads standard input)"},
		&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file to evaluate"},
		&cli.StringFlag{Name: "dataset", Usage: "dataset name (wikitext2), found with --data or in the Hugging Face cache"},
		&cli.StringFlag{Name: "data", Usage: "local copy of the dataset (rows JSONL, parquet, wiki.test.raw, text); overrides the data spec's"},
		&cli.StringFlag{Name: "join", Usage: "row join: compare_q, filtered or llamacpp", DefaultText: "llamacpp for --method llamacpp, else compare_q"},
		&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or model directory (default: the base model, else the first model)"},
		&cli.IntFlag{Name: "ctx", Value: 2048, Usage: "window length (eval_len)"},
		&cli.IntFlag{Name: "stride", Usage: "window stride (eval_stride)", DefaultText: "ctx/4"},
		allowGapsFlag,
		&cli.IntFlag{Name: "rows", Value: 0, Usage: "at most this many windows (max_rows; 0 = all)"},
		&cli.StringFlag{Name: "method", Value: "compare_q", Usage: "windowing: compare_q, exl3-ppl, llamacpp or hf-strided"},
		&cli.StringFlag{Name: "kld-mode", Usage: "KL coverage: scored (every scored position) or compare_q (all positions of the first --kld-rows windows)", DefaultText: "scored"},
		&cli.IntFlag{Name: "kld-rows", Value: compare.DefaultKLRows, Usage: "windows with KL in compare_q mode (fewer when the run has fewer, as compare_q)"},
		&cli.StringFlag{Name: "kld-base", Usage: "existing base log-probs (qppl eval --save-logits, or llama-perplexity --kl-divergence-base) instead of a base model (compare_q's -lf)"},
		&cli.StringFlag{Name: "logits-format", Value: string(compare.DefaultEncoding), Usage: "base log-prob store: f32 (lossless to float32; 4·vocab bytes per position), f64 (exact; 8·vocab) or u16 (llama.cpp's 16-bit scheme; 2·vocab+8)"},
		&cli.StringFlag{Name: "kl-mode", Usage: "old name of --kld-mode", Hidden: true},
		&cli.StringFlag{Name: "base-encoding", Usage: "old name of --logits-format", Hidden: true},
		&cli.IntFlag{Name: "top-k", Value: 5, Usage: "K of the top-K agreement statistic (< 2: none)"},
		&cli.StringFlag{Name: "json", Usage: "write the result set to this file"},
		&cli.StringFlag{Name: "plot", Usage: "also draw a chart to this file (.png, .svg, .pdf); see the plot flags"},
		&cli.StringFlag{Name: "cache-dir", Usage: "result, token and base log-prob cache (qppl cache ls|rm|prune manages it)", DefaultText: "$XDG_CACHE_HOME/qppl (os.UserCacheDir)"},
		&cli.BoolFlag{Name: "no-cache", Usage: "evaluate every model even when a cached result exists"},
		&cli.StringFlag{Name: "run-dir", Usage: "journal every model's finished windows under DIR; the same command resumes an interrupted comparison (docs/runs.md)"},
		&cli.StringFlag{Name: "baseline", Usage: "previous result set: exit 3 when a model regressed against it"},
		&cli.StringFlag{Name: "max-ppl-increase", Value: "0.1%", Usage: "regression gate: allowed relative PPL increase"},
		&cli.StringFlag{Name: "max-kld-increase", Value: "5%", Usage: "regression gate: allowed relative KLD increase"},
		&cli.BoolFlag{Name: "allow-missing", Usage: "regression gate: baseline models absent from this run do not fail it"},
	}
	return &cli.Command{
		Name:  "compare",
		Usage: "evaluate several models on identical token ids, with KL against a base; cache, plot and gate the results",
		Description: `Either compare_q's spec files:
   qppl compare -d data.json -m models.json [-m more.json] [--data wiki.test.raw]
or qppl's flags:
   qppl compare --base DIR --model DIR --label "W4A16 g128" ... --dataset wikitext2 --ctx 2048 --stride 512 --rows 20
Results are cached under --cache-dir, keyed by the data spec, the sha256 of
each model's files, the backend and the base; re-running or re-plotting
never evaluates twice. --baseline FILE gates each model (matched by label)
against a previous result set and exits 3 when one regressed.
--run-dir DIR journals every model's finished windows under DIR; after a
crash or Ctrl-C the same command resumes (docs/runs.md).`,
		Flags: append(append(flags, backendFlags(backendFlagSet{name: true, kv: true})...), plotFlags()...),
		Action: func(c *cli.Context) error {
			o, err := compareOptionsFrom(c)
			if err != nil {
				return err
			}
			return runCompare(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// compareOptions are the flags of `qppl compare`.
type compareOptions struct {
	Spec   *suite.DataSpec // from --data-spec or the data flags
	Models []suite.ModelSpec
	// Tokenizer is the model directory whose tokenizer.json (else
	// config.json's bos_token_id) gives BOS, as eval.
	Tokenizer string
	Stdin     io.Reader // read for --text -

	KLDMode      string // as given ("" = the spec's, else scored)
	KLDRows      int
	KLDBase      string
	LogitsFormat compare.Encoding
	TopK         int
	Backend      backendOptions

	JSON     string
	Plot     string
	PlotOpts plots.Options
	CacheDir string
	NoCache  bool
	RunDir   string

	Baseline   string
	Thresholds suite.Thresholds
}

// compareOptionsFrom reads and checks the flags: everything that can be
// checked before evaluating is checked here.
func compareOptionsFrom(c *cli.Context) (compareOptions, error) {
	if err := adoptOldNames(c, "compare", renamedFlag{name: "kld-mode", old: "kl-mode"}, renamedFlag{name: "logits-format", old: "base-encoding"}); err != nil {
		return compareOptions{}, err
	}
	o := compareOptions{
		KLDRows: c.Int("kld-rows"), KLDBase: c.String("kld-base"), TopK: c.Int("top-k"),
		Backend: backendFromFlags(c, c.Int("ctx")),
		JSON:    c.String("json"), Plot: c.String("plot"), CacheDir: c.String("cache-dir"), NoCache: c.Bool("no-cache"),
		RunDir: c.String("run-dir"), Baseline: c.String("baseline"), Stdin: c.App.Reader,
	}
	if c.IsSet("kld-mode") {
		o.KLDMode = c.String("kld-mode")
	}
	var err error
	if o.CacheDir == "" {
		if o.CacheDir, err = suite.DefaultCacheDir(); err != nil {
			return o, usageErr(fmt.Errorf("compare: %w", err))
		}
	}
	o.PlotOpts, err = plotOptions(c)
	if err != nil && o.Plot != "" {
		return o, usageErr(fmt.Errorf("compare: %w", err))
	}
	if o.Plot != "" {
		if _, err := plots.FormatOf(o.Plot); err != nil {
			return o, usageErr(fmt.Errorf("--plot: %w", err))
		}
	}
	if err := checkBackendName(o.Backend.Name); err != nil {
		return o, usageErr(fmt.Errorf("compare: %w", err))
	}
	if err := o.Backend.checkDevices(); err != nil {
		return o, usageErr(fmt.Errorf("compare: %w", err))
	}
	if err := checkOutputDirs("compare", map[string]string{"json": o.JSON, "plot": o.Plot}, o.RunDir); err != nil {
		return o, usageErr(err)
	}
	o.Thresholds = suite.DefaultThresholds()
	if o.Thresholds.MaxPPLIncrease, err = suite.ParseFraction(c.String("max-ppl-increase")); err != nil {
		return o, usageErr(fmt.Errorf("--max-ppl-increase %w", err))
	}
	if o.Thresholds.MaxKLDIncrease, err = suite.ParseFraction(c.String("max-kld-increase")); err != nil {
		return o, usageErr(fmt.Errorf("--max-kld-increase %w", err))
	}
	o.Thresholds.AllowMissing = c.Bool("allow-missing")
	if o.LogitsFormat, err = compare.ParseEncoding(c.String("logits-format")); err != nil {
		return o, usageErr(fmt.Errorf("--logits-format: %w", err))
	}
	if o.LogitsFormat == compare.EncodingU16 && c.String("kld-mode") == string(compare.KLCompareQ) {
		fmt.Fprintf(c.App.ErrWriter, "qppl: warning: %s\n", "--logits-format u16 drops base log-probs below -16 nats from the KL (llama.cpp's scheme); compare_q's KL is full-vocabulary: use --logits-format f32 to match it")
	}
	if o.KLDRows < 1 {
		return o, usageErr(fmt.Errorf("--kld-rows %d: must be >= 1", o.KLDRows))
	}
	warn := func(s string) { fmt.Fprintf(c.App.ErrWriter, "qppl: warning: %s\n", s) }
	if o.Spec, o.Models, err = compareInputs(c, warn); err != nil {
		return o, usageErr(err)
	}
	// compare_q's -mask selects the models to run (the base always runs).
	if o.Models, err = suite.OrderModels(o.Models, plots.ParseMask(c.String("mask"))); err != nil {
		return o, usageErr(fmt.Errorf("compare: %w", err))
	}
	if o.KLDBase != "" && o.Models[0].Base {
		return o, usageErr(fmt.Errorf("--kld-base %s and the base model %q (%s): give one", o.KLDBase, o.Models[0].Label, o.Models[0].Source))
	}
	o.Tokenizer = c.String("tokenizer")
	if o.Tokenizer == "" {
		o.Tokenizer = o.Models[0].ModelDir // OrderModels puts the base first
	}
	return o, nil
}

// runCompare: data (suite.Prepare, through eval.Prepare) → base log-probs
// → run directory → suite.Run (each model through eval.Evaluate) → table,
// JSON, plot → regression gate.
func runCompare(ctx context.Context, o compareOptions, stdout, stderr io.Writer) error {
	var baseline *suite.ResultSet
	if o.Baseline != "" {
		var err error
		if baseline, err = suite.LoadResults(o.Baseline); err != nil {
			return usageErr(err)
		}
	}
	if err := o.checkModelDirs(); err != nil {
		return err
	}
	data, err := o.prepare(ctx, stderr)
	if err != nil {
		return err
	}
	o.Backend.MaxTokens = data.Info.Ctx
	ev, err := o.evaluator(data, stderr)
	if err != nil {
		return err
	}
	if err := o.checkInputs(data, baseline, stderr); err != nil {
		return err
	}
	so := suite.Options{Cache: &suite.Cache{Dir: o.CacheDir}, NoCache: o.NoCache, Log: stderr, ExternalBase: ev.ExternalKey}
	if o.RunDir != "" {
		rd, err := o.openRunDir(ctx, data, ev, &so, stderr)
		if err != nil {
			return err
		}
		defer rd.Close()
	}
	rs, err := suite.Run(ctx, data, o.Models, ev, so)
	if err != nil {
		var ie *eval.Interrupted
		if o.RunDir != "" && ctx.Err() != nil && !errors.As(err, &ie) {
			err = &eval.Interrupted{Err: err, RunDir: o.RunDir, Note: "every finished window is saved under " + o.RunDir}
		}
		return err
	}
	return o.report(rs, baseline, stdout, stderr)
}

// modelName names a model in compare's input errors.
func modelName(ms suite.ModelSpec) string {
	return fmt.Sprintf("compare: model %q (%s)", ms.Label, ms.Source)
}

// checkModelDirs refuses a model directory that is not there before the
// data is read (which may need the first model's tokenizer).
func (o *compareOptions) checkModelDirs() error {
	for _, ms := range o.Models {
		if isGGUFPath(ms.ModelDir) {
			if st, err := os.Stat(ms.ModelDir); err != nil || !st.Mode().IsRegular() {
				return usageErr(fmt.Errorf("%s: %s: no such GGUF file", modelName(ms), ms.ModelDir))
			}
		} else if st, err := os.Stat(ms.ModelDir); err != nil || !st.IsDir() {
			return usageErr(fmt.Errorf("%s: %s: no such directory", modelName(ms), ms.ModelDir))
		}
	}
	return nil
}

// checkInputs opens every model (config.json, safetensors headers, the
// quantization) and checks its vocabulary and positions against the data,
// and --baseline against the data spec, before any model runs: a mistake
// in the last model must not cost the run of the first ones.
func (o *compareOptions) checkInputs(data *suite.Data, baseline *suite.ResultSet, stderr io.Writer) error {
	ref, refName := 0, ""
	if cfg, err := arch.LoadConfig(o.Tokenizer); err == nil {
		ref, refName = cfg.VocabSize, filepath.Join(o.Tokenizer, "config.json")
	}
	maxID := int32(-1)
	for _, id := range data.Tokens {
		maxID = max(maxID, id)
	}
	for _, ms := range o.Models {
		name := modelName(ms)
		m, err := openLocalModel(ms.ModelDir, "") // a directory or GGUF file (ggufmodel.go)
		if err != nil {
			return usageErr(fmt.Errorf("%s: %w", name, err))
		}
		_, err = m.inspect()
		cfg := m.Config
		m.Close()
		if err != nil {
			return usageErr(fmt.Errorf("%s: %w", name, err))
		}
		cfgName := filepath.Join(ms.ModelDir, "config.json")
		if isGGUFPath(ms.ModelDir) {
			cfgName = ms.ModelDir // the metadata is the config
		}
		if ref == 0 {
			ref, refName = cfg.VocabSize, cfgName
		}
		if cfg.VocabSize != ref {
			return usageErr(fmt.Errorf("%s: %s: vocab_size %d, but %s has vocab_size %d: models compared on the same token ids (and KL against one base) need one vocabulary",
				name, cfgName, cfg.VocabSize, refName, ref))
		}
		if int(maxID) >= cfg.VocabSize {
			return usageErr(fmt.Errorf("%s: %s: vocab_size %d, but the data holds token id %d", name, cfgName, cfg.VocabSize, maxID))
		}
		if err := checkLongContext(data.Info.Ctx, cfg, stderr); err != nil {
			return usageErr(fmt.Errorf("%s: %s: %w", name, cfgName, err))
		}
	}
	if baseline != nil {
		cur := &suite.ResultSet{DataSpecHash: data.Hash, TokensHash: data.Info.TokensHash, Data: data.Info}
		if o.Models[0].Base || o.KLDBase != "" {
			cur.KLMode = data.KLMode
		}
		if err := suite.Comparable(baseline, cur); err != nil {
			return usageErr(fmt.Errorf("--baseline %s: %w", o.Baseline, err))
		}
	}
	return nil
}

// prepare reads, tokenizes and windows the data once for every model.
func (o *compareOptions) prepare(ctx context.Context, stderr io.Writer) (*suite.Data, error) {
	po := suite.PrepareOptions{CacheDir: o.CacheDir, Tokenizer: o.Tokenizer, Stdin: o.Stdin, ResolveDataset: func(string) (string, error) {
		res, err := hub.ResolveWikiText(ctx, hub.WikiTextOptions{Progress: stderr})
		if err != nil {
			return "", err
		}
		if len(res.Paths) != 1 {
			return "", fmt.Errorf("found %d files (%s); pass one with --data", len(res.Paths), strings.Join(res.Paths, ", "))
		}
		return res.Paths[0], nil
	}}
	po.Model = eval.Vocabulary{BOS: -1, EOS: -1}
	if isGGUFPath(o.Tokenizer) { // a GGUF base: its metadata, tokenizer.json beside it
		po.Tokenizer = filepath.Dir(o.Tokenizer)
		if g, err := gguf.OpenModel(o.Tokenizer, ggufOptions()); err == nil {
			po.Model = modelVocabulary(g.Config, "")
			g.Close()
		}
	} else if cfg, err := arch.LoadConfig(o.Tokenizer); err == nil {
		po.Model = modelVocabulary(cfg, "")
	}
	data, err := suite.Prepare(o.Spec, po)
	if err != nil {
		return nil, usageErr(err)
	}
	for _, w := range data.Warnings {
		fmt.Fprintf(stderr, "qppl: warning: %s\n", w)
	}
	fmt.Fprintf(stderr, "data: %s, %d tokens (sha256 %s), %d windows of %d (method %s), %d scored tokens\n",
		data.Info.Source, data.Info.NumTokens, data.Info.TokensHash[:12], len(data.Windows), data.Info.Ctx, data.Info.Method, compare.ScoredTokens(data.Windows))
	return data, nil
}

// evaluator is the suite.Evaluator of this run: backend, base store
// directory and encoding, top-K, KL rows and the --kld-base file.
func (o *compareOptions) evaluator(data *suite.Data, stderr io.Writer) (*suite.BackendEvaluator, error) {
	// --kv-cache-quant applies to the models that declare a quantized KV
	// cache; the others run as they are ("on" is then the default).
	switch o.Backend.KVCacheQuant {
	case "", quant.KVQuantOff:
	case quant.KVQuantOn:
		o.Backend.KVCacheQuant = ""
	default:
		return nil, usageErr(fmt.Errorf("compare: --kv-cache-quant %q: want on or off", o.Backend.KVCacheQuant))
	}
	ev := &suite.BackendEvaluator{Open: openForCompare(o.Backend), Backend: o.Backend.Name, Precision: o.Backend.Precision,
		StoreDir: filepath.Join(o.CacheDir, "base"), Encoding: o.LogitsFormat, TopK: o.TopK, Progress: stderr, KVCacheOff: o.Backend.KVCacheQuant == quant.KVQuantOff}
	if kb := o.KLDBase; kb != "" {
		st, err := compare.OpenStore(kb)
		if err != nil {
			return nil, usageErr(err)
		}
		h := st.Header()
		st.Close()
		if h.DataSpecHash != "" && h.DataSpecHash != data.Hash {
			return nil, usageErr(fmt.Errorf("--kld-base %s was made for data spec %s (method %s, ctx %d, stride %d, rows %d), this run's is %s: use the same data options", kb, h.DataSpecHash[:12], h.Method, h.Ctx, h.Stride, h.Rows, data.Hash[:12]))
		}
		if o.KLDMode != "" && string(h.KLMode) != data.KLMode {
			return nil, usageErr(fmt.Errorf("--kld-mode %s, but --kld-base %s holds KL mode %s", data.KLMode, kb, h.KLMode))
		}
		data.KLMode = string(h.KLMode)
		// The key must identify the content: the store's own key when it
		// records data and model hashes, else the file's sha256.
		if h.DataSpecHash != "" && h.ModelHash != "" {
			ev.ExternalKey = "store-" + h.Key()
		} else {
			fmt.Fprintf(stderr, "hashing %s (it records no model hash)\n", kb)
			sum, err := compare.HashFiles([]string{kb})
			if err != nil {
				return nil, err
			}
			ev.ExternalKey = "file-" + sum
		}
		ev.ExternalPath = kb
	}
	if data.KLMode == string(compare.KLCompareQ) && ev.ExternalPath == "" {
		ev.KLRows = min(o.KLDRows, len(data.Windows))
	}
	if o.Models[0].Base && o.Models[0].OutLogits != "" {
		ev.StoreDir = o.Models[0].OutLogits
	}
	return ev, nil
}

// openRunDir opens --run-dir: every model's files are hashed once, the
// comparison's identity is checked, and the base model's store is kept
// in its subdirectory.
func (o *compareOptions) openRunDir(ctx context.Context, data *suite.Data, ev *suite.BackendEvaluator, so *suite.Options, stderr io.Writer) (*suite.RunDir, error) {
	hashes, hashFn, err := suite.ModelHashes(ctx, o.Models)
	if err != nil {
		if ctx.Err() != nil { // nothing evaluated yet: the same command starts it
			return nil, &eval.Interrupted{Err: err, RunDir: o.RunDir, Note: "nothing was evaluated yet"}
		}
		return nil, err
	}
	id := &suite.Identity{Data: data.Info, DataSpecHash: data.Hash, Windows: len(data.Windows), KLMode: data.KLMode,
		Engine: ev.Engine(), ExternalBase: ev.ExternalKey}
	rd, err := suite.OpenRunDir(o.RunDir, id, o.Models, hashes, stderr)
	if err != nil {
		return nil, err
	}
	ev.Runs = rd
	so.ModelHash = hashFn
	if o.Models[0].Base && o.Models[0].OutLogits == "" {
		if ev.StoreDir, err = rd.ModelDir(o.Models[0]); err != nil {
			rd.Close()
			return nil, err
		}
	}
	return rd, nil
}

// report prints the table, writes the JSON and the plot, and gates the
// result set against --baseline.
func (o *compareOptions) report(rs *suite.ResultSet, baseline *suite.ResultSet, stdout, stderr io.Writer) error {
	summary := summaryWriter(stdout, stderr, o.JSON)
	writeResultTable(summary, rs)
	switch o.JSON {
	case "":
	case stdoutPath:
		b, err := json.MarshalIndent(rs, "", "  ")
		if err != nil {
			return err
		}
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	default:
		if err := rs.Write(o.JSON); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", o.JSON)
	}
	if o.Plot != "" {
		if err := savePlot(o.Plot, []*suite.ResultSet{rs}, []string{"this run"}, o.PlotOpts, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", o.Plot)
	}
	if baseline == nil {
		return nil
	}
	th := o.Thresholds
	rep, err := suite.Gate(baseline, rs, th)
	if err != nil {
		return usageErr(fmt.Errorf("--baseline %s: %w", o.Baseline, err))
	}
	fmt.Fprintf(summary, "\nregression gate against %s (PPL +%.4g%%, KLD +%.4g%% allowed)\n", o.Baseline, 100*th.MaxPPLIncrease, 100*th.MaxKLDIncrease)
	rep.WriteTable(summary)
	if rep.Failed {
		return &codedError{exitRegressed, fmt.Errorf("compare: regression gate failed against %s: %s", o.Baseline, rep.Summary())}
	}
	return nil
}

// checkCompareWindowFlags applies the stride default (ctx/4) and refuses
// what the method ignores or what leaves tokens unscored.
func checkCompareWindowFlags(c *cli.Context, spec *suite.DataSpec) error {
	method, err := compare.ParseMethod(spec.Method)
	if err != nil {
		return err
	}
	if !c.IsSet("stride") {
		spec.EvalStride = defaultStride(spec.EvalLen)
	}
	if err := checkStrideUsed("compare", method, c.IsSet("stride")); err != nil {
		return err
	}
	if err := checkGaps("compare", method, spec.EvalLen, spec.EvalStride, c.Bool("allow-gaps")); err != nil {
		return err
	}
	if c.IsSet("join") && spec.TokensFile != "" {
		return errors.New("compare: --join joins the rows of the data; --tokens is read as it is")
	}
	return nil
}

// compareInputs builds the data spec and model list from compare_q spec
// files or from qppl's flags (not both).
func compareInputs(c *cli.Context, warn func(string)) (*suite.DataSpec, []suite.ModelSpec, error) {
	spec, err := compareDataSpec(c, warn)
	if err != nil {
		return nil, nil, err
	}
	models, err := compareModels(c, warn)
	if err != nil {
		return nil, nil, err
	}
	if spec.TokensFile == "" && spec.TokenizerDir == "" {
		spec.TokenizerDir = c.String("tokenizer")
		if spec.TokenizerDir == "" {
			spec.TokenizerDir = models[0].ModelDir
			for _, m := range models {
				if m.Base {
					spec.TokenizerDir = m.ModelDir
				}
			}
			if isGGUFPath(spec.TokenizerDir) {
				spec.TokenizerDir = filepath.Dir(spec.TokenizerDir) // tokenizer.json beside the file
			}
		}
	}
	if err := checkTokenizerModels(spec.TokenizerDir, models); err != nil {
		return nil, nil, fmt.Errorf("compare: %w", err)
	}
	return spec, models, nil
}

// compareDataSpec reads --data-spec (compare_q's file) or the data flags.
func compareDataSpec(c *cli.Context, warn func(string)) (*suite.DataSpec, error) {
	var spec *suite.DataSpec
	if p := c.String("data-spec"); p != "" {
		for _, f := range []string{"text", "tokens", "dataset", "join", "tokenizer", "ctx", "stride", "rows", "method", "allow-gaps"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s cannot be combined with --data-spec (edit the spec; only --data and --kld-mode apply to it)", f)
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--data-spec: %w", err)
		}
		var ws []string
		spec, ws, err = suite.ParseDataSpec(b, p)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			warn(w)
		}
		if d := c.String("data"); d != "" {
			spec.DataFile = d
		}
	} else {
		spec = &suite.DataSpec{
			TokenizeFn: "transformers",
			Dataset:    c.String("dataset"),
			DataFile:   c.String("data"),
			TokensFile: c.String("tokens"),
			Join:       c.String("join"),
			EvalLen:    c.Int("ctx"),
			EvalStride: c.Int("stride"),
			MaxRows:    c.Int("rows"),
			Method:     c.String("method"),
		}
		if t := c.String("text"); t != "" {
			if spec.DataFile != "" {
				return nil, errors.New("--text and --data both give the data: use one")
			}
			spec.DataFile = t
			spec.Dataset = ""
		}
		n := 0
		for _, v := range []string{spec.DataFile, spec.TokensFile, spec.Dataset} {
			if v != "" {
				n++
			}
		}
		if spec.TokensFile != "" && n > 1 || n == 0 {
			return nil, errors.New("give the data with one of --text FILE, --tokens FILE, --dataset wikitext2 [--data FILE], or --data-spec FILE")
		}
		if err := checkCompareWindowFlags(c, spec); err != nil {
			return nil, err
		}
	}
	if k := c.String("kld-mode"); k != "" {
		spec.KLMode = k
	}

	return spec, nil
}

// compareModels reads --model-spec files (compare_q's), --base and
// --model/--label.
func compareModels(c *cli.Context, warn func(string)) ([]suite.ModelSpec, error) {
	var models []suite.ModelSpec
	for _, pat := range c.StringSlice("model-spec") {
		files := []string{pat}
		if strings.ContainsAny(pat, "*?[") {
			m, err := filepath.Glob(pat)
			if err != nil || len(m) == 0 {
				return nil, fmt.Errorf("--model-spec %s: no file matches", pat)
			}
			files = m
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("--model-spec: %w", err)
			}
			ms, ws, err := suite.ParseModelSpecs(b, f)
			if err != nil {
				return nil, err
			}
			for _, w := range ws {
				warn(w)
			}
			models = append(models, ms...)
		}
	}
	if b := c.String("base"); b != "" {
		label := c.String("base-label")
		if label == "" {
			label = filepath.Base(filepath.Clean(b))
		}
		for i := range models {
			if models[i].Base {
				return nil, fmt.Errorf("--base %s and the out_logits model %q of %s: give one base", b, models[i].Label, models[i].Source)
			}
		}
		models = append(models, suite.ModelSpec{ModelDir: b, Label: label, Base: true, Source: "--base"})
	}
	dirs, labels := c.StringSlice("model"), c.StringSlice("label")
	if len(labels) > len(dirs) {
		return nil, fmt.Errorf("%d --label values for %d --model values", len(labels), len(dirs))
	}
	for i, d := range dirs {
		l := filepath.Base(filepath.Clean(d))
		if i < len(labels) {
			l = labels[i]
		}
		models = append(models, suite.ModelSpec{ModelDir: d, Label: l, Source: fmt.Sprintf("--model %s", d)})
	}
	if len(models) == 0 {
		return nil, errors.New("no models: give --model DIR (repeatable), --base DIR or --model-spec FILE")
	}
	return models, nil
}

// writeResultTable prints one line per model.
func writeResultTable(w io.Writer, rs *suite.ResultSet) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tBPW\tHEAD BPW\tVRAM GiB\tPPL\t± SE\tKLD\t± SE\tKLD P99\tSAME TOP")
	for _, r := range rs.Results {
		kld, kse, p99, top := "-", "-", "-", "-"
		if r.KLD != nil {
			kld = fmt.Sprintf("%.6f", r.KLD.Mean)
			kse = fmt.Sprintf("%.6f", r.KLD.MeanSE)
			p99 = fmt.Sprintf("%.5f", r.KLD.Percentiles.P99)
			top = fmt.Sprintf("%.3f%%", 100*r.KLD.SameTop)
		} else if r.Label == rs.Base {
			kld = "(base)"
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.4f\t%.6f\t%.6f\t%s\t%s\t%s\t%s\n", r.Label, r.BPWLayer, r.BPWHead, r.VRAMGB, r.PPL, r.PPLSE, kld, kse, p99, top)
	}
	tw.Flush()
}

// openForCompare opens a model and its backend for suite's evaluator.
func openForCompare(bo backendOptions) func(dir string) (*suite.Opened, error) {
	return func(dir string) (*suite.Opened, error) {
		m, err := openLocalModel(dir, "") // a directory or GGUF file (ggufmodel.go)
		if err != nil {
			return nil, usageErr(err)
		}
		rep, err := m.inspect()
		if err != nil {
			m.Close()
			return nil, usageErr(err)
		}
		kvState, kvScheme, err := kvCacheState(m.ckpt, bo.KVCacheQuant)
		if err != nil {
			m.Close()
			return nil, err
		}
		be, err := m.openBackend(bo)
		if err != nil {
			m.Close()
			return nil, err
		}
		return &suite.Opened{Backend: be, BPWLayer: rep.BPWLayer, BPWHead: rep.BPWHead, VRAMGB: rep.VRAMGB, Format: rep.Format,
			KVCacheQuant: kvState, KVCacheScheme: kvScheme,
			Close: func() error {
				err := be.Close()
				if e := m.Close(); err == nil {
					err = e
				}
				return err
			}}, nil
	}
}

// compareJournalName is the identity file of a compare run directory.
const compareJournalName = eval.CompareJournalName

// modelSubdir names model i's subdirectory of a compare run directory.
func modelSubdir(i int, label string) string { return suite.ModelSubdir(i, label) }
