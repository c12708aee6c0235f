package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/quant"
)

// quantizeOptions are the flags of `qppl quantize`.
type quantizeOptions struct {
	Model, Out, Scheme string
	Opt                quantizer.Options
}

func newQuantizeCmd() *cli.Command {
	var schemes []string
	for _, s := range quantizer.Schemes() {
		schemes = append(schemes, fmt.Sprintf("  %-15s %s", s, quantizer.Describe(s)))
	}
	return &cli.Command{
		Name:      "quantize",
		Usage:     "round-to-nearest quantize a dense checkpoint into a real packed layout (for fixtures and regression tests)",
		UsageText: "qppl quantize --model DIR --scheme S --out DIR [--seed N] [--quantize-head] [--group-size N]",
		Description: "Schemes:\n" + strings.Join(schemes, "\n") +
			"\n\nA group size larger than a Linear's input gives one partial group; otherwise it must divide in_features (AWQ: always).",
		Before: requireFlags("model", "scheme", "out"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "dense source model directory"},
			&cli.StringFlag{Name: "scheme", Usage: "quantization scheme (see the list above)"},
			&cli.StringFlag{Name: "out", Usage: "output directory"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random calibration activations and actorder importances"},
			&cli.BoolFlag{Name: "quantize-head", Usage: "quantize lm_head too (not with tied embeddings)"},
			&cli.IntFlag{Name: "group-size", Usage: "override the scheme's group size (group schemes only)", DefaultText: "the scheme's"},
		},
		Action: func(c *cli.Context) error {
			o := quantizeOptions{Model: c.String("model"), Out: c.String("out"), Scheme: c.String("scheme"),
				Opt: quantizer.Options{Seed: c.Uint64("seed"), QuantizeHead: c.Bool("quantize-head"), GroupSize: c.Int("group-size")}}
			return quantizeRun(c, o)
		},
	}
}

func quantizeRun(c *cli.Context, o quantizeOptions) error {
	if err := quantizer.Quantize(o.Model, o.Out, o.Scheme, o.Opt); err != nil {
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
