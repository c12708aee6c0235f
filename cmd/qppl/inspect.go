package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/quant"
)

func newInspectCmd() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print each Linear's stored format and compare_q's bits-per-weight accounting",
		UsageText: "qppl inspect --model DIR|FILE.gguf [--json]",
		Before:    requireFlags("model"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "model directory or GGUF file"},
			&cli.BoolFlag{Name: "json", Usage: "write the report as JSON"},
		},
		Action: func(c *cli.Context) error {
			return inspectRun(c.App.Writer, c.String("model"), c.Bool("json"))
		},
	}
}

func inspectRun(w io.Writer, dir string, asJSON bool) error {
	if isGGUFPath(dir) {
		return inspectGGUF(w, dir, asJSON) // ggufmodel.go
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		return usageErr(err)
	}
	defer m.Close()
	r, err := quant.Inspect(m)
	if err != nil {
		return usageErr(err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return writeInspect(w, r)
}

// writeInspect prints a bpw report as a table and summary.
func writeInspect(w io.Writer, r *quant.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "module\tformat\tout\tin\tbytes\tbpw\t")
	for _, mi := range r.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f\t\n", mi.Module, mi.Format, mi.Out, mi.In, mi.Bytes, mi.BPW)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	head := r.Head
	if r.HeadTied {
		head += " (tied)"
	}
	fmt.Fprintf(w, "\nquant_method %s, format %s\n", r.Method, r.Format)
	fmt.Fprintf(w, "decoder layers: %.4f bpw (%d bytes / %d weights)\n", r.BPWLayer, r.LayerBytes, r.LayerWeights)
	fmt.Fprintf(w, "head %s: %s, %.4f bpw\n", head, r.HeadFormat, r.BPWHead)
	fmt.Fprintf(w, "VRAM estimate (head + layers): %.6f GB; tensors %d bytes, files %d bytes on disk\n", r.VRAMGB, r.TensorBytes, r.FileBytes)
	if r.KVCache != "" {
		fmt.Fprintf(w, "KV cache: %s (evaluated by default; --kv-cache-quant off for the weights alone)\n", r.KVCache)
	}
	return nil
}
