package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
)

// fixtureOptions are the flags of `qppl fixture`.
type fixtureOptions struct {
	Out    string
	Preset string
	Opts   fixtures.Options
}

func newFixtureCmd() *cli.Command {
	return &cli.Command{
		Name:      "fixture",
		Usage:     "write a tiny deterministic model in Hugging Face layout (bigram-initialised on the demo text, or random)",
		UsageText: "qppl fixture --arch " + strings.Join(fixtures.Architectures(), "|") + " [--seed N] --out DIR [--vocab N --hidden N --intermediate N --layers N --heads N --kv-heads N --head-dim N --max-pos N --dtype f32|bf16 --tied --init random|bigram --mxfp4-experts]\n   qppl fixture --preset smollm2 --out DIR",
		Before: func(c *cli.Context) error {
			if c.Bool("list-archs") {
				return nil
			}
			return requireFlags("out")(c)
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "arch", Value: "llama", Usage: "model_type: " + strings.Join(fixtures.Architectures(), ", ")},
			&cli.BoolFlag{Name: "list-archs", Usage: "print the architectures (one model_type a line) and exit (make gpu-check's default GPU_CHECK_ARCHS)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed (same options → byte-identical files)"},
			&cli.StringFlag{Name: "out", Usage: "output directory (created if needed)"},
			&cli.StringFlag{Name: "preset", Usage: "smollm2: SmolLM2-135M shape (vocab 49152, hidden 576, 30 layers, BF16); size flags still override"},
			&cli.IntFlag{Name: "vocab", Usage: "vocabulary size", DefaultText: "512"},
			&cli.IntFlag{Name: "hidden", Usage: "hidden size", DefaultText: "64"},
			&cli.IntFlag{Name: "intermediate", Usage: "MLP size", DefaultText: "128"},
			&cli.IntFlag{Name: "layers", Usage: "decoder layers", DefaultText: "2"},
			&cli.IntFlag{Name: "heads", Usage: "attention heads", DefaultText: "4"},
			&cli.IntFlag{Name: "kv-heads", Usage: "key/value heads", DefaultText: "2"},
			&cli.IntFlag{Name: "head-dim", Usage: "head dimension", DefaultText: fixtureDefaultText(func(o fixtures.Options) string { return strconv.Itoa(o.HeadDim) })},
			&cli.IntFlag{Name: "max-pos", Usage: "max_position_embeddings", DefaultText: "2048"},
			&cli.StringFlag{Name: "dtype", Usage: "f32 or bf16", DefaultText: "f32"},
			&cli.BoolFlag{Name: "tied", Usage: "tie_word_embeddings (--tied=false to untie)", DefaultText: fixtureDefaultText(func(o fixtures.Options) string { return strconv.FormatBool(o.Tied) })},
			&cli.BoolFlag{Name: "mxfp4-experts", Usage: "gpt_oss: store the experts as the published MXFP4 layout (mlp.experts.*_blocks/_scales, quantization_config quant_method mxfp4)"},
			&cli.StringFlag{Name: "config", Usage: "a JSON object of config.json keys overriding the fixture's (e.g. '{\"num_experts\": 64}'); tensor shapes follow"},
			&cli.StringFlag{Name: "variant", Usage: "a variant of the architecture's fixture (gemma4_text: moe, the 26B-A4B kind with experts beside the dense MLP)"},
			&cli.StringFlag{Name: "experts", Usage: "how a mixture of experts is stored: fused (3-D experts.gate_up_proj/down_proj, as transformers ≥ 5 and the Gemma 4 / Qwen3.5 BF16 releases) or per-expert (experts.{e}.*_proj)", DefaultText: "the family's release layout: fused for gemma4_text, per-expert otherwise"},
			&cli.StringFlag{Name: "init", Usage: "random, or bigram: build the model to compute a bigram model of the demo text, for a realistic PPL and KL", DefaultText: "bigram when vocab ≤ 2048 and, for a tied head, intermediate ≥ hidden; random otherwise"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("list-archs") {
				if c.NumFlags() > 1 {
					return usageErr(errors.New("fixture: --list-archs takes no other flag"))
				}
				for _, a := range fixtures.Architectures() {
					fmt.Fprintln(c.App.Writer, a)
				}
				return nil
			}
			o, err := fixtureOptionsFrom(c)
			if err != nil {
				return usageErr(err)
			}
			return fixtureRun(c, o)
		},
	}
}

// fixtureDefaultText describes a per-architecture default of the fixture
// options: "16; qwen3: 32" (the most common value, then the exceptions).
func fixtureDefaultText(val func(fixtures.Options) string) string {
	count := map[string]int{}
	vals := map[string]string{}
	for _, a := range fixtures.Architectures() {
		if o, err := fixtures.Defaults(a); err == nil {
			vals[a] = val(o)
			count[vals[a]]++
		}
	}
	common := ""
	for _, a := range fixtures.Architectures() {
		if v := vals[a]; count[v] > count[common] {
			common = v
		}
	}
	text := common
	for _, a := range fixtures.Architectures() {
		if vals[a] != common {
			text += "; " + a + ": " + vals[a]
		}
	}
	return text
}

// fixtureOptionsFrom turns flags into options: the architecture's (or the
// preset's) defaults, overridden by every flag that was set.
func fixtureOptionsFrom(c *cli.Context) (fixtureOptions, error) {
	fo := fixtureOptions{Out: c.String("out"), Preset: c.String("preset")}
	var o fixtures.Options
	switch fo.Preset {
	case "":
		var err error
		if o, err = fixtures.Defaults(c.String("arch")); err != nil {
			return fo, fmt.Errorf("fixture: --arch: %w", err)
		}
	case "smollm2":
		if c.IsSet("arch") && c.String("arch") != "llama" {
			return fo, errors.New("fixture: --preset smollm2 is a llama architecture; drop --arch")
		}
		o = fixtures.SmolLM2Shaped()
	default:
		return fo, fmt.Errorf("fixture: unknown --preset %q (supported: smollm2)", fo.Preset)
	}
	o.Seed = c.Uint64("seed")
	for _, f := range []struct {
		name string
		dst  *int
	}{
		{"vocab", &o.Vocab}, {"hidden", &o.Hidden}, {"intermediate", &o.Intermediate},
		{"layers", &o.Layers}, {"heads", &o.Heads}, {"kv-heads", &o.KVHeads},
		{"head-dim", &o.HeadDim}, {"max-pos", &o.MaxPos},
	} {
		if c.IsSet(f.name) {
			*f.dst = c.Int(f.name)
		}
	}
	if c.IsSet("dtype") {
		switch strings.ToLower(c.String("dtype")) {
		case "f32", "float32":
			o.DType = checkpoint.F32
		case "bf16", "bfloat16":
			o.DType = checkpoint.BF16
		default:
			return fo, fmt.Errorf("fixture: --dtype %q must be f32 or bf16", c.String("dtype"))
		}
	}
	if c.IsSet("tied") {
		o.Tied = c.Bool("tied")
	}
	o.MXFP4Experts = c.Bool("mxfp4-experts")
	o.Variant, o.Experts = c.String("variant"), c.String("experts")
	if c.IsSet("config") {
		if err := json.Unmarshal([]byte(c.String("config")), &o.Config); err != nil || o.Config == nil {
			return fo, fmt.Errorf("fixture: --config %q is not a JSON object: %v", c.String("config"), err)
		}
	}
	if c.IsSet("init") {
		o.Init = c.String("init")
	} else if o.Vocab > 2048 || (o.Tied && (o.Hidden < 6 || o.Intermediate < o.Hidden)) {
		o.Init = fixtures.InitRandom // sizes the bigram construction cannot take
	}
	if err := o.Validate(); err != nil {
		return fo, err
	}
	fo.Opts = o
	return fo, nil
}

func fixtureRun(c *cli.Context, fo fixtureOptions) error {
	if err := makeOutDir("fixture", "out", fo.Out); err != nil {
		return err
	}
	if err := fixtures.Write(fo.Out, fo.Opts); err != nil {
		return err
	}
	o := fo.Opts
	init := o.Init
	if init == "" {
		init = fixtures.InitRandom
	}
	arch := o.Arch
	if o.Variant != "" {
		arch += " (" + o.Variant + ")"
	}
	fmt.Fprintf(c.App.Writer, "wrote %s fixture to %s: vocab %d, hidden %d, %d layers, %d/%d heads, %s, %s init, %d parameters, seed %d\n",
		arch, fo.Out, o.Vocab, o.Hidden, o.Layers, o.Heads, o.KVHeads, o.DType, init, o.Params(), o.Seed)
	return nil
}
