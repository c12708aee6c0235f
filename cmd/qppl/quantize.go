package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/quant"
	"github.com/qppl/qppl/reference"
)

// quantizeOptions are the flags of `qppl quantize`.
type quantizeOptions struct {
	Model, Out, Scheme string
	Opt                quantizer.Options
	GroupSizeSet       bool
	Force              bool // --force: replace the files of a non-empty --out
	KVCache            string
}

func newQuantizeCmd() *cli.Command {
	var schemes []string
	for _, s := range quantizer.Schemes() {
		schemes = append(schemes, fmt.Sprintf("  %-15s %s", s, quantizer.Describe(s)))
	}
	return &cli.Command{
		Name:      "quantize",
		Usage:     "round-to-nearest quantize a dense checkpoint into a real packed layout (for fixtures and regression tests)",
		UsageText: "qppl quantize --model DIR --scheme S --out DIR [--seed N] [--quantize-head] [--group-size N] [--kv-cache fp8|fp8-head]",
		Description: "Schemes:\n" + strings.Join(schemes, "\n") +
			"\n\nA group size larger than a Linear's input gives one partial group; otherwise it must divide in_features (AWQ: always)." +
			"\n\nGGUF quants (Q8_0, Q4_K_M, IQ4_XS, ...) are written by qppl convert --to gguf --type TYPE.",
		Before: requireFlags("model", "scheme", "out"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "dense source model directory"},
			&cli.StringFlag{Name: "scheme", Usage: "quantization scheme (see the list above)"},
			&cli.StringFlag{Name: "out", Usage: "output directory"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random calibration activations and actorder importances"},
			&cli.BoolFlag{Name: "quantize-head", Usage: "quantize lm_head too (not with tied embeddings)"},
			&cli.IntFlag{Name: "group-size", Usage: "override the scheme's group size (group schemes only)", DefaultText: "the scheme's"},
			&cli.StringFlag{Name: "kv-cache", Usage: "fp8 or fp8-head: also write an FP8 KV cache scheme with static per-tensor (fp8) or per-head (fp8-head, compressed-tensors attn_head) k/v scales, calibrated with the reference backend on seeded random token windows (compressed-tensors and ModelOpt schemes)"},
			&cli.BoolFlag{Name: "force", Usage: "replace the files of a non-empty --out (stale shards and indexes would otherwise mix with the new model)"},
		},
		Action: func(c *cli.Context) error {
			o := quantizeOptions{Model: c.String("model"), Out: c.String("out"), Scheme: c.String("scheme"),
				Opt:          quantizer.Options{Seed: c.Uint64("seed"), QuantizeHead: c.Bool("quantize-head"), GroupSize: c.Int("group-size")},
				GroupSizeSet: c.IsSet("group-size"), Force: c.Bool("force"), KVCache: c.String("kv-cache")}
			return quantizeRun(c, o)
		},
	}
}

func quantizeRun(c *cli.Context, o quantizeOptions) error {
	if ft, err := gguf.FileTypeByName(o.Scheme); err == nil && ft.Default.BlockSize() > 1 {
		return usageErr(fmt.Errorf("quantize: --scheme %s is a llama.cpp GGUF file type: qppl convert --model %s --to gguf --type %s --out FILE.gguf writes it", o.Scheme, o.Model, ft.Name))
	}
	if o.GroupSizeSet && o.Opt.GroupSize < 1 {
		return usageErr(fmt.Errorf("quantize: --group-size %d: must be a positive number of input columns", o.Opt.GroupSize))
	}
	if o.KVCache != "" {
		if o.KVCache != quantizer.KVCacheFP8 && o.KVCache != quantizer.KVCacheFP8Head {
			return usageErr(fmt.Errorf("quantize: --kv-cache %q: want fp8 or fp8-head", o.KVCache))
		}
		amax, err := calibrateKV(c.Context, o.Model, o.Opt.Seed)
		if err != nil {
			return usageErr(fmt.Errorf("quantize: --kv-cache: calibration: %w", err))
		}
		o.Opt.KVCache, o.Opt.KVAmax = o.KVCache, amax
	}
	created, err := prepareOutDir(o.Out, o.Force)
	if err != nil {
		if created {
			os.RemoveAll(o.Out)
		}
		return usageErr(err)
	}
	if err := quantizer.Quantize(o.Model, o.Out, o.Scheme, o.Opt); err != nil {
		if created { // a failed run leaves no empty or partial directory behind
			os.RemoveAll(o.Out)
		}
		return usageErr(err)
	}
	m, err := arch.OpenDir(o.Out)
	if err != nil {
		return err
	}
	defer m.Close()
	r, err := quant.Inspect(m)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (%s) to %s: %s, %.4f bpw (decoder layers), head %.2f bpw, %d bytes on disk\n",
		o.Scheme, quantizer.Describe(o.Scheme), o.Out, r.Format, r.BPWLayer, r.BPWHead, r.FileBytes)
	return nil
}

// prepareOutDir makes --out ready for a new model: a directory that does
// not exist yet is created (created = true, removed again if the run
// fails); an existing one must be empty, or --force removes its files (a
// directory holding subdirectories is never cleared); its parent must be
// writable.
func prepareOutDir(out string, force bool) (created bool, err error) {
	ents, err := os.ReadDir(out)
	switch {
	case os.IsNotExist(err):
		return true, makeOutDir("quantize", "out", out)
	case err != nil:
		return false, fmt.Errorf("quantize: --out %s: %w", out, err)
	case len(ents) == 0:
		if err := probeWritable(out); err != nil {
			return false, fmt.Errorf("quantize: --out %s: cannot write in it: %v", out, err)
		}
		return false, nil
	case !force:
		return false, fmt.Errorf("quantize: --out %s is not empty (%d entries): stale shards or indexes would mix with the new model; use an empty directory, or --force to replace its files", out, len(ents))
	}
	for _, e := range ents {
		if e.IsDir() {
			return false, fmt.Errorf("quantize: --out %s holds the directory %s: --force replaces model files only; use an empty directory", out, e.Name())
		}
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
			return false, fmt.Errorf("quantize: --force: %w", err)
		}
	}
	return false, nil
}

// calibrateKV runs the dense model in dir through the reference backend on
// four seeded windows of 128 random token ids and returns every layer's
// largest |key| (after RoPE) and |value|: the static min-max calibration
// llm-compressor's and ModelOpt's KV cache quantization runs on real text
// (random ids stand in for a calibration set here).
func calibrateKV(ctx context.Context, dir string, seed uint64) ([][2][]float64, error) {
	m, err := arch.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b76))
	var ws [][]int32
	for range 4 {
		w := make([]int32, 128)
		for i := range w {
			w[i] = int32(rng.IntN(m.Config.VocabSize))
		}
		ws = append(ws, w)
	}
	return reference.CalibrateKV(ctx, m, ws)
}
