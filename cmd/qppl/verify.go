package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/verify"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/eval"
	"github.com/qppl/qppl/quant"
)

// verifyOptions are the flags of `qppl verify`.
type verifyOptions struct {
	Model    string
	Backends [2]string
	Backend  backendOptions // precision, gpus, gpu-split of the second backend
	Tokens   string
	Text     string
	Dataset  string
	Data     string
	Ctx      int
	Stride   int
	Windows  int
	Probe    int // --probe-windows
	JSON     string
	// TolerancePrecision is the precision the default tolerances are
	// chosen for (the second backend's; fp64 for the reference).
	TolerancePrecision string
	Tol                verify.Tolerances
	TolerancesGiven    map[string]float64 // tolerance flags given explicitly
}

func newVerifyCmd() *cli.Command {
	fl := func(name, usage string) cli.Flag {
		return &cli.Float64Flag{Name: name, Usage: usage, DefaultText: "by precision, see docs/cuda.md"}
	}
	return &cli.Command{
		Name:      "verify",
		Usage:     "compare two backends' numerics (NLL, KL, top-1, PPL, per-layer hidden states) on identical windows",
		UsageText: "qppl verify --model DIR [--backends reference,emu|cuda] [--rows N] [--ctx N] [--precision bf16|fp16|fp32] [--tokens FILE | --text FILE | --dataset wikitext2] [tolerances]",
		Before:    requireFlags("model"),
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "model directory or .gguf file"},
			&cli.StringFlag{Name: "backends", Value: "reference,emu", Usage: "two backends, the first emitting log-probs (reference)"},
			&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file"},
			&cli.StringFlag{Name: "text", Usage: "UTF-8 text, tokenized with the model's tokenizer.json"},
			&cli.StringFlag{Name: "dataset", Usage: "wikitext2"},
			&cli.StringFlag{Name: "data", Usage: "file for --dataset"},
			&cli.IntFlag{Name: "ctx", Value: 2048, Usage: "window length (as eval and compare)"},
			&cli.IntFlag{Name: "stride", Usage: "window stride", DefaultText: "ctx"},
			&cli.IntFlag{Name: "rows", Aliases: []string{"windows"}, Value: 2, Usage: "number of windows (--rows, as in eval and compare)"},
			&cli.IntFlag{Name: "probe-windows", Value: 1, Usage: "windows whose hidden states are compared (0: none)"},
			&cli.StringFlag{Name: "json", Usage: "write the report as JSON to this file"},
			fl("max-nll", "max |ΔNLL| per token"),
			fl("mean-nll", "mean |ΔNLL|"),
			fl("mean-kl", "mean KL(first ‖ second)"),
			fl("min-top1", "minimum top-1 agreement"),
			fl("ppl-rel", "max relative PPL difference"),
			fl("hidden-rel", "max relative L2 error of a hidden state"),
			fl("router-margin", "MoE: a token whose expert choice differs is set apart (not a failure) when the first backend's router margin is at most this"),
		}, backendFlags(backendFlagSet{kv: true, precision: "precision of the second backend: bf16 (default), fp16, fp32"})...),
		Action: func(c *cli.Context) error {
			bs := strings.Split(c.String("backends"), ",")
			if len(bs) != 2 || bs[0] == "" || bs[1] == "" {
				return usageErr(fmt.Errorf("--backends %q: want two backends, e.g. reference,emu", c.String("backends")))
			}
			o := verifyOptions{
				Model: c.String("model"), Backends: [2]string{strings.TrimSpace(bs[0]), strings.TrimSpace(bs[1])},
				Backend: backendFromFlags(c, c.Int("ctx")),
				Tokens:  c.String("tokens"), Text: c.String("text"), Dataset: c.String("dataset"), Data: c.String("data"),
				Ctx: c.Int("ctx"), Stride: c.Int("stride"), Windows: c.Int("rows"), Probe: c.Int("probe-windows"), JSON: c.String("json"),
			}
			// The tolerances follow the less precise backend: fp64 only
			// when both are the reference.
			prec := o.Backend.Precision
			if prec == "" {
				prec = "bf16"
			}
			if o.Backends[0] == "reference" && o.Backends[1] == "reference" {
				prec = "fp64"
			}
			o.TolerancePrecision = prec
			for _, name := range []string{"max-nll", "mean-nll", "mean-kl", "min-top1", "ppl-rel", "hidden-rel", "router-margin"} {
				if c.IsSet(name) {
					if o.TolerancesGiven == nil {
						o.TolerancesGiven = map[string]float64{}
					}
					v := c.Float64(name)
					if !(v >= 0) || name == "min-top1" && v > 1 {
						return usageErr(fmt.Errorf("verify: --%s %v: a tolerance is >= 0 (--min-top1: a fraction in [0, 1])", name, v))
					}
					o.TolerancesGiven[name] = v
				}
			}
			return runVerify(c.Context, o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// runVerify: model → tokens → windows → both backends → report → exit code.
func runVerify(ctx context.Context, o verifyOptions, stdout, stderr io.Writer) error {
	if err := o.check(); err != nil {
		return usageErr(err)
	}
	m, err := openLocalModel(o.Model, "")
	if err != nil {
		return usageErr(err)
	}
	defer m.Close()
	spec, err := arch.For(m.Config)
	if err != nil {
		return usageErr(err)
	}
	if o.Tol, err = o.tolerances(m.ckpt, spec); err != nil {
		return usageErr(err)
	}
	ws, err := verifyWindows(ctx, o, m, stderr)
	if err != nil {
		return err
	}
	kvState, kvScheme, err := kvCacheState(m.ckpt, o.Backend.KVCacheQuant)
	if err != nil {
		return err
	}
	if kvState != "" {
		fmt.Fprintf(stderr, "verify: KV cache %s (%s)\n", kvState, kvScheme)
	}
	var bes [2]backends.Backend
	for i, name := range o.Backends {
		bo := o.Backend
		bo.Name, bo.MaxTokens = name, o.Ctx
		if name == "reference" {
			bo.Precision = ""
		}
		b, err := m.openBackend(bo)
		if err != nil {
			return err
		}
		defer b.Close()
		bes[i] = b
	}
	if _, ok := bes[0].(backends.LogProber); !ok {
		return usageErr(fmt.Errorf("verify: %s cannot emit log-probs: put reference first", o.Backends[0]))
	}
	var router *verify.Router
	if spec.MoE != nil { // the routing-flip rule (compare/verify, Tolerances.RouterMargin)
		router = &verify.Router{TopK: spec.MoE.TopK}
		for i := 0; i < spec.Layers; i++ {
			if spec.Sparse(i) {
				router.Layers = append(router.Layers, i)
			}
		}
	}
	rep, err := verify.Run(ctx, bes[0], bes[1], ws, verify.Options{Tolerances: o.Tol, ProbeWindows: probeWindows(o.Probe), Layers: spec.Layers, Router: router, Progress: stderr})
	if err != nil {
		return err
	}
	rep.Write(summaryWriter(stdout, stderr, o.JSON))
	if o.JSON != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := writeOutput(o.JSON, stdout, func(w io.Writer) error {
			_, err := w.Write(append(b, '\n'))
			return err
		}); err != nil {
			return err
		}
	}
	if !rep.Pass {
		return &codedError{exitRegressed, errors.New("verify: differences beyond tolerance: " + strings.Join(rep.Failures, "; "))}
	}
	return nil
}

// verifyWindows cuts --windows windows of --ctx tokens (stride --stride)
// from the data (eval.Prepare, as eval reads it), or from deterministic
// synthetic ids when no data is given.
func verifyWindows(ctx context.Context, o verifyOptions, m *evalModel, stderr io.Writer) ([]backends.Window, error) {
	cfg := m.Config
	po := eval.PrepareOptions{
		Source:    eval.Source{Text: o.Text, Tokens: o.Tokens, Dataset: o.Dataset},
		Tokenizer: m.tokDir, Model: modelVocabulary(cfg, ""),
		Method: compare.MethodCompareQ, Ctx: o.Ctx, Stride: o.Stride, Rows: o.Windows,
		ResolveDataset: func(ctx context.Context, _ string) ([]string, error) {
			r, err := hub.ResolveWikiText(ctx, hub.WikiTextOptions{Data: o.Data, Progress: stderr})
			return r.Paths, err
		},
	}
	if o.Tokens == "" && o.Text == "" && o.Dataset == "" {
		// Deterministic synthetic ids: enough to exercise every kernel.
		n := o.Ctx + (o.Windows-1)*o.Stride + 1
		tokens := make([]int32, n)
		x := uint64(0x9E3779B97F4A7C15)
		for i := range tokens {
			x = x*6364136223846793005 + 1442695040888963407
			tokens[i] = int32((x >> 33) % uint64(cfg.VocabSize))
		}
		fmt.Fprintf(stderr, "verify: no --tokens/--text/--dataset: using %d deterministic synthetic token ids\n", n)
		ws, err := compare.Windows(tokens, compare.WindowOptions{Method: compare.MethodCompareQ, Ctx: o.Ctx, Stride: o.Stride, Rows: o.Windows, BOS: -1})
		if err != nil {
			return nil, usageErr(fmt.Errorf("verify: %w", err))
		}
		return ws, nil
	}
	po, err := m.withTokenizer(po)
	if err != nil {
		return nil, err
	}
	d, err := eval.Prepare(ctx, po)
	if err != nil {
		return nil, usageErr(fmt.Errorf("verify: %w", err))
	}
	return d.Windows, nil
}

// check validates the flags before anything is read.
func (o *verifyOptions) check() error {
	if o.Ctx < 2 {
		return fmt.Errorf("verify: --ctx %d: need at least 2", o.Ctx)
	}
	if o.Windows < 1 {
		return fmt.Errorf("verify: --rows %d: need at least one window", o.Windows)
	}
	if o.Stride == 0 {
		o.Stride = o.Ctx
	}
	if err := checkOutputDirs("verify", map[string]string{"json": o.JSON}, ""); err != nil {
		return err
	}
	if o.Backends[1] == "reference" {
		if err := o.Backend.checkDevices(); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	return nil
}

// tolerances are the defaults for the compared precision (and whether the
// checkpoint quantizes activations; m nil: a GGUF file, whose activations
// are not quantized), overridden by the tolerance flags.
func (o *verifyOptions) tolerances(m *checkpoint.Model, spec *arch.Spec) (verify.Tolerances, error) {
	act := false
	if m != nil {
		var err error
		if act, err = hasActQuant(m, spec); err != nil {
			return verify.Tolerances{}, err
		}
	}
	tol := verify.DefaultTolerances(o.TolerancePrecision, act)
	for name, dst := range map[string]*float64{"max-nll": &tol.MaxNLL, "mean-nll": &tol.MeanNLL, "mean-kl": &tol.MeanKL,
		"min-top1": &tol.MinTop1, "ppl-rel": &tol.PPLRel, "hidden-rel": &tol.HiddenRel, "router-margin": &tol.RouterMargin} {
		if v, ok := o.TolerancesGiven[name]; ok {
			*dst = v
		}
	}
	return tol, nil
}

func probeWindows(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// hasActQuant reports whether the checkpoint quantizes Linear inputs at run
// time (checked on layer 0's first Linear, as quantization_config applies to
// every decoder Linear of these formats).
func hasActQuant(m *checkpoint.Model, spec *arch.Spec) (bool, error) {
	sc, err := quant.Parse(m.Config)
	if err != nil {
		return false, err
	}
	if spec.Layers == 0 {
		return false, nil
	}
	l, err := sc.Linear(m, spec.LayerLinears(0)[0].Module) // q_proj, or a fused qkv_proj
	if err != nil {
		return false, err
	}
	return l.InputQuantizer() != nil, nil
}
