package suite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/qppl/qppl/compare"
)

// CacheEntry is one file of a cache directory: a result (results/), a base
// log-prob store (base/) or a tokenized stream (tokens/).
type CacheEntry struct {
	Kind  string // "result", "base" or "tokens"
	Key   string // the file name without its extension
	Path  string
	Size  int64
	Model string // a result's model directory, a store's model hash ("" unknown)
	Data  string // the data source and windowing ("" unknown)
	Time  time.Time
}

// cacheKinds are the subdirectories of a cache and their file extensions.
var cacheKinds = []struct{ dir, kind, ext string }{
	{"results", "result", ".json"},
	{"base", "base", ".qlp"},
	{"tokens", "tokens", ".i32"},
}

// List returns the entries of the cache, oldest first (ties by path). A
// file that does not decode is listed with what its name and size say.
func (c *Cache) List() ([]CacheEntry, error) {
	var out []CacheEntry
	for _, k := range cacheKinds {
		dir := filepath.Join(c.Dir, k.dir)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		for _, de := range ents {
			if de.IsDir() || !strings.HasSuffix(de.Name(), k.ext) {
				continue
			}
			info, err := de.Info()
			if err != nil {
				continue // removed meanwhile
			}
			e := CacheEntry{Kind: k.kind, Key: strings.TrimSuffix(de.Name(), k.ext), Path: filepath.Join(dir, de.Name()), Size: info.Size(), Time: info.ModTime()}
			describe(&e)
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// describe fills what a result or a store says about its model and data.
func describe(e *CacheEntry) {
	switch e.Kind {
	case "result":
		c := &Cache{Dir: filepath.Dir(filepath.Dir(e.Path))}
		if r, ok, err := c.Get(e.Key); err == nil && ok {
			e.Model = r.Model
			e.Data = fmt.Sprintf("%s %s ctx %d", r.Data.Source, r.Method, r.Ctx)
		}
	case "base":
		if st, err := compare.OpenStore(e.Path); err == nil {
			h := st.Header()
			st.Close()
			e.Model = "sha256:" + short(h.ModelHash)
			e.Data = fmt.Sprintf("tokens %s %s ctx %d", short(h.TokensHash), h.Method, h.Ctx)
		}
	}
}

// Remove deletes the entries whose key starts with prefix (at least 4
// characters, so that a typo cannot empty the cache) and returns them.
func (c *Cache) Remove(prefix string) ([]CacheEntry, error) {
	if len(prefix) < 4 {
		return nil, fmt.Errorf("cache rm %q: give at least 4 characters of a key (qppl cache ls lists them)", prefix)
	}
	all, err := c.List()
	if err != nil {
		return nil, err
	}
	var del []CacheEntry
	for _, e := range all {
		if strings.HasPrefix(e.Key, prefix) {
			del = append(del, e)
		}
	}
	if len(del) == 0 {
		return nil, fmt.Errorf("cache rm %q: no entry under %s has a key starting so", prefix, c.Dir)
	}
	return del, removeAll(del)
}

// Prune deletes entries last written before now-olderThan (olderThan > 0),
// then the oldest until the cache holds at most maxSize bytes (maxSize >=
// 0; negative: no size limit), and returns what it deleted.
func (c *Cache) Prune(olderThan time.Duration, maxSize int64, now time.Time) ([]CacheEntry, error) {
	all, err := c.List()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range all {
		total += e.Size
	}
	var del []CacheEntry
	for _, e := range all { // oldest first
		old := olderThan > 0 && e.Time.Before(now.Add(-olderThan))
		big := maxSize >= 0 && total > maxSize
		if !old && !big {
			continue
		}
		del = append(del, e)
		total -= e.Size
	}
	return del, removeAll(del)
}

func removeAll(es []CacheEntry) error {
	for _, e := range es {
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cache: %w", err)
		}
	}
	return nil
}
