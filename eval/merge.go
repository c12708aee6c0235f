package eval

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/journal"
)

// shardJournal is one run directory read for merging.
type shardJournal struct {
	dir   string
	id    *Identity
	shard compare.Shard
	wins  []compare.WindowResult
}

// Merge reads the journals of the run directories of every shard of one
// eval run, checks that they belong to one run and hold every window
// exactly once, and returns the common identity (shard cleared) and all
// window results. Every error is an *InputError.
func Merge(dirs []string) (*Identity, []compare.WindowResult, error) {
	parts := make([]shardJournal, 0, len(dirs))
	for _, dir := range dirs {
		p, err := readShardJournal(dir)
		if err != nil {
			return nil, nil, Input(err)
		}
		parts = append(parts, p)
	}
	id, ws, err := mergeShards(parts)
	return id, ws, Input(err)
}

func readShardJournal(dir string) (shardJournal, error) {
	path := JournalPath(dir)
	if _, err := os.Stat(path); err != nil {
		return shardJournal{}, fmt.Errorf("merge: %s is not a run directory (no %s): %w", dir, JournalName, err)
	}
	c, err := journal.Read(path)
	if err != nil {
		return shardJournal{}, fmt.Errorf("merge: %w", err)
	}
	id, err := ParseIdentity(c.Identity, path)
	if err != nil {
		return shardJournal{}, fmt.Errorf("merge: %w", err)
	}
	if id.Command != "eval" {
		return shardJournal{}, fmt.Errorf("merge: %s holds a %q run; merge combines eval runs", path, id.Command)
	}
	sh, err := compare.ParseShard(id.Shard)
	if err != nil {
		return shardJournal{}, fmt.Errorf("merge: %s: %w", path, err)
	}
	ws, err := DecodeRecords(path, c.Records, nil, sh)
	if err != nil {
		return shardJournal{}, fmt.Errorf("merge: %w", err)
	}
	for _, w := range ws {
		if w.Index >= id.Windows || !sh.Has(w.Index) {
			return shardJournal{}, fmt.Errorf("merge: %s holds window %d, which shard %d/%d of a %d-window run does not have", path, w.Index, sh.I, sh.N, id.Windows)
		}
	}
	return shardJournal{dir: dir, id: id, shard: sh, wins: ws}, nil
}

// mergeShards checks the parts against each other and returns the common
// identity (shard cleared) and all windows.
func mergeShards(parts []shardJournal) (*Identity, []compare.WindowResult, error) {
	first := parts[0]
	common := *first.id
	common.Shard = ""
	n := first.shard.N
	byShard := map[int]string{}
	for _, p := range parts {
		other := *p.id
		other.Shard = ""
		// One run: the same key (paths and labels are information only)
		// and the same windows.
		same, _, _, err := sameKey(&common, &other)
		if err != nil {
			return nil, nil, err
		}
		same = same && other.Windows == common.Windows && other.DataSpecHash == common.DataSpecHash
		if !same { // every field that differs, the deciding ones among them
			want, _ := common.Canonical()
			got, _ := other.Canonical()
			return nil, nil, fmt.Errorf("merge: %s and %s are not shards of the same run (%s)", first.dir, p.dir, joinDiff(IdentityDiff(want, got, "in "+first.dir, "in "+p.dir)))
		}
		if p.shard.N != n {
			return nil, nil, fmt.Errorf("merge: %s is shard %s, %s is shard %d/%d: all shards must split the run the same way", first.dir, first.id.ShardName(), p.dir, p.shard.I, p.shard.N)
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
		return nil, nil, fmt.Errorf("merge: shard %s missing (have %s)", strings.Join(missing, ", "), sortedShards(byShard, n))
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
			p := parts[slices.IndexFunc(parts, func(p shardJournal) bool { return p.shard.Has(i) })]
			cnt := 0
			for j := range have {
				if have[j] == "" && p.shard.Has(j) {
					cnt++
				}
			}
			return nil, nil, fmt.Errorf("merge: shard %s in %s is not finished (window %d and %d more missing): resume it with its eval command, then merge again", p.id.ShardName(), p.dir, i, cnt-1)
		}
	}
	return &common, all, nil
}

func joinDiff(d []string) string {
	if len(d) == 0 {
		return "identities differ"
	}
	return strings.Join(d, ", ")
}

// sortedShards formats shard names for messages.
func sortedShards(m map[int]string, n int) string {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprintf("%d/%d", k, n)
	}
	return strings.Join(s, ", ")
}
