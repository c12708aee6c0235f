package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/qppl/qppl/compare"
)

// IdentityVersion is bumped when Identity changes meaning.
const IdentityVersion = 1

// Identity is everything that decides a run's result but the windows'
// scores: the data spec and token-stream hash, the model files' hash, the
// method and windows, the backend and precision, the KL base and the
// shard; plus the descriptive fields of the result JSON, so that a resumed
// or merged run writes exactly what one uninterrupted run writes. It is the
// journal header of a run directory (canonical JSON, keys sorted).
type Identity struct {
	Version int    `json:"version"`
	Command string `json:"command"` // "eval" or "compare"

	Model     string `json:"model"`
	ModelHash string `json:"model_hash"`
	Label     string `json:"label"`
	Backend   string `json:"backend"`
	Precision string `json:"precision"`

	Data         compare.DataSpec `json:"data"`
	DataSpecHash string           `json:"data_spec_hash"`
	Windows      int              `json:"windows"`

	KLMode       string `json:"kl_mode"`
	KLBaseKey    string `json:"kl_base_key"`
	KLBaseFormat string `json:"kl_base_format"`
	TopK         int    `json:"top_k"`

	Words     int64  `json:"words"`
	Bytes     int64  `json:"bytes"`
	Bootstrap int    `json:"bootstrap"`
	Seed      uint64 `json:"seed"`

	BPWLayer float64 `json:"bpw_layer"`
	BPWHead  float64 `json:"bpw_head"`
	VRAMGB   float64 `json:"vram_gb"`
	Format   string  `json:"format"`

	// Shard is "I/N" for a sharded run, "" for a whole run.
	Shard string `json:"shard"`

	// AllowUnusedTensors and UnusedTensors: --allow-unused-tensors and the
	// tensors the backend left unused (absent otherwise, so that journals
	// written before them still match).
	AllowUnusedTensors bool     `json:"allow_unused_tensors,omitempty"`
	UnusedTensors      []string `json:"unused_tensors,omitempty"`

	// KVCacheQuant ("on" or "off", --kv-cache-quant) and KVCacheScheme
	// (quant.KVCache.Describe) for a checkpoint that declares a quantized
	// KV cache; absent otherwise. Off: its scales were read and checked but
	// deliberately not applied (the weights alone).
	KVCacheQuant  string `json:"kv_cache_quant,omitempty"`
	KVCacheScheme string `json:"kv_cache_scheme,omitempty"`
	// IgnoredTensors: the checkpoint's tensors the architecture leaves
	// alone on purpose (a multimodal checkpoint's vision tower), per
	// prefix (absent when none).
	IgnoredTensors []compare.IgnoredTensors `json:"ignored_tensors,omitempty"`
}

// Canonical returns the identity as JSON with sorted keys at every level.
func (id *Identity) Canonical() ([]byte, error) {
	b, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(b)
}

// ShardName is the identity's shard, "0/1" for a whole run.
func (id *Identity) ShardName() string {
	if id.Shard == "" {
		return "0/1"
	}
	return id.Shard
}

// Key returns the part of the identity that decides the window scores, as
// canonical JSON: the hashes of the model files, of the token stream and of
// the base log-probs, the method and window shape, backend, precision, KL
// mode, top-K, label and shard. Paths (the model directory, the data
// source, the tokenizer, the row join: the hashes decide), the settings
// that only post-process window results (bootstrap, seed, words and bytes)
// and the number of windows (a larger --rows extends a run; each journaled
// window is checked against the run's own) are information only: a run
// resumes, and shards merge, whenever their keys are equal.
func (id *Identity) Key() ([]byte, error) {
	k := *id
	k.Model = ""
	k.Data.Source, k.Data.Tokenizer, k.Data.Join = "", "", ""
	k.Bootstrap, k.Seed, k.Words, k.Bytes = 0, 0, 0, 0
	k.Data.Rows, k.Data.Documents, k.Windows, k.DataSpecHash = 0, 0, 0, ""
	k.BPWLayer, k.BPWHead, k.VRAMGB, k.Format = 0, 0, 0, ""
	return k.Canonical()
}

// CanonicalJSON re-encodes a JSON document with object keys sorted
// (encoding/json sorts map keys), numbers kept as written.
func CanonicalJSON(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// ParseIdentity decodes a journal header written by Canonical; path names
// the journal in errors.
func ParseIdentity(b []byte, path string) (*Identity, error) {
	var id Identity
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&id); err != nil {
		return nil, fmt.Errorf("%s: the journal header is not a qppl run identity: %v", path, err)
	}
	if id.Version != IdentityVersion {
		return nil, fmt.Errorf("%s: run identity version %d, this qppl reads version %d", path, id.Version, IdentityVersion)
	}
	return &id, nil
}

// IdentityDiff lists the fields in which two canonical identities differ,
// as "field: A aName, B bName", nested fields dotted.
func IdentityDiff(old, cur []byte, aName, bName string) []string {
	var a, b map[string]any
	da, db := json.NewDecoder(bytes.NewReader(old)), json.NewDecoder(bytes.NewReader(cur))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&a) != nil || db.Decode(&b) != nil {
		return []string{"identity not readable"}
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if fa[k] != fb[k] {
			out = append(out, fmt.Sprintf("%s: %s %s, %s %s", k, orNone(fa[k]), aName, orNone(fb[k]), bName))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" || s == `""` {
		return "(none)"
	}
	return s
}

func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, x, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	out[prefix] = string(b)
}

// reduceBootstrap maps --bootstrap (0 = off; negative, as before, off too)
// to ReduceOptions.Bootstrap (< 0 = off).
func reduceBootstrap(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// Reduce reduces window results (in any order) and fills the result's
// descriptive fields from the run identity. Evaluate, resumed runs and
// merged shards all end here, so they write the same result.
func Reduce(results []compare.WindowResult, id *Identity) (compare.Result, error) {
	res, err := compare.Reduce(results, compare.ReduceOptions{
		Method: compare.Method(id.Data.Method), Words: id.Words, Bytes: id.Bytes, KLMode: id.KLMode, TopK: id.TopK,
		Bootstrap: reduceBootstrap(id.Bootstrap), Seed: id.Seed, Ctx: id.Data.Ctx, Stride: id.Data.Stride,
	})
	if err != nil {
		return res, err
	}
	res.Label, res.Model, res.ModelHash = id.Label, id.Model, id.ModelHash
	res.Backend, res.Precision = id.Backend, id.Precision
	res.Method, res.Ctx, res.Stride, res.Rows = id.Data.Method, id.Data.Ctx, id.Data.Stride, id.Data.Rows
	res.Data, res.DataSpecHash, res.TokensHash = id.Data, id.DataSpecHash, id.Data.TokensHash
	res.BPWLayer, res.BPWHead, res.VRAMGB, res.Format = id.BPWLayer, id.BPWHead, id.VRAMGB, id.Format
	res.AllowUnusedTensors, res.UnusedTensors = id.AllowUnusedTensors, id.UnusedTensors
	res.KVCacheQuant, res.KVCacheScheme = id.KVCacheQuant, id.KVCacheScheme
	res.IgnoredTensors = id.IgnoredTensors
	if res.KLD != nil && id.KLBaseKey != "" {
		res.KLD.BaseFormat = id.KLBaseFormat
		res.KLD.BaseKey = id.KLBaseKey
	}
	return res, nil
}
