package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
)

// DefaultCacheDir is the cache directory used when none is given: qppl
// under the user cache directory ($XDG_CACHE_HOME, else ~/.cache, on
// Linux; os.UserCacheDir).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory (%w): give --cache-dir", err)
	}
	return filepath.Join(d, "qppl"), nil
}

// Cache stores results on disk, one JSON file per key under
// <Dir>/results/. A nil *Cache stores nothing.
type Cache struct{ Dir string }

// ResultKey is the cache key of one model's result: the sha256 of every
// input the numbers depend on. Labels and bpw overrides are not part of it
// (they are applied after a hit).
type ResultKey struct {
	DataSpecHash string `json:"data_spec_hash"` // tokens hash, method, ctx, stride, rows
	KLMode       string `json:"kl_mode"`
	ModelHash    string `json:"model_hash"` // sha256 of config.json + safetensors
	Engine       string `json:"engine"`     // backend and precision
	BaseKey      string `json:"base_key"`   // "" for the base itself or without base
	Version      int    `json:"v"`
}

// String returns the hex sha256 of the key's canonical JSON.
func (k ResultKey) String() string {
	k.Version = 1
	b, _ := json.Marshal(k)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// BaseStoreKey names the base log-prob store of a run: data spec, KL mode,
// base model files and engine.
func BaseStoreKey(dataHash, klMode, baseModelHash, engine string) string {
	b, _ := json.Marshal([]string{"base-v1", dataHash, klMode, baseModelHash, engine})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (c *Cache) path(key string) string { return filepath.Join(c.Dir, "results", key+".json") }

// Get returns the cached result for key; ok is false on a miss. A cache
// file that does not decode is an error naming it.
func (c *Cache) Get(key string) (r compare.Result, ok bool, err error) {
	if c == nil || c.Dir == "" {
		return r, false, nil
	}
	p := c.path(key)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("result cache: %w", err)
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return r, false, fmt.Errorf("result cache %s: %w (delete it or run with --no-cache)", p, err)
	}
	if e.Key != key {
		return r, false, fmt.Errorf("result cache %s: holds key %s (delete it or run with --no-cache)", p, short(e.Key))
	}
	return e.Result, true, nil
}

// Put stores r under key, atomically.
func (c *Cache) Put(key string, r compare.Result) error {
	if c == nil || c.Dir == "" {
		return nil
	}
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("result cache: %w", err)
	}
	b, err := json.MarshalIndent(cacheEntry{Key: key, Result: r}, "", "  ")
	if err != nil {
		return fmt.Errorf("result cache: %w", err)
	}
	if err := dataset.WriteFileAtomic(p, b, 0o644); err != nil {
		return fmt.Errorf("result cache: %w", err)
	}
	return nil
}

type cacheEntry struct {
	Key    string         `json:"key"`
	Result compare.Result `json:"result"`
}
