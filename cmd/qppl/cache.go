package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare/suite"
)

// cacheOptions are the flags of `qppl cache ls|rm|prune`.
type cacheOptions struct {
	Dir       string
	Keys      []string      // rm: key prefixes
	OlderThan time.Duration // prune: 0 = any age
	MaxSize   int64         // prune: -1 = any size
}

var cacheDirFlag = &cli.StringFlag{Name: "cache-dir", Usage: "the cache of qppl compare", DefaultText: "$XDG_CACHE_HOME/qppl (os.UserCacheDir)"}

func newCacheCmd() *cli.Command {
	action := func(sub string) cli.ActionFunc {
		return func(c *cli.Context) error {
			o, err := cacheOptionsFrom(c, sub)
			if err != nil {
				return err
			}
			return runCache(sub, o, c.App.Writer)
		}
	}
	return &cli.Command{
		Name:  "cache",
		Usage: "list, remove or prune qppl compare's cache (results, base log-prob stores, token streams)",
		Subcommands: usageErrors([]*cli.Command{
			{Name: "ls", Usage: "list the entries: kind, key, size, model, data, date (oldest first)", Flags: []cli.Flag{cacheDirFlag}, Action: action("ls")},
			{Name: "rm", Usage: "remove the entries whose key starts with each KEY (at least 4 characters)", ArgsUsage: "KEY...", Flags: []cli.Flag{cacheDirFlag}, Action: action("rm")},
			{Name: "prune", Usage: "remove entries older than --older-than, then the oldest until the cache holds at most --max-size",
				Flags: []cli.Flag{cacheDirFlag,
					&cli.StringFlag{Name: "older-than", Usage: "age, e.g. 30d, 12h"},
					&cli.StringFlag{Name: "max-size", Usage: "total size to keep, e.g. 20GiB, 500MiB"},
				}, Action: action("prune")},
		}),
	}
}

func cacheOptionsFrom(c *cli.Context, sub string) (cacheOptions, error) {
	o := cacheOptions{Dir: c.String("cache-dir"), Keys: c.Args().Slice(), MaxSize: -1}
	if o.Dir == "" {
		d, err := suite.DefaultCacheDir()
		if err != nil {
			return o, usageErr(fmt.Errorf("cache %s: %w", sub, err))
		}
		o.Dir = d
	}
	switch sub {
	case "rm":
		if len(o.Keys) == 0 {
			return o, usageErr(errors.New("cache rm: give the KEY (or a prefix of at least 4 characters) of each entry; qppl cache ls lists them"))
		}
	default:
		if len(o.Keys) > 0 {
			return o, usageErr(fmt.Errorf("cache %s: unexpected argument %q", sub, o.Keys[0]))
		}
	}
	if sub != "prune" {
		return o, nil
	}
	var err error
	if s := c.String("older-than"); s != "" {
		if o.OlderThan, err = parseAge(s); err != nil {
			return o, usageErr(fmt.Errorf("cache prune --older-than: %w", err))
		}
	}
	if s := c.String("max-size"); s != "" {
		if o.MaxSize, err = parseSize(s); err != nil {
			return o, usageErr(fmt.Errorf("cache prune --max-size: %w", err))
		}
	}
	if o.OlderThan == 0 && o.MaxSize < 0 {
		return o, usageErr(errors.New("cache prune: give --older-than AGE and/or --max-size SIZE"))
	}
	return o, nil
}

func runCache(sub string, o cacheOptions, stdout io.Writer) error {
	c := &suite.Cache{Dir: o.Dir}
	var es []suite.CacheEntry
	var err error
	switch sub {
	case "ls":
		if es, err = c.List(); err != nil {
			return err
		}
		var total int64
		for _, e := range es {
			total += e.Size
		}
		writeCacheTable(stdout, es)
		fmt.Fprintf(stdout, "%d entries, %s in %s\n", len(es), suite.HumanBytes(total), o.Dir)
		return nil
	case "rm":
		for _, k := range o.Keys {
			del, err := c.Remove(k)
			if err != nil {
				return usageErr(err)
			}
			es = append(es, del...)
		}
	case "prune":
		if es, err = c.Prune(o.OlderThan, o.MaxSize, time.Now()); err != nil {
			return err
		}
	}
	var freed int64
	for _, e := range es {
		freed += e.Size
		fmt.Fprintf(stdout, "removed %s %s (%s)\n", e.Kind, e.Key, suite.HumanBytes(e.Size))
	}
	fmt.Fprintf(stdout, "%d entries removed, %s freed\n", len(es), suite.HumanBytes(freed))
	return nil
}

func writeCacheTable(w io.Writer, es []suite.CacheEntry) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tKEY\tSIZE\tMODEL\tDATA\tDATE")
	for _, e := range es {
		model, data := e.Model, e.Data
		if model == "" {
			model = "-"
		}
		if data == "" {
			data = "-"
		}
		fmt.Fprintf(tw, "%s\t%.12s\t%s\t%s\t%s\t%s\n", e.Kind, e.Key, suite.HumanBytes(e.Size), model, data, e.Time.UTC().Format("2006-01-02 15:04"))
	}
	tw.Flush()
}

// parseAge reads a Go duration or a number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || !(n > 0) {
			return 0, fmt.Errorf("%q: want a positive age like 30d or 12h", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive age like 30d or 12h", s)
	}
	return d, nil
}

// parseSize reads a byte count with an optional binary or decimal unit
// (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; K, M, G, T are binary).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
		{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	num, mul := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mul = strings.TrimSpace(n), u.mul
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: want a size like 20GiB or 500MiB", s)
	}
	return int64(n * mul), nil
}
