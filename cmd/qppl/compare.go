package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/plots"
)

func newCompareCmd() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "data-spec", Aliases: []string{"d"}, Usage: "compare_q data spec JSON (tokenize_fn, tokenizer_dir, dataset, eval_stride, eval_len, max_rows)"},
		&cli.StringSliceFlag{Name: "model-spec", Aliases: []string{"m"}, Usage: "compare_q model spec JSON list (repeatable, globs allowed); the entry with out_logits is the base"},
		&cli.StringSliceFlag{Name: "model", Usage: "model directory (repeatable)"},
		&cli.StringSliceFlag{Name: "label", Usage: "label of the --model at the same position (first word = format family)"},
		&cli.StringFlag{Name: "base", Usage: "base (unquantized) model directory: evaluated first, KL of every other model against it"},
		&cli.StringFlag{Name: "base-label", Usage: "label of --base (default: its directory name)"},
		&cli.StringFlag{Name: "text", Usage: "text file to evaluate (tokenized with the base model's tokenizer)"},
		&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file to evaluate"},
		&cli.StringFlag{Name: "dataset", Usage: "dataset name (wikitext2), found with --data or in the Hugging Face cache"},
		&cli.StringFlag{Name: "data", Usage: "local copy of the dataset (rows JSONL, parquet, wiki.test.raw, text); overrides the data spec's"},
		&cli.StringFlag{Name: "join", Usage: "row join: compare_q, filtered or llamacpp", DefaultText: "llamacpp for --method llamacpp, else compare_q"},
		&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or model directory (default: the base model, else the first model)"},
		&cli.IntFlag{Name: "ctx", Value: 2048, Usage: "window length (eval_len)"},
		&cli.IntFlag{Name: "stride", Value: 512, Usage: "window stride (eval_stride)"},
		&cli.IntFlag{Name: "rows", Value: 0, Usage: "at most this many windows (max_rows; 0 = all)"},
		&cli.StringFlag{Name: "method", Value: "compare_q", Usage: "windowing: compare_q, exl3-ppl, llamacpp or hf-strided"},
		&cli.StringFlag{Name: "kld-mode", Aliases: []string{"kl-mode"}, Usage: "KL coverage: scored (every scored position) or compare_q (all positions of the first --kld-rows windows)", DefaultText: "scored"},
		&cli.IntFlag{Name: "kld-rows", Value: compare.DefaultKLRows, Usage: "windows with KL in compare_q mode (fewer when the run has fewer, as compare_q)"},
		&cli.StringFlag{Name: "kld-base", Usage: "existing base log-probs (qppl eval --save-logits, or llama-perplexity --kl-divergence-base) instead of a base model (compare_q's -lf)"},
		&cli.StringFlag{Name: "logits-format", Aliases: []string{"base-encoding"}, Value: "f32", Usage: "base log-prob store: f32 (lossless to float32; 4·vocab bytes per position), f64 (exact; 8·vocab) or u16 (llama.cpp's 16-bit scheme; 2·vocab+8)"},
		&cli.IntFlag{Name: "top-k", Value: 5, Usage: "K of the top-K agreement statistic (< 2: none)"},
		&cli.StringFlag{Name: "backend", Value: "reference", Usage: "reference, emu or cuda"},
		&cli.StringFlag{Name: "precision", Usage: "bf16, fp16 or fp32 (emu, cuda)"},
		&cli.StringFlag{Name: "json", Usage: "write the result set to this file"},
		&cli.StringFlag{Name: "plot", Usage: "also draw a chart to this file (.png, .svg, .pdf); see the plot flags"},
		&cli.StringFlag{Name: "cache-dir", Value: suite.DefaultCacheDir, Usage: "result, token and base log-prob cache"},
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
		Flags: append(flags, plotFlags()...),
		Action: func(c *cli.Context) error {
			return runCompare(c)
		},
	}
}

func runCompare(c *cli.Context) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	warn := func(s string) { fmt.Fprintf(stderr, "qppl: warning: %s\n", s) }

	// Everything that can be checked before evaluating is checked first.
	po, err := plotOptions(c)
	if err != nil && c.String("plot") != "" {
		return usageErr(fmt.Errorf("compare: %w", err))
	}
	if p := c.String("plot"); p != "" {
		if _, err := plots.FormatOf(p); err != nil {
			return usageErr(fmt.Errorf("--plot: %w", err))
		}
	}
	if err := checkBackendName(c.String("backend")); err != nil {
		return usageErr(fmt.Errorf("compare: %w", err))
	}
	if err := checkOutputDirs("compare", map[string]string{"json": c.String("json"), "plot": c.String("plot")}, c.String("run-dir")); err != nil {
		return usageErr(err)
	}
	th := suite.DefaultThresholds()
	if th.MaxPPLIncrease, err = suite.ParseFraction(c.String("max-ppl-increase")); err != nil {
		return usageErr(fmt.Errorf("--max-ppl-increase %w", err))
	}
	if th.MaxKLDIncrease, err = suite.ParseFraction(c.String("max-kld-increase")); err != nil {
		return usageErr(fmt.Errorf("--max-kld-increase %w", err))
	}
	th.AllowMissing = c.Bool("allow-missing")
	var baseline *suite.ResultSet
	if p := c.String("baseline"); p != "" {
		if baseline, err = suite.LoadResults(p); err != nil {
			return usageErr(err)
		}
	}
	enc, err := compare.ParseEncoding(c.String("logits-format"))
	if err != nil {
		return usageErr(fmt.Errorf("--logits-format: %w", err))
	}
	if enc == compare.EncodingU16 && c.String("kld-mode") == string(compare.KLCompareQ) {
		warn("--logits-format u16 drops base log-probs below -16 nats from the KL (llama.cpp's scheme); compare_q's KL is full-vocabulary: use --logits-format f32 to match it")
	}
	if c.Int("kld-rows") < 1 {
		return usageErr(fmt.Errorf("--kld-rows %d: must be >= 1", c.Int("kld-rows")))
	}

	spec, models, err := compareInputs(c, warn)
	if err != nil {
		return usageErr(err)
	}
	// compare_q's -mask selects the models to run (the base always runs).
	models, err = suite.OrderModels(models, plots.ParseMask(c.String("mask")))
	if err != nil {
		return usageErr(fmt.Errorf("compare: %w", err))
	}

	if kb := c.String("kld-base"); kb != "" && models[0].Base {
		return usageErr(fmt.Errorf("--kld-base %s and the base model %q (%s): give one", kb, models[0].Label, models[0].Source))
	}

	cacheDir := c.String("cache-dir")
	data, err := suite.Prepare(spec, suite.PrepareOptions{CacheDir: cacheDir, ResolveDataset: func(string) (string, error) {
		res, err := hub.ResolveWikiText(c.Context, hub.WikiTextOptions{Progress: stderr})
		if err != nil {
			return "", err
		}
		if len(res.Paths) != 1 {
			return "", fmt.Errorf("found %d files (%s); pass one with --data", len(res.Paths), strings.Join(res.Paths, ", "))
		}
		return res.Paths[0], nil
	}})
	if err != nil {
		return usageErr(err)
	}
	for _, w := range data.Warnings {
		warn(w)
	}
	fmt.Fprintf(stderr, "data: %s, %d tokens (sha256 %s), %d windows of %d (method %s), %d scored tokens\n",
		data.Info.Source, data.Info.NumTokens, data.Info.TokensHash[:12], len(data.Windows), data.Info.Ctx, data.Info.Method, compare.ScoredTokens(data.Windows))

	var external string
	var externalKey string
	if kb := c.String("kld-base"); kb != "" {
		st, err := compare.OpenStore(kb)
		if err != nil {
			return usageErr(err)
		}
		h := st.Header()
		st.Close()
		if h.DataSpecHash != "" && h.DataSpecHash != data.Hash {
			return usageErr(fmt.Errorf("--kld-base %s was made for data spec %s (method %s, ctx %d, stride %d, rows %d), this run's is %s: use the same data options", kb, h.DataSpecHash[:12], h.Method, h.Ctx, h.Stride, h.Rows, data.Hash[:12]))
		}
		if c.IsSet("kld-mode") && string(h.KLMode) != data.KLMode {
			return usageErr(fmt.Errorf("--kld-mode %s, but --kld-base %s holds KL mode %s", data.KLMode, kb, h.KLMode))
		}
		data.KLMode = string(h.KLMode)
		// The key must identify the content: the store's own key when it
		// records data and model hashes, else the file's sha256.
		if h.DataSpecHash != "" && h.ModelHash != "" {
			externalKey = "store-" + h.Key()
		} else {
			fmt.Fprintf(stderr, "hashing %s (it records no model hash)\n", kb)
			sum, err := compare.HashFiles([]string{kb})
			if err != nil {
				return err
			}
			externalKey = "file-" + sum
		}
		external = kb
	}
	ev := &cliEvaluator{
		backend:  backendOptions{Name: c.String("backend"), Precision: c.String("precision")},
		storeDir: filepath.Join(cacheDir, "base"),
		encoding: enc,
		topK:     c.Int("top-k"),
		progress: stderr,
	}
	if data.KLMode == string(compare.KLCompareQ) && external == "" {
		ev.klRows = min(c.Int("kld-rows"), len(data.Windows))
	}
	ev.externalKey, ev.externalPath = externalKey, external
	if models[0].Base && models[0].OutLogits != "" {
		ev.storeDir = models[0].OutLogits
	}
	so := suite.Options{
		Cache:        &suite.Cache{Dir: cacheDir},
		NoCache:      c.Bool("no-cache"),
		Log:          stderr,
		ExternalBase: externalKey,
	}
	runDir := c.String("run-dir")
	if runDir != "" {
		hashes, hashFn, err := modelHashes(c.Context, models)
		if err != nil {
			if c.Context.Err() != nil { // nothing evaluated yet: the same command starts it
				return &interruptedError{err: err, runDir: runDir, note: "nothing was evaluated yet"}
			}
			return err
		}
		id := &compareIdentity{Data: data.Info, DataSpecHash: data.Hash, Windows: len(data.Windows), KLMode: data.KLMode,
			Engine: ev.Engine(), ExternalBase: externalKey}
		rd, err := openCompareRunDir(runDir, id, models, hashes, stderr)
		if err != nil {
			return err
		}
		defer rd.close()
		ev.runs = rd
		so.ModelHash = hashFn
		if models[0].Base && models[0].OutLogits == "" {
			if ev.storeDir, err = rd.modelDir(models[0]); err != nil {
				return err
			}
		}
	}
	rs, err := suite.Run(c.Context, data, models, ev, so)
	if err != nil {
		var ie *interruptedError
		if runDir != "" && c.Context.Err() != nil && !errors.As(err, &ie) {
			err = &interruptedError{err: err, runDir: runDir, note: "every finished window is saved under " + runDir}
		}
		return err
	}
	writeResultTable(stdout, rs)
	if p := c.String("json"); p != "" {
		if err := rs.Write(p); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if p := c.String("plot"); p != "" {
		if err := savePlot(p, []*suite.ResultSet{rs}, []string{"this run"}, po, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if baseline != nil {
		rep, err := suite.Gate(baseline, rs, th)
		if err != nil {
			return usageErr(fmt.Errorf("--baseline %s: %w", c.String("baseline"), err))
		}
		fmt.Fprintf(stdout, "\nregression gate against %s (PPL +%.4g%%, KLD +%.4g%% allowed)\n", c.String("baseline"), 100*th.MaxPPLIncrease, 100*th.MaxKLDIncrease)
		rep.WriteTable(stdout)
		if rep.Failed {
			return &codedError{exitRegressed, fmt.Errorf("compare: regression gate failed against %s: %s", c.String("baseline"), rep.Summary())}
		}
	}
	return nil
}

// compareInputs builds the data spec and model list from compare_q spec
// files or from qppl's flags (not both).
func compareInputs(c *cli.Context, warn func(string)) (*suite.DataSpec, []suite.ModelSpec, error) {
	var models []suite.ModelSpec
	var spec *suite.DataSpec
	if p := c.String("data-spec"); p != "" {
		for _, f := range []string{"text", "tokens", "dataset", "join", "tokenizer", "ctx", "stride", "rows", "method"} {
			if c.IsSet(f) {
				return nil, nil, fmt.Errorf("--%s cannot be combined with --data-spec (edit the spec; only --data and --kl-mode apply to it)", f)
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--data-spec: %w", err)
		}
		var ws []string
		spec, ws, err = suite.ParseDataSpec(b, p)
		if err != nil {
			return nil, nil, err
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
				return nil, nil, errors.New("--text and --data both give the data: use one")
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
			return nil, nil, errors.New("give the data with one of --text FILE, --tokens FILE, --dataset wikitext2 [--data FILE], or --data-spec FILE")
		}
	}
	if k := c.String("kld-mode"); k != "" {
		spec.KLMode = k
	}

	for _, pat := range c.StringSlice("model-spec") {
		files := []string{pat}
		if strings.ContainsAny(pat, "*?[") {
			m, err := filepath.Glob(pat)
			if err != nil || len(m) == 0 {
				return nil, nil, fmt.Errorf("--model-spec %s: no file matches", pat)
			}
			files = m
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, fmt.Errorf("--model-spec: %w", err)
			}
			ms, ws, err := suite.ParseModelSpecs(b, f)
			if err != nil {
				return nil, nil, err
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
				return nil, nil, fmt.Errorf("--base %s and the out_logits model %q of %s: give one base", b, models[i].Label, models[i].Source)
			}
		}
		models = append(models, suite.ModelSpec{ModelDir: b, Label: label, Base: true, Source: "--base"})
	}
	dirs, labels := c.StringSlice("model"), c.StringSlice("label")
	if len(labels) > len(dirs) {
		return nil, nil, fmt.Errorf("%d --label values for %d --model values", len(labels), len(dirs))
	}
	for i, d := range dirs {
		l := filepath.Base(filepath.Clean(d))
		if i < len(labels) {
			l = labels[i]
		}
		models = append(models, suite.ModelSpec{ModelDir: d, Label: l, Source: fmt.Sprintf("--model %s", d)})
	}
	if len(models) == 0 {
		return nil, nil, errors.New("no models: give --model DIR (repeatable), --base DIR or --model-spec FILE")
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
	return spec, models, nil
}

// writeResultTable prints one line per model.
func writeResultTable(w io.Writer, rs *suite.ResultSet) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tBPW\tHEAD BPW\tVRAM GB\tPPL\t± SE\tKLD\t± SE\tKLD P99\tSAME TOP")
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

// cliEvaluator evaluates one model with a backend and compare's Runner.
type cliEvaluator struct {
	backend  backendOptions
	storeDir string
	encoding compare.Encoding
	topK     int
	klRows   int // KL windows in compare_q mode
	progress io.Writer
	// externalKey names the --kld-base file externalPath.
	externalKey, externalPath string
	// runs, when set (--run-dir), journals every model's windows.
	runs *compareRunDir
}

func (e *cliEvaluator) Engine() string {
	name, prec := e.backend.Name, e.backend.Precision
	if name == "" {
		name = "reference"
	}
	if name == "reference" {
		prec = "fp64"
	} else if prec == "" {
		prec = "bf16"
	}
	eng := fmt.Sprintf("%s/%s/base-%s/top-%d", name, prec, e.encoding, e.topK)
	if e.klRows > 0 {
		eng += fmt.Sprintf("/kld-rows-%d", e.klRows)
	}
	return eng
}

func (e *cliEvaluator) storePath(key string) string {
	if key != "" && key == e.externalKey {
		return e.externalPath
	}
	return filepath.Join(e.storeDir, key+".qlp")
}

func (e *cliEvaluator) HasBase(key string) bool {
	s, err := compare.OpenStore(e.storePath(key))
	if err != nil {
		return false
	}
	s.Close()
	return true
}

func (e *cliEvaluator) Evaluate(ctx context.Context, job suite.Job) (compare.Result, error) {
	var r compare.Result
	m, err := openLocalModel(job.Model.ModelDir, "") // a directory or GGUF file (ggufmodel.go)
	if err != nil {
		return r, usageErr(err)
	}
	defer m.Close()
	rep, err := m.inspect()
	if err != nil {
		return r, usageErr(err)
	}
	be, err := m.openBackend(e.backend)
	if err != nil {
		return r, err
	}
	defer be.Close()
	info := be.Info()
	d := job.Data
	klMode := compare.KLMode(d.KLMode)
	runner := &compare.Runner{Backend: be, Windows: d.Windows, TopK: e.topK, Progress: &compare.Progress{W: e.progress}}

	// Run directory: the model's journal; the base's store reused when
	// complete, else the base evaluated again from its first window.
	var rd *runDir
	var done []compare.WindowResult
	saveBase := job.SaveBase
	if e.runs != nil {
		if rd, err = e.openModelRun(job, info.Name, info.Precision, rep.BPWLayer, rep.BPWHead, rep.VRAMGB, rep.Format, &saveBase); err != nil {
			return r, err
		}
		defer rd.close()
		done = rd.done
		runner.Skip = compare.SkipFunc(done, compare.Shard{})
		runner.OnWindow = rd.append
	}

	var store *compare.Store
	var writer *compare.StoreWriter
	if saveBase || job.UseBase {
		if err := os.MkdirAll(e.storeDir, 0o755); err != nil {
			return r, fmt.Errorf("base log-prob store: %w", err)
		}
	}
	if saveBase {
		layout, err := compare.StoreLayout(d.Windows, klMode, e.klRows)
		if err != nil {
			return r, usageErr(err)
		}
		h := compare.StoreHeader{
			Encoding: e.encoding, Vocab: info.Vocab, KLMode: klMode, DataSpecHash: d.Hash, ModelHash: job.ModelHash,
			TokensHash: d.Info.TokensHash, Method: d.Info.Method, Ctx: d.Info.Ctx, Stride: d.Info.Stride, Rows: d.Info.Rows, Windows: layout,
		}
		if klMode == compare.KLCompareQ {
			h.KLRows = e.klRows
		}
		if writer, err = compare.CreateStore(e.storePath(job.BaseKey), h, d.Tokens); err != nil {
			return r, err
		}
		defer writer.Abort()
		runner.Save = writer
	}
	if job.UseBase {
		if store, err = compare.OpenStore(e.storePath(job.BaseKey)); err != nil {
			return r, err
		}
		defer store.Close()
		if err := store.Check(compare.StoreExpect{DataSpecHash: d.Hash, Vocab: info.Vocab}); err != nil {
			return r, err
		}
		runner.Base = store
	}
	start := time.Now()
	fresh, err := runner.Run(ctx)
	if err != nil {
		if rd != nil && ctx.Err() != nil {
			ie := &interruptedError{err: err, runDir: e.runs.dir, done: len(done) + len(fresh), total: len(d.Windows)}
			ie.note = fmt.Sprintf("%d of %d windows are saved in %s", ie.done, ie.total, journalPath(rd.dir))
			if saveBase {
				ie.note = "the base model's log-prob store was not finished: resuming evaluates the base model again from its first window"
			}
			return r, ie
		}
		return r, err
	}
	if writer != nil {
		if err := writer.Close(); err != nil {
			return r, err
		}
	}
	wrs := append(slices.Clip(done), fresh...)
	r, err = compare.Reduce(wrs, compare.ReduceOptions{Method: compare.Method(d.Info.Method), KLMode: d.KLMode, TopK: e.topK, Ctx: d.Info.Ctx, Stride: d.Info.Stride})
	if err != nil {
		return r, err
	}
	secs := time.Since(start).Seconds()
	r.Model = job.Model.ModelDir
	r.ModelHash = job.ModelHash
	r.Backend, r.Precision = info.Name, info.Precision
	r.Method, r.Ctx, r.Stride, r.Rows = d.Info.Method, d.Info.Ctx, d.Info.Stride, d.Info.Rows
	r.BPWLayer, r.BPWHead, r.VRAMGB, r.Format = rep.BPWLayer, rep.BPWHead, rep.VRAMGB, rep.Format
	r.Data, r.DataSpecHash, r.TokensHash = d.Info, d.Hash, d.Info.TokensHash
	if r.KLD != nil && store != nil {
		h := store.Header()
		r.KLD.BaseFormat = string(h.Encoding)
		r.KLD.BaseKey = h.Key()
	}
	if secs > 0 {
		var tok int64
		for _, w := range d.Windows {
			if runner.Skip == nil || !runner.Skip(w.Index) {
				tok += int64(len(w.Tokens))
			}
		}
		r.Timing = &compare.Timing{Seconds: secs, TokensPerSec: float64(tok) / secs}
	}
	return r, nil
}

// openModelRun opens job's journal in the run directory. For the base model
// (*saveBase) a complete log-prob store with a complete journal is reused
// (*saveBase becomes false: nothing is evaluated); otherwise its journal is
// discarded and the base runs again from its first window, writing the
// store, since a store that was not finished cannot be continued.
func (e *cliEvaluator) openModelRun(job suite.Job, backend, precision string, bpwLayer, bpwHead, vram float64, format string, saveBase *bool) (*runDir, error) {
	sub, err := e.runs.modelDir(job.Model)
	if err != nil {
		return nil, err
	}
	d := job.Data
	id := &runIdentity{
		Version: identityVersion, Command: "compare",
		Model: job.Model.ModelDir, ModelHash: job.ModelHash, Label: job.Model.Label, Backend: backend, Precision: precision,
		Data: d.Info, DataSpecHash: d.Hash, Windows: len(d.Windows),
		TopK: e.topK, BPWLayer: bpwLayer, BPWHead: bpwHead, VRAMGB: vram, Format: format,
	}
	if job.SaveBase || job.UseBase {
		id.KLMode, id.KLBaseKey, id.KLBaseFormat = d.KLMode, job.BaseKey, string(e.encoding)
		if job.UseBase && job.BaseKey == e.externalKey {
			id.KLBaseFormat = "external"
		}
	}
	rd, err := openRunDir(sub, id, d.Windows)
	if err != nil {
		return nil, err
	}
	label := job.Model.Label
	if *saveBase {
		if len(rd.done) == len(d.Windows) && e.HasBase(job.BaseKey) {
			*saveBase = false
			fmt.Fprintf(e.runs.log, "qppl: %s: reusing its finished windows (%s) and complete log-prob store (%s)\n", label, journalPath(sub), e.storePath(job.BaseKey))
			return rd, nil
		}
		if p := e.storePath(job.BaseKey); e.runs.contains(p) {
			if n, err := removeStaleTemps(p); err != nil {
				rd.close()
				return nil, err
			} else if n > 0 {
				fmt.Fprintf(e.runs.log, "qppl: %s: removed the unfinished log-prob store an interrupted run left (%s.tmp*)\n", label, p)
			}
		}
		if len(rd.done) > 0 {
			fmt.Fprintf(e.runs.log, "qppl: %s: its log-prob store is missing or was not finished: evaluating the base model again from its first window (%d journaled windows discarded)\n", label, len(rd.done))
			rd.close()
			if err := resetJournal(sub); err != nil {
				return nil, err
			}
			if rd, err = openRunDir(sub, id, d.Windows); err != nil {
				return nil, err
			}
		}
		return rd, nil
	}
	switch n := len(rd.done); {
	case n == len(d.Windows):
		fmt.Fprintf(e.runs.log, "qppl: %s: all %d windows already done (%s)\n", label, n, journalPath(sub))
	case n > 0:
		fmt.Fprintf(e.runs.log, "qppl: %s: resuming from %s: %d of %d windows already done\n", label, journalPath(sub), n, len(d.Windows))
	}
	return rd, nil
}
