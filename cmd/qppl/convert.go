package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gguf"
)

// convertOptions are the flags of `qppl convert`.
type convertOptions struct {
	Model, Out, To, Type, Name string
}

func newConvertCmd() *cli.Command {
	return &cli.Command{
		Name:  "convert",
		Usage: "convert a dense checkpoint directory to GGUF (as convert_hf_to_gguf.py, then llama-quantize, write it)",
		UsageText: "qppl convert --model DIR --to gguf --out FILE.gguf [--type TYPE] [--name NAME]\n\n" +
			"The GGUF file has llama.cpp's tensor names and metadata (GGUF architecture (model_types): " + gguf.Architectures() + ";\n" +
			"llama with llama.cpp's Q/K row permutation; experts stacked into ffn_*_exps), the tokenizer's vocabulary as\n" +
			"tokenizer.ggml.*, and loads in libllama. f32 is exact for F32, BF16 and F16 checkpoints; f16 and bf16 round 2-D weights to\n" +
			"nearest even. A quantized type is llama.cpp's file type (" + fileTypeList() + "):\n" +
			"each 2-D weight gets the type llama-quantize gives it (Q4_K_M: Q6_K on the head and on some attn_v and\n" +
			"ffn_down tensors), quantized byte for byte as llama-quantize quantizes the f32 file (no importance matrix).",
		Before: requireFlags("model", "to", "out"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "dense model directory (config.json, safetensors, tokenizer.json)"},
			&cli.StringFlag{Name: "to", Usage: "output container: gguf"},
			&cli.StringFlag{Name: "out", Usage: "output file"},
			&cli.StringFlag{Name: "type", Value: "f32", Usage: "llama.cpp file type: f32, f16, bf16, or a quantized one (" + fileTypeList() + "); norms and biases stay f32"},
			&cli.StringFlag{Name: "name", Usage: "general.name", DefaultText: "the model directory's name"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("convert: unexpected argument %q", c.Args().First()))
			}
			o := convertOptions{Model: c.String("model"), Out: c.String("out"), To: c.String("to"), Type: c.String("type"), Name: c.String("name")}
			return convertRun(c, o)
		},
	}
}

func convertRun(c *cli.Context, o convertOptions) error {
	if o.To != "gguf" {
		return usageErr(fmt.Errorf("convert: --to %q (supported: gguf)", o.To))
	}
	ft, err := gguf.FileTypeByName(o.Type)
	if err != nil {
		return usageErr(fmt.Errorf("convert: --type %q: %w", o.Type, err))
	}
	if !strings.HasSuffix(strings.ToLower(o.Out), ".gguf") {
		return usageErr(fmt.Errorf("convert: --out %s: a GGUF file name ends in .gguf", o.Out))
	}
	if st, err := os.Stat(o.Out); err == nil && st.IsDir() {
		return usageErr(fmt.Errorf("convert: --out %s is a directory", o.Out))
	}
	if st, err := os.Stat(filepath.Dir(o.Out)); err != nil || !st.IsDir() {
		return usageErr(fmt.Errorf("convert: --out %s: directory %s does not exist", o.Out, filepath.Dir(o.Out)))
	}
	if err := gguf.ConvertFile(o.Model, o.Out, gguf.ConvertOptions{FileType: ft.Name, Name: o.Name}); err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrConfig) || errors.Is(err, checkpoint.ErrFormat) ||
			errors.Is(err, checkpoint.ErrUnsupported) || errors.Is(err, gguf.ErrUnsupported) || errors.Is(err, gguf.ErrFormat) {
			return usageErr(err)
		}
		return err
	}
	m, err := gguf.OpenModel(o.Out, gguf.Options{})
	if err != nil {
		return fmt.Errorf("convert: reading back %s: %w", o.Out, err)
	}
	defer m.Close()
	st, _ := os.Stat(o.Out)
	fmt.Fprintf(c.App.Writer, "wrote %s: %s (%s), %d tensors, %s, %d bytes\n", o.Out, m.Arch, m.Config.ModelType, len(m.TensorNames()), ft.Name, st.Size())
	return nil
}

// fileTypeList names the quantized file types convert writes.
func fileTypeList() string {
	var names []string // the quantized ones
	for _, ft := range gguf.FileTypes() {
		if ft.Default.BlockSize() > 1 {
			names = append(names, ft.Name)
		}
	}
	return strings.Join(names, ", ")
}
