package main

import (
	"errors"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/eval"
)

// mergeOptions are the flags of `qppl merge`.
type mergeOptions struct {
	Dirs   []string
	JSON   string
	NLLOut string
}

func newMergeCmd() *cli.Command {
	return interspersed(&cli.Command{ // flags before or after the directories (plot.go)
		Name:      "merge",
		Usage:     "combine the run directories of the shards of one run (eval --shard I/N --run-dir DIR) into its result",
		ArgsUsage: "DIR...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "json", Usage: "write the result JSON to this file"},
			&cli.StringFlag{Name: "nll-out", Usage: "write every scored token's NLL (float64 LE, window order)"},
		},
		Action: func(c *cli.Context) error {
			o := mergeOptions{Dirs: c.Args().Slice(), JSON: c.String("json"), NLLOut: c.String("nll-out")}
			return runMerge(o, c.App.Writer, c.App.ErrWriter)
		},
	})
}

// runMerge reads every shard journal, checks that they belong to one run
// and hold every window exactly once (eval.Merge), and reduces them as
// eval does.
func runMerge(o mergeOptions, stdout, stderr io.Writer) error {
	if len(o.Dirs) == 0 {
		return usageErr(errors.New("merge: give the run directories of the shards (qppl merge DIR... [--json OUT])"))
	}
	if err := checkOutputDirs("merge", map[string]string{"json": o.JSON, "nll-out": o.NLLOut}, ""); err != nil {
		return usageErr(err)
	}
	id, ws, err := eval.Merge(o.Dirs)
	if err != nil {
		return err
	}
	res, err := eval.Reduce(ws, id)
	if err != nil {
		return err
	}
	var werr error // the summary is printed even when a file cannot be written
	if o.JSON != "" {
		werr = writeResultTo(o.JSON, stdout, &res)
	}
	if o.NLLOut != "" && werr == nil {
		werr = compare.WriteNLL(o.NLLOut, ws)
	}
	return errors.Join(werr, compare.WriteSummary(summaryWriter(stdout, stderr, o.JSON), &res))
}
