package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/atomicfile"
)

// demoScheme is one quantization of the demo model and its plot label
// (first word = format family, so each family gets one colour). A gguf
// scheme is a llama.cpp file type written by qppl convert (package gguf's
// quantizer, byte for byte llama-quantize's); the others are qppl quantize
// schemes (safetensors checkpoints).
type demoScheme struct {
	scheme, label string
	gguf          bool
}

// demoSchemes are the formats the demo compares, from most to fewest bits.
var demoSchemes = []demoScheme{
	{scheme: "W8A16", label: "INT8 W8A16 channel"},
	{scheme: "FP8-DYNAMIC", label: "FP8 dynamic"},
	{scheme: "FP8-BLOCK", label: "FP8 block 128x128"},
	{scheme: "W8A8", label: "INT8 W8A8"},
	{scheme: "Q8_0", label: "GGUF Q8_0", gguf: true},
	{scheme: "Q4_K_M", label: "GGUF Q4_K_M", gguf: true},
	{scheme: "W4A16-G32", label: "INT4 W4A16 g32"},
	{scheme: "W4A16", label: "INT4 W4A16 g128"},
	{scheme: "GPTQ", label: "GPTQ int4 g128"},
	{scheme: "AWQ", label: "AWQ int4 g128"},
	{scheme: "NVFP4A16", label: "NVFP4 W4A16"},
	{scheme: "BNB-NF4", label: "bitsandbytes NF4"},
	{scheme: "NVFP4", label: "NVFP4 W4A4"},
	{scheme: "MODELOPT-NVFP4", label: "ModelOpt NVFP4 W4A4"},
	{scheme: "IQ4_XS", label: "GGUF IQ4_XS", gguf: true},
	{scheme: "MXFP4", label: "MXFP4 W4A16"},
}

func newDemoCmd() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "write an embedded fixture model, quantize it in several formats and compare them (no download)",
		Description: `The main job end to end on data that ships inside the binary: a small
Llama-architecture model (BF16, bigram-initialised on the embedded demo text)
is written to --out, quantized with every format of the demo table, and
every quantization is evaluated with the reference backend on the embedded
text, with KL divergence against the BF16 base. It prints the table of
bits per weight, perplexity and KLD. With --out DIR it keeps the models and
writes DIR/results.json and DIR/kld.png; without it, it works in a temporary
directory that it removes at the end, and prints the table only.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "keep the models, results.json and kld.png in this directory (default: a temporary directory, removed at the end: the table only)"},
			&cli.IntFlag{Name: "ctx", Value: 256, Usage: "window length"},
			&cli.IntFlag{Name: "stride", Value: 128, Usage: "window stride"},
			&cli.IntFlag{Name: "rows", Value: 32, Usage: "at most this many windows (0 = all)"},
		}, backendFlags(backendFlagSet{name: true})...),
		Action: runDemo,
	}
}

// runDemo builds the demo inputs, then runs exactly what a user would type:
// qppl compare --base BASE --model Q --label L ... --text demo.txt.
func runDemo(c *cli.Context) error {
	stderr := c.App.ErrWriter
	dir := c.String("out")
	keep := dir != ""
	if !keep {
		d, err := os.MkdirTemp("", "qppl-demo-")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		dir = d
		defer os.RemoveAll(dir)
		fmt.Fprintf(stderr, "demo: working in a temporary directory, removed at the end (--out DIR keeps the models, results.json and kld.png)\n")
	} else if err := makeOutDir("demo", "out", dir); err != nil {
		return err
	} else {
		fmt.Fprintf(stderr, "demo: writing models and results to %s\n", dir)
	}

	o, err := fixtures.Defaults("mistral")
	if err != nil {
		return err
	}
	// Big enough for group-128 formats and for llama.cpp's 256-value
	// super-blocks (Q4_K, Q6_K, IQ4_XS need Linear input widths that are
	// multiples of 256, else llama-quantize falls back to 32-value types),
	// small enough for a quick float64 run.
	o.Hidden, o.Intermediate, o.Heads, o.HeadDim, o.DType = 256, 512, 8, 32, checkpoint.BF16
	// Full attention, as Mistral-7B-v0.2 and later: the test fixture's
	// 32-token window is there to exercise sliding windows, not the demo.
	o.Config = map[string]any{"sliding_window": nil}
	base := filepath.Join(dir, "base-bf16")
	if err := fixtures.Write(base, o); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	text := filepath.Join(dir, "demo.txt")
	if err := atomicfile.WriteBytes(text, []byte(fixtures.DemoText()), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	args := []string{"qppl", "compare",
		"--base", base, "--base-label", "BF16 base",
		"--text", text,
		"--ctx", strconv.Itoa(c.Int("ctx")), "--stride", strconv.Itoa(c.Int("stride")), "--rows", strconv.Itoa(c.Int("rows")),
		"--backend", c.String(flagBackend),
		"--cache-dir", filepath.Join(dir, "cache"),
	}
	if keep {
		args = append(args, "--json", filepath.Join(dir, "results.json"),
			"--plot", filepath.Join(dir, "kld.png"), "--y", "kld",
			"--title", "qppl demo: embedded fixture, KL divergence vs bits per weight")
	}
	for _, f := range []string{flagPrecision, flagGPUs, flagGPUSplit} { // passed on when given
		if c.IsSet(f) {
			args = append(args, "--"+f, c.String(f))
		}
	}
	ggufDir := filepath.Join(dir, "gguf")
	ggufOK, ggufProbed := true, false
	for _, s := range demoSchemes {
		out := filepath.Join(dir, strings.ToLower(s.scheme))
		if s.gguf {
			if !ggufOK {
				continue
			}
			out = filepath.Join(ggufDir, strings.ToLower(s.scheme)+".gguf")
			if err := demoGGUF(base, ggufDir, out, s.scheme); err != nil {
				return err
			}
			if !ggufProbed {
				ggufProbed = true
				if err := demoBackendReadsGGUF(c, out); err != nil {
					ggufOK = false
					fmt.Fprintf(stderr, "demo: leaving out the GGUF points: %v\n", err)
					continue
				}
			}
		} else if err := quantizer.Quantize(base, out, s.scheme, quantizer.Options{Seed: 1}); err != nil {
			return fmt.Errorf("demo: quantizing %s: %w", s.scheme, err)
		}
		args = append(args, "--model", out, "--label", s.label)
	}
	if keep { // the command the user can run again on the kept models
		fmt.Fprintf(stderr, "demo: %s\n", shellQuote(args))
	}
	return newApp(c.App.Reader, c.App.Writer, c.App.ErrWriter).RunContext(c.Context, args)
}

// demoGGUF writes the base as a GGUF file of llama.cpp file type ft (what
// qppl convert --to gguf --type FT writes), with the base's tokenizer
// files beside it in dir, where qppl finds the tokenizer of a .gguf model.
func demoGGUF(base, dir, out, ft string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(base, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = atomicfile.WriteBytes(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if err := gguf.ConvertFile(base, out, gguf.ConvertOptions{FileType: ft}); err != nil {
		return fmt.Errorf("demo: converting to GGUF %s: %w", ft, err)
	}
	return nil
}

// demoBackendReadsGGUF opens the GGUF file path with the chosen backend
// when it is not the reference (which always reads GGUF; its errors are
// the run's): a backend that cannot score GGUF files leaves the demo's
// GGUF points out instead of failing halfway through the comparison.
func demoBackendReadsGGUF(c *cli.Context, path string) error {
	if name := c.String(flagBackend); name == "" || name == "reference" {
		return nil
	}
	m, err := openLocalModel(path, "")
	if err != nil {
		return err
	}
	defer m.Close()
	b, err := m.openBackend(backendFromFlags(c, c.Int("ctx")))
	if err != nil {
		return err
	}
	return b.Close()
}
