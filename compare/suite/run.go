package suite

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/qppl/qppl/compare"
)

// Job is one model to evaluate on the prepared data.
type Job struct {
	Model     ModelSpec
	ModelHash string
	Data      *Data
	// SaveBase asks the evaluator to store this model's log-probs (for
	// every KL position of Data.KLMode) under BaseKey.
	SaveBase bool
	// UseBase asks for KL statistics against the store BaseKey.
	UseBase bool
	BaseKey string
}

// Evaluator evaluates models; the CLI's implementation opens a backend and
// drives compare's Runner, tests use fakes.
type Evaluator interface {
	// Engine names what results depend on besides the data and the model
	// files: backend and precision (e.g. "reference/fp64").
	Engine() string
	// HasBase reports whether a complete base log-prob store key exists.
	HasBase(key string) bool
	// Evaluate runs one job. The returned result must describe the job's
	// data (DataSpecHash, TokensHash); Run fills label and hashes.
	Evaluate(ctx context.Context, job Job) (compare.Result, error)
}

// Options tune Run.
type Options struct {
	Cache   *Cache    // nil: no result cache
	NoCache bool      // evaluate every model (results are still stored)
	Log     io.Writer // one line per model (cached or evaluated); nil: none
	// ModelHash hashes a model directory; nil: compare.ModelHash.
	ModelHash func(dir string) (string, error)
	// ExternalBase, when set, is the key of existing base log-probs (a
	// `qppl eval --save-logits` store or llama.cpp's --kl-divergence-base
	// file, compare_q's -lf): no base model is run and every model gets KL
	// statistics against it. It must identify the file's content.
	ExternalBase string
}

// Run evaluates models (ordered by OrderModels: the base, when any, first)
// on data and returns the result set. Cached results are reused unless
// o.NoCache; the base is re-run when a model needs KL and its log-prob
// store is missing.
func Run(ctx context.Context, data *Data, models []ModelSpec, ev Evaluator, o Options) (*ResultSet, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("compare: no models")
	}
	hashFn := o.ModelHash
	if hashFn == nil {
		hashFn = compare.ModelHash
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", a...)
		}
	}
	engine := ev.Engine()
	hashes := make([]string, len(models))
	for i, m := range models {
		h, err := hashFn(m.ModelDir)
		if err != nil {
			return nil, fmt.Errorf("model %q (%s): %w", m.Label, m.Source, err)
		}
		hashes[i] = h
	}
	hasBase := models[0].Base
	for _, m := range models[1:] {
		if m.Base {
			return nil, fmt.Errorf("compare: base model %q must come first", m.Label)
		}
	}
	baseKey := ""
	external := o.ExternalBase != ""
	if hasBase && external {
		return nil, fmt.Errorf("compare: base model %q and external base log-probs: give one", models[0].Label)
	}
	if hasBase {
		baseKey = BaseStoreKey(data.Hash, data.KLMode, hashes[0], engine)
	}
	if external {
		baseKey = o.ExternalBase
	}
	keys := make([]string, len(models))
	cached := make([]*compare.Result, len(models))
	for i, m := range models {
		k := ResultKey{DataSpecHash: data.Hash, ModelHash: hashes[i], Engine: engine}
		if (hasBase && !m.Base) || external {
			k.KLMode, k.BaseKey = data.KLMode, baseKey
		}
		keys[i] = k.String()
		if o.NoCache {
			continue
		}
		r, ok, err := o.Cache.Get(keys[i])
		if err != nil {
			return nil, err
		}
		if ok {
			cached[i] = &r
		}
	}
	needBase := false
	if hasBase {
		for i := 1; i < len(models); i++ {
			if cached[i] == nil {
				needBase = true
			}
		}
		if needBase && cached[0] != nil && !ev.HasBase(baseKey) {
			logf("%s: cached, but its log-prob store is missing: evaluating it again", models[0].Label)
			cached[0] = nil
		}
	}

	rs := &ResultSet{Format: FormatResultSet, DataSpec: data.Spec, Data: data.Info, DataSpecHash: data.Hash, TokensHash: data.Info.TokensHash}
	if hasBase {
		rs.Base = models[0].Label
	}
	if hasBase || external {
		rs.KLMode = data.KLMode
	}
	for i, m := range models {
		var r compare.Result
		if cached[i] != nil {
			r = *cached[i]
			logf("%s: cached result (key %s)", m.Label, short(keys[i]))
		} else {
			job := Job{Model: m, ModelHash: hashes[i], Data: data, BaseKey: baseKey}
			if hasBase {
				job.SaveBase = i == 0
				job.UseBase = i > 0
			}
			if external {
				job.UseBase = true
			}
			logf("%s: evaluating %s", m.Label, m.ModelDir)
			var err error
			r, err = ev.Evaluate(ctx, job)
			if err != nil {
				return nil, fmt.Errorf("model %q (%s): %w", m.Label, m.ModelDir, err)
			}
			if r.DataSpecHash != data.Hash || r.TokensHash != data.Info.TokensHash {
				return nil, fmt.Errorf("model %q: evaluator returned a result for other data (%s/%s, want %s/%s)",
					m.Label, short(r.DataSpecHash), short(r.TokensHash), short(data.Hash), short(data.Info.TokensHash))
			}
			if job.UseBase && r.KLD == nil {
				return nil, fmt.Errorf("model %q: evaluator returned no KL statistics", m.Label)
			}
			r.ModelHash = hashes[i]
			if err := o.Cache.Put(keys[i], r); err != nil {
				return nil, err
			}
		}
		r.Label = m.Label
		r.Model = m.ModelDir
		r.ModelHash = hashes[i]
		if applyOverrides(&r, m) {
			logf("%s: bits per weight overridden by its model spec (as compare_q's override_*)", m.Label)
		}
		rs.Results = append(rs.Results, r)
	}
	return rs, nil
}

// applyOverrides applies compare_q's override_bpw_layer/head and
// override_vram_bits; it reports whether any was set.
func applyOverrides(r *compare.Result, m ModelSpec) bool {
	set := false
	if m.OverrideBPWLayer != nil {
		r.BPWLayer, set = *m.OverrideBPWLayer, true
	}
	if m.OverrideBPWHead != nil {
		r.BPWHead, set = *m.OverrideBPWHead, true
	}
	if m.OverrideVRAMBits != nil {
		r.VRAMGB, set = *m.OverrideVRAMBits/8/math.Pow(1024, 3), true
	}
	return set
}
