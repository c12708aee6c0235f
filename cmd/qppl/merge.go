package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/journal"
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
			return runMerge(o, c.App.Writer)
		},
	})
}

// mergePart is one run directory read for merging.
type mergePart struct {
	dir   string
	id    *runIdentity
	shard compare.Shard
	wins  []compare.WindowResult
}

// runMerge reads every shard journal, checks that they belong to one run
// and hold every window exactly once, and reduces them like eval does.
func runMerge(o mergeOptions, stdout io.Writer) error {
	if len(o.Dirs) == 0 {
		return usageErr(errors.New("merge: give the run directories of the shards (qppl merge DIR... [--json OUT])"))
	}
	if err := checkOutputDirs("merge", map[string]string{"json": o.JSON, "nll-out": o.NLLOut}, ""); err != nil {
		return usageErr(err)
	}
	parts := make([]mergePart, 0, len(o.Dirs))
	for _, dir := range o.Dirs {
		p, err := readMergePart(dir)
		if err != nil {
			return usageErr(err)
		}
		parts = append(parts, p)
	}
	id, ws, err := mergeParts(parts)
	if err != nil {
		return usageErr(err)
	}
	res, err := reduceRun(ws, id)
	if err != nil {
		return err
	}
	if o.JSON != "" {
		if err := writeResultJSON(o.JSON, &res); err != nil {
			return err
		}
	}
	if o.NLLOut != "" {
		if err := compare.WriteNLL(o.NLLOut, ws); err != nil {
			return err
		}
	}
	return compare.WriteSummary(stdout, &res)
}

func readMergePart(dir string) (mergePart, error) {
	path := journalPath(dir)
	if _, err := os.Stat(path); err != nil {
		return mergePart{}, fmt.Errorf("merge: %s is not a run directory (no %s): %w", dir, journalName, err)
	}
	c, err := journal.Read(path)
	if err != nil {
		return mergePart{}, fmt.Errorf("merge: %w", err)
	}
	id, err := parseIdentity(c.Identity, path)
	if err != nil {
		return mergePart{}, fmt.Errorf("merge: %w", err)
	}
	if id.Command != "eval" {
		return mergePart{}, fmt.Errorf("merge: %s holds a %q run; merge combines eval runs", path, id.Command)
	}
	sh, err := compare.ParseShard(id.Shard)
	if err != nil {
		return mergePart{}, fmt.Errorf("merge: %s: %w", path, err)
	}
	ws, err := decodeRecords(path, c.Records, nil, sh)
	if err != nil {
		return mergePart{}, fmt.Errorf("merge: %w", err)
	}
	for _, w := range ws {
		if w.Index >= id.Windows || !sh.Has(w.Index) {
			return mergePart{}, fmt.Errorf("merge: %s holds window %d, which shard %d/%d of a %d-window run does not have", path, w.Index, sh.I, sh.N, id.Windows)
		}
	}
	return mergePart{dir: dir, id: id, shard: sh, wins: ws}, nil
}

// mergeParts checks the parts against each other and returns the common
// identity (shard cleared) and all windows.
func mergeParts(parts []mergePart) (*runIdentity, []compare.WindowResult, error) {
	first := parts[0]
	common := *first.id
	common.Shard = ""
	want, _ := common.canonical()
	n := first.shard.N
	byShard := map[int]string{}
	for _, p := range parts {
		other := *p.id
		other.Shard = ""
		got, _ := other.canonical()
		if string(got) != string(want) {
			return nil, nil, fmt.Errorf("merge: %s and %s are not shards of the same run (%s)", first.dir, p.dir, joinDiff(identityDiff(want, got, "in "+first.dir, "in "+p.dir)))
		}
		if p.shard.N != n {
			return nil, nil, fmt.Errorf("merge: %s is shard %s, %s is shard %d/%d: all shards must split the run the same way", first.dir, first.id.shardName(), p.dir, p.shard.I, p.shard.N)
		}
		if d, ok := byShard[p.shard.I]; ok {
			return nil, nil, fmt.Errorf("merge: shard %d/%d given twice: %s and %s", p.shard.I, n, d, p.dir)
		}
		byShard[p.shard.I] = p.dir
	}
	if len(byShard) != n {
		var missing []string
		for i := range n {
			if _, ok := byShard[i]; !ok {
				missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			}
		}
		return nil, nil, fmt.Errorf("merge: shard %s missing (have %s)", joinList(missing), sortedShards(byShard, n))
	}
	var all []compare.WindowResult
	have := make([]string, common.Windows)
	for _, p := range parts {
		for _, w := range p.wins {
			if have[w.Index] != "" {
				return nil, nil, fmt.Errorf("merge: window %d is in both %s and %s", w.Index, have[w.Index], p.dir)
			}
			have[w.Index] = p.dir
			all = append(all, w)
		}
	}
	for i, d := range have {
		if d == "" {
			p := parts[slices.IndexFunc(parts, func(p mergePart) bool { return p.shard.Has(i) })]
			cnt := 0
			for j := range have {
				if have[j] == "" && p.shard.Has(j) {
					cnt++
				}
			}
			return nil, nil, fmt.Errorf("merge: shard %s in %s is not finished (window %d and %d more missing): resume it with its eval command, then merge again", p.id.shardName(), p.dir, i, cnt-1)
		}
	}
	return &common, all, nil
}

func (id *runIdentity) shardName() string {
	if id.Shard == "" {
		return "0/1"
	}
	return id.Shard
}

func joinDiff(d []string) string {
	if len(d) == 0 {
		return "identities differ"
	}
	return joinList(d)
}

func joinList(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
