package hub

import (
	"context"
	"encoding/json"
	"errors"

	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The WikiText-2 raw v1 test split on the hub.
const (
	WikiTextRepoID   = "Salesforce/wikitext"
	WikiTextConfig   = "wikitext-2-raw-v1"
	WikiTextTestFile = "wikitext-2-raw-v1/test-00000-of-00001.parquet"
)

// Where a resolved input came from.
const (
	SourceFlag     = "--data"
	SourceCache    = "cache"
	SourceDownload = "download"
)

// WikiTextOptions tells ResolveWikiText where to look. The zero value reads
// the process environment and uses http.DefaultClient.
type WikiTextOptions struct {
	Data     string       // --data FILE: used as is when set
	Revision string       // hub revision of Salesforce/wikitext; "" means "main"
	Env      Env          // HF_* variables
	HTTP     *http.Client // nil: http.DefaultClient
	Progress io.Writer    // download progress; nil: silent
}

// Resolved is a resolved data source: one or more files (parquet shards in
// order) and where they were found (SourceFlag, SourceCache, SourceDownload).
type Resolved struct {
	Paths  []string
	Source string
}

// DataOptionsHelp is the text that tells a user how to pass the data by hand.
const DataOptionsHelp = `Pass the WikiText-2 raw v1 test split with --data, in any of these forms:
  --data test.rows.jsonl                 one {"text": ...} object per line (the Hugging Face rows)
  --data test-00000-of-00001.parquet     the Hugging Face parquet file (Salesforce/wikitext, wikitext-2-raw-v1)
  --data wiki.test.raw                   llama.cpp's file (scripts/get-wikitext-2.sh)
  --data FILE.txt                        any UTF-8 text, used as is`

// ResolveWikiText finds the WikiText-2 raw v1 test split: opts.Data when
// given; else a parquet file in the Hugging Face caches (the hub cache
// HF_HUB_CACHE, then HF_DATASETS_CACHE: hub layout or datasets' downloads/);
// else, unless HF_HUB_OFFLINE is set, it downloads
// <HF_ENDPOINT>/datasets/Salesforce/wikitext/resolve/<rev>/wikitext-2-raw-v1/test-00000-of-00001.parquet
// into the hub cache.
func ResolveWikiText(ctx context.Context, opts WikiTextOptions) (Resolved, error) {
	if opts.Data != "" {
		st, err := os.Stat(opts.Data)
		if err != nil {
			return Resolved{}, fmt.Errorf("hub: --data: %w", err)
		}
		if st.IsDir() {
			return Resolved{}, fmt.Errorf("hub: --data %s is a directory, not a file\n%s", opts.Data, DataOptionsHelp)
		}
		return Resolved{Paths: []string{opts.Data}, Source: SourceFlag}, nil
	}
	rev := opts.Revision
	if rev == "" {
		rev = "main"
	}
	cfg, err := LoadConfig(opts.Env)
	if err != nil {
		return Resolved{}, err
	}
	if paths, ok := FindCachedWikiText(cfg, rev); ok {
		return Resolved{Paths: paths, Source: SourceCache}, nil
	}
	if cfg.Offline {
		return Resolved{}, fmt.Errorf("hub: WikiText-2 (%s, %s, test) is not in the Hugging Face cache (%s or %s) and HF_HUB_OFFLINE is set, so it cannot be downloaded.\n%s",
			WikiTextRepoID, WikiTextConfig, cfg.HubCache, cfg.DatasetsCache, DataOptionsHelp)
	}
	c := NewClient(cfg, opts.HTTP, opts.Progress)
	p, _, err := c.Download(ctx, cfg.HubCache, Repo{Dataset, WikiTextRepoID}, rev, WikiTextTestFile)
	if err != nil {
		return Resolved{}, fmt.Errorf("hub: downloading WikiText-2 from %s: %w\n%s", cfg.Endpoint, err, DataOptionsHelp)
	}
	return Resolved{Paths: []string{p}, Source: SourceDownload}, nil
}

// FindCachedWikiText looks for the WikiText-2 raw v1 test parquet in the
// caches of cfg, without network: hub layout under HF_HUB_CACHE and
// HF_DATASETS_CACHE (repositories Salesforce/wikitext and the legacy
// wikitext; the snapshot of revision first, then any other; files
// wikitext-2-raw-v1/test-*.parquet or, for refs/convert/parquet snapshots,
// wikitext-2-raw-v1/test/*.parquet), then files that the datasets library
// stored under HF_DATASETS_CACHE/downloads with a .json giving their URL,
// then the datasets library's Arrow cache of the prepared split
// (<HF_DATASETS_CACHE>/{Salesforce___wikitext,wikitext}/wikitext-2-raw-v1/<version>/<hash>/wikitext-test*.arrow),
// then an extracted wikitext-2-raw/wiki.test.raw under downloads/extracted
// (older script-based datasets versions). The result is parquet, Arrow or
// wiki.test.raw files; dataset.Load detects which.
func FindCachedWikiText(cfg Config, revision string) ([]string, bool) {
	roots := []string{cfg.HubCache}
	if cfg.DatasetsCache != "" && cfg.DatasetsCache != cfg.HubCache {
		roots = append(roots, cfg.DatasetsCache)
	}
	for _, root := range roots {
		for _, id := range []string{WikiTextRepoID, "wikitext"} {
			for _, dir := range snapshotDirs(root, Repo{Dataset, id}, revision) {
				for _, pat := range []string{"test-*.parquet", filepath.Join("test", "*.parquet")} {
					if m := globSorted(filepath.Join(dir, WikiTextConfig, pat)); len(m) > 0 {
						return m, true
					}
				}
			}
		}
	}
	if cfg.DatasetsCache != "" {
		dl := filepath.Join(cfg.DatasetsCache, "downloads")
		if p, ok := findInDatasetsDownloads(dl); ok {
			return []string{p}, true
		}
		// The datasets library's own Arrow cache of the prepared split.
		for _, builder := range []string{"Salesforce___wikitext", "wikitext"} {
			dirs, _ := filepath.Glob(filepath.Join(cfg.DatasetsCache, builder, WikiTextConfig, "*", "*"))
			sort.Strings(dirs)
			for _, d := range dirs {
				if m := globSorted(filepath.Join(d, "wikitext-test*.arrow")); len(m) > 0 {
					return m, true
				}
			}
		}
		// Script-era datasets versions extracted the original zip there.
		if m := globSorted(filepath.Join(dl, "extracted", "*", "wikitext-2-raw", "wiki.test.raw")); len(m) > 0 {
			return m[:1], true
		}
	}
	return nil, false
}

// findInDatasetsDownloads scans <dir>/*.json metadata files ({"url": ...,
// "etag": ...}) for the WikiText-2 raw test parquet URL.
func findInDatasetsDownloads(dir string) (string, bool) {
	metas, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(metas)
	for _, m := range metas {
		st, err := os.Stat(m)
		if err != nil || st.Size() > 1<<16 {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(b, &meta) != nil {
			continue
		}
		u := meta.URL
		if !strings.Contains(u, "wikitext") || !strings.Contains(u, WikiTextConfig+"/") || !strings.HasSuffix(u, ".parquet") {
			continue
		}
		tail := u[strings.LastIndex(u, WikiTextConfig+"/")+len(WikiTextConfig)+1:]
		if !strings.HasPrefix(tail, "test-") && !strings.HasPrefix(tail, "test/") {
			continue
		}
		p := strings.TrimSuffix(m, ".json")
		if isRegular(p) {
			return p, true
		}
	}
	return "", false
}

// ModelOptions tells ResolveModel where to look. The zero value uses revision
// "main", the process environment and http.DefaultClient.
type ModelOptions struct {
	Revision string // branch, tag or commit; "" means "main"
	Env      Env
	HTTP     *http.Client
	Progress io.Writer
}

// ResolveModel turns --model into a local directory. An existing directory is
// returned unchanged. An "org/name" hub id is looked up in the hub cache
// (models--org--name/snapshots/<commit>, the commit from refs/<revision>),
// where it counts as present when config.json and the weights
// (model.safetensors, or model.safetensors.index.json and every shard it
// names) are there; otherwise, unless HF_HUB_OFFLINE is set, config.json,
// tokenizer.json, tokenizer_config.json, generation_config.json and the
// safetensors weights are downloaded (HF_TOKEN sent as a Bearer token).
func ResolveModel(ctx context.Context, id string, opts ModelOptions) (string, error) {
	if st, err := os.Stat(id); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("hub: --model %s is a file; want a model directory or a hub id (org/name)", id)
		}
		return id, nil
	}
	if !IsHubID(id) {
		return "", fmt.Errorf("hub: --model %s: no such directory, and not a Hugging Face hub id (org/name)", id)
	}
	rev := opts.Revision
	if rev == "" {
		rev = "main"
	}
	cfg, err := LoadConfig(opts.Env)
	if err != nil {
		return "", err
	}
	repo := Repo{Model, id}
	if dir, ok := SnapshotDir(cfg.HubCache, repo, rev); ok && modelComplete(dir) {
		return dir, nil
	}
	if cfg.Offline {
		return "", fmt.Errorf("hub: model %s (revision %s) is not complete in the Hugging Face cache %s, and HF_HUB_OFFLINE is set, so it cannot be downloaded; unset HF_HUB_OFFLINE, or pass --model with a local directory holding config.json, tokenizer.json and the safetensors weights",
			id, rev, filepath.Join(cfg.HubCache, repo.Folder()))
	}
	c := NewClient(cfg, opts.HTTP, opts.Progress)
	// The first file pins the commit; every other file is fetched at it, so
	// the snapshot is consistent even if the branch moves meanwhile.
	p, commit, err := c.Download(ctx, cfg.HubCache, repo, rev, "config.json")
	if err != nil {
		var he *HTTPError
		if !errors.As(err, &he) && ctx.Err() == nil {
			return "", fmt.Errorf("hub: model %s: %w (cannot reach %s: pass --model a local directory, or set HF_ENDPOINT to a reachable mirror)", id, err, cfg.Endpoint)
		}
		return "", fmt.Errorf("hub: model %s: %w", id, err)
	}
	dir := filepath.Dir(p)
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, _, err := c.Download(ctx, cfg.HubCache, repo, commit, f); err != nil && !IsNotFound(err) {
			return "", fmt.Errorf("hub: model %s: %w", id, err)
		}
	}
	idx, _, err := c.Download(ctx, cfg.HubCache, repo, commit, "model.safetensors.index.json")
	switch {
	case err == nil:
		shards, err := indexShards(idx)
		if err != nil {
			return "", fmt.Errorf("hub: model %s: %w", id, err)
		}
		for _, s := range shards {
			if _, _, err := c.Download(ctx, cfg.HubCache, repo, commit, s); err != nil {
				return "", fmt.Errorf("hub: model %s: %w", id, err)
			}
		}
	case IsNotFound(err):
		if _, _, err := c.Download(ctx, cfg.HubCache, repo, commit, "model.safetensors"); err != nil {
			if IsNotFound(err) {
				return "", fmt.Errorf("hub: model %s has neither model.safetensors nor model.safetensors.index.json (only safetensors weights are supported): %w", id, err)
			}
			return "", fmt.Errorf("hub: model %s: %w", id, err)
		}
	default:
		return "", fmt.Errorf("hub: model %s: %w", id, err)
	}
	return dir, nil
}

// modelComplete reports whether a snapshot holds config.json and all weights.
func modelComplete(dir string) bool {
	if !isRegular(filepath.Join(dir, "config.json")) {
		return false
	}
	if isRegular(filepath.Join(dir, "model.safetensors")) {
		return true
	}
	idx := filepath.Join(dir, "model.safetensors.index.json")
	if !isRegular(idx) {
		return false
	}
	shards, err := indexShards(idx)
	if err != nil {
		return false
	}
	for _, s := range shards {
		if !isRegular(filepath.Join(dir, filepath.FromSlash(s))) {
			return false
		}
	}
	return true
}

// indexShards reads the distinct shard names of a safetensors index, in
// name order, rejecting names that would leave the snapshot directory.
func indexShards(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > 64<<20 {
		return nil, fmt.Errorf("%s: %d bytes is too large for a safetensors index", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: empty or missing weight_map", path)
	}
	set := map[string]bool{}
	for _, f := range idx.WeightMap {
		if err := validRepoPath(f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		set[f] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}
