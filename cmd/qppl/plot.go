package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot/vg"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/plots"
)

// plotFlags are shared by `qppl plot` and `qppl compare --plot`.
func plotFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "x", Value: "bpw", Usage: "x axis: bpw (decoder bits per weight) or vram"},
		&cli.StringFlag{Name: "y", Value: "ppl", Usage: "y axis: ppl, kld, or kld-dist (per-model KLD distribution)"},
		&cli.BoolFlag{Name: "logy", Usage: "logarithmic y axis"},
		&cli.BoolFlag{Name: "errorbars", Usage: "draw 95% intervals: PPL window bootstrap (else ±1.96 SE), KLD ±1.96 SE"},
		&cli.StringFlag{Name: "title", Usage: "chart title"},
		&cli.StringFlag{Name: "subtitle", Usage: `chart subtitle (default: "<dataset>, <windows> × <ctx> tokens")`},
		&cli.Float64Flag{Name: "max-x", Usage: "do not plot results beyond this x value", DefaultText: "no limit"},
		&cli.Float64Flag{Name: "max-y", Usage: "do not plot results beyond this y value", DefaultText: "no limit"},
		&cli.StringFlag{Name: "mask", Usage: `keep only labels containing one of these ";"-separated substrings (case-insensitive)`},
		&cli.Float64Flag{Name: "width", Value: 12, Usage: "image width in inches"},
		&cli.Float64Flag{Name: "height", Usage: "image height in inches", DefaultText: "8; kld-dist grows with the model count"},
		&cli.IntFlag{Name: "dpi", Value: 144, Usage: "PNG resolution"},
	}
}

// plotOptions reads the plot flags.
func plotOptions(c *cli.Context) (plots.Options, error) {
	o := plots.Options{
		X:         plots.XAxis(c.String("x")),
		Y:         plots.YAxis(c.String("y")),
		LogY:      c.Bool("logy"),
		ErrorBars: c.Bool("errorbars"),
		Title:     c.String("title"),
		Subtitle:  c.String("subtitle"),
		MaxX:      c.Float64("max-x"),
		MaxY:      c.Float64("max-y"),
		Mask:      plots.ParseMask(c.String("mask")),
		Width:     vg.Length(c.Float64("width")) * vg.Inch,
		Height:    vg.Length(c.Float64("height")) * vg.Inch,
		DPI:       c.Int("dpi"),
	}
	switch o.X {
	case plots.XBPW, plots.XVRAM:
	default:
		return o, fmt.Errorf("--x %q: want bpw or vram", o.X)
	}
	switch o.Y {
	case plots.YPPL, plots.YKLD, plots.YKLDDist:
	default:
		return o, fmt.Errorf("--y %q: want ppl, kld or kld-dist", o.Y)
	}
	if o.Width <= 0 || o.Height < 0 || o.DPI <= 0 || o.MaxX < 0 || o.MaxY < 0 {
		return o, errors.New("--width, --dpi must be positive; --height, --max-x, --max-y non-negative")
	}
	return o, nil
}

// plotModels converts result sets into chart points; labels must be unique
// across sets.
func plotModels(sets []*suite.ResultSet, names []string) ([]plots.Model, error) {
	var out []plots.Model
	seen := map[string]string{}
	for i, rs := range sets {
		for _, r := range rs.Results {
			label := plots.ResultLabel(r)
			if prev, dup := seen[label]; dup {
				return nil, fmt.Errorf("label %q appears in %s and %s: relabel one of them", label, prev, names[i])
			}
			seen[label] = names[i]
			name := r.Label // the result set's name of the model
			if name == "" {
				name = r.Model
			}
			r.Label = label
			out = append(out, plots.FromResult(r, rs.Base != "" && name == rs.Base))
		}
	}
	return out, nil
}

// defaultSubtitle describes the data of a result set as compare_q does; the
// KL coverage note only on KLD charts. A result set that does not describe
// its data (compare_q's printed list) gets no data part.
func defaultSubtitle(rs *suite.ResultSet, y plots.YAxis) string {
	ctx := rs.Data.Ctx
	if ctx == 0 && len(rs.Results) > 0 {
		ctx = rs.Results[0].Ctx
	}
	var extra []string
	if m := rs.Data.Method; m != "" && m != string(compare.MethodCompareQ) {
		extra = append(extra, "method "+m)
	}
	if rs.KLMode == string(compare.KLCompareQ) && y != plots.YPPL && y != "" {
		extra = append(extra, "KLD over the first 10 windows")
	}
	if ctx == 0 && rs.Windows() == 0 {
		return strings.Join(extra, ", ")
	}
	return plots.Subtitle(shortDataName(rs.DisplayName()), rs.Windows(), ctx, extra...)
}

// savePlot renders the result sets to path and reports dropped points.
func savePlot(path string, sets []*suite.ResultSet, names []string, o plots.Options, stderr io.Writer) error {
	models, err := plotModels(sets, names)
	if err != nil {
		return usageErr(err)
	}
	if o.Subtitle == "" && len(sets) > 0 {
		o.Subtitle = defaultSubtitle(sets[0], o.Y)
		for _, rs := range sets[1:] {
			if rs.DataSpecHash != sets[0].DataSpecHash {
				fmt.Fprintf(stderr, "qppl: warning: %s was evaluated on other data than %s; its points are not comparable\n", names[len(names)-1], names[0])
				break
			}
		}
	}
	if o.Title == "" && len(sets) == 1 && sets[0].Base != "" {
		// Name the chart after the base model: "<dir>: <default title>".
		if r, ok := sets[0].Find(sets[0].Base); ok && r.Model != "" {
			x, y := o.X, o.Y
			if x == "" {
				x = plots.XBPW
			}
			if y == "" {
				y = plots.YPPL
			}
			o.Title = filepath.Base(filepath.Clean(r.Model)) + ": " + plots.DefaultTitle(x, y)
		}
	}
	rep, err := plots.Save(path, models, o)
	if err != nil {
		return usageErr(err)
	}
	for _, d := range rep.Dropped {
		fmt.Fprintf(stderr, "qppl: plot: not drawn: %s\n", d)
	}
	for _, d := range rep.Clamped {
		fmt.Fprintf(stderr, "qppl: plot: %s\n", d)
	}
	if rep.Overlaps > 0 {
		fmt.Fprintf(stderr, "qppl: plot: %d labels could not avoid overlapping (try --mask, --max-x/--max-y or a larger --width)\n", rep.Overlaps)
	}
	return nil
}

func newPlotCmd() *cli.Command {
	flags := append([]cli.Flag{
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output image (.png, .svg or .pdf); required"},
		&cli.BoolFlag{Name: "allow-mixed-data", Usage: "plot result files evaluated on different data (refused by default: their points are not comparable)"},
	}, plotFlags()...)
	cmd := &cli.Command{
		Name:      "plot",
		Usage:     "chart result sets: bits per weight (or VRAM) against perplexity or KL divergence",
		ArgsUsage: "RESULTS.json... --out FILE",
		Description: `Reads result files written by "qppl compare --json" (or "qppl eval --json",
or compare_q's printed result list) and draws a compare_q-style chart:
one colour per format family (the label's first word, or a "[colour]" tag),
points of a family that differ only in weight bits joined by a dotted line,
every point labelled; a log value axis when the values span more than two
decades. Files evaluated on different data are refused (--allow-mixed-data).
The format follows the extension of --out: .png, .svg or .pdf.
Flags may come before or after the result files.`,
		Flags:  flags,
		Action: plotAction,
	}
	return interspersed(cmd)
}

func plotAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageErr(errors.New("plot: give at least one results file"))
	}
	if c.String("out") == "" {
		return usageErr(errors.New("plot: --out FILE (.png, .svg or .pdf) is required"))
	}
	o, err := plotOptions(c)
	if err != nil {
		return usageErr(fmt.Errorf("plot: %w", err))
	}
	if _, err := plots.FormatOf(c.String("out")); err != nil {
		return usageErr(err)
	}
	if err := checkOutputDirs("plot", map[string]string{"out": c.String("out")}, ""); err != nil {
		return usageErr(err)
	}
	var sets []*suite.ResultSet
	for _, p := range c.Args().Slice() {
		rs, err := suite.LoadResults(p)
		if err != nil {
			return usageErr(err)
		}
		sets = append(sets, rs)
	}
	if err := checkSameData(sets, c.Args().Slice(), c.Bool("allow-mixed-data")); err != nil {
		return usageErr(fmt.Errorf("plot: %w", err))
	}
	if err := savePlot(c.String("out"), sets, c.Args().Slice(), o, c.App.ErrWriter); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s\n", c.String("out"))
	return nil
}

// interspersed lets cmd take flags after its positional arguments (urfave/cli
// v2 stops parsing flags at the first argument): the command parses nothing
// itself and runs a one-command app over the arguments reordered as flags
// first, then "--", then the positional arguments.
func interspersed(cmd *cli.Command) *cli.Command {
	flags, action := cmd.Flags, cmd.Action
	boolFlag := map[string]bool{"help": true, "h": true}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolFlag[n] = true
			}
		}
	}
	cmd.SkipFlagParsing = true
	cmd.Flags = nil // parsed by the inner app
	cmd.Action = func(c *cli.Context) error {
		var opts, pos []string
		ran := false
		args := c.Args().Slice()
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				pos = append(pos, args[i+1:]...)
				i = len(args)
			case len(a) > 1 && a[0] == '-':
				opts = append(opts, a)
				name := strings.TrimLeft(a, "-")
				if !strings.Contains(name, "=") && !boolFlag[name] && i+1 < len(args) {
					opts = append(opts, args[i+1])
					i++
				}
			default:
				pos = append(pos, a)
			}
		}
		sub := &cli.App{
			Name:        c.App.Name + " " + cmd.Name,
			Usage:       cmd.Usage,
			UsageText:   c.App.Name + " " + cmd.Name + " [flags] " + cmd.ArgsUsage,
			Description: cmd.Description,
			Flags:       flags,
			Action: func(c *cli.Context) error {
				ran = true
				return action(c)
			},
			Reader:          c.App.Reader,
			Writer:          c.App.Writer,
			ErrWriter:       c.App.ErrWriter,
			ExitErrHandler:  func(*cli.Context, error) {},
			OnUsageError:    onUsageError(cmd.Name),
			HideHelpCommand: true,
			// a command's help, though an app runs it: "OPTIONS", not "GLOBAL OPTIONS"
			CustomAppHelpTemplate: strings.ReplaceAll(cli.AppHelpTemplate, "GLOBAL OPTIONS:", "OPTIONS:"),
		}
		err := sub.RunContext(c.Context, append(append(append([]string{sub.Name}, opts...), "--"), pos...))
		if err != nil && !ran {
			return usageErr(err) // a flag the inner app could not parse
		}
		return err
	}
	return cmd
}
