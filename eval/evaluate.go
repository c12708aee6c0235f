package eval

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
)

// Options are one model's evaluation over prepared windows.
type Options struct {
	Windows []backends.Window
	// Identity describes the run: the reduce options (method, KL mode,
	// top-K, bootstrap) and the result's descriptive fields.
	Identity *Identity

	// Base, when set, supplies base log-probs: KL and paired statistics.
	Base *compare.Store
	// Save, when set, receives this model's log-probs (a base run); it is
	// closed (made visible) when the run succeeds. The caller aborts it
	// on failure.
	Save *compare.StoreWriter
	// TopK is the K of the top-K agreement (< 2: none); Top1 asks for the
	// model's top-1 id per target even without a base (token dumps).
	TopK int
	Top1 bool

	// Shard restricts the run to one shard (zero value: the whole run).
	Shard compare.Shard
	// RunDir, when set, supplies the journaled windows (skipped) and
	// journals every new one.
	RunDir *RunDir
	// Progress receives progress lines (nil: none): a bar on a terminal,
	// a plain line every few seconds otherwise. ProgressHeader is printed
	// before the first of them (what is being evaluated).
	Progress       io.Writer
	ProgressHeader string

	// ModelHash, when set, is waited for once the windows are scored and
	// gives the result's Identity.ModelHash, so that the model files are
	// hashed while the model runs. A run directory's journal header holds
	// the hash before the first window: ModelHash must be nil with RunDir.
	ModelHash func() (string, error)
}

// Outcome is what Evaluate returns.
type Outcome struct {
	// Result is the reduced result with its timing; zero for a shard of
	// several (only Windows and Fresh are set: merge reduces them).
	Result compare.Result
	// Windows are the window results, journaled then new.
	Windows []compare.WindowResult
	// Fresh is the number of windows scored by this call.
	Fresh int
}

// Evaluate scores the windows of o with be (skipping journaled windows and
// other shards), journals each finished window, and reduces journaled and
// new results into one result with timing. A cancelled ctx returns an
// *Interrupted with the windows saved so far.
func Evaluate(ctx context.Context, be backends.Backend, o Options) (*Outcome, error) {
	if o.Identity == nil {
		return nil, fmt.Errorf("eval: no run identity")
	}
	if o.ModelHash != nil && o.RunDir != nil {
		return nil, fmt.Errorf("eval: a run directory needs the model hash before the run")
	}
	shard := o.Shard
	if shard.N == 0 {
		shard = compare.Shard{I: 0, N: 1}
	}
	var done []compare.WindowResult
	runner := &compare.Runner{
		Backend: be, Windows: o.Windows, Base: o.Base, Save: o.Save, TopK: o.TopK, Top1: o.Top1,
		Progress: compare.NewProgress(o.Progress, o.ProgressHeader),
	}
	if o.RunDir != nil {
		done = o.RunDir.Done
		runner.OnWindow = o.RunDir.Append
	}
	runner.Skip = compare.SkipFunc(done, shard)
	total := 0
	for _, w := range o.Windows {
		if shard.Has(w.Index) {
			total++
		}
	}
	start := time.Now()
	fresh, err := runner.Run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			in := &Interrupted{Err: interruptedBy{err}, Done: len(done) + len(fresh), Total: total}
			if o.RunDir != nil {
				in.RunDir = o.RunDir.Dir
			}
			return nil, in
		}
		return nil, err
	}
	elapsed := time.Since(start)
	out := &Outcome{Windows: append(slices.Clip(done), fresh...), Fresh: len(fresh)}
	if o.Save != nil {
		if err := o.Save.Close(); err != nil {
			return nil, err
		}
	}
	if shard.N > 1 {
		return out, nil
	}
	desc := *o.Identity
	if o.ModelHash != nil {
		if desc.ModelHash, err = o.ModelHash(); err != nil {
			return nil, err
		}
	}
	if o.Base != nil {
		desc.KLBaseFormat, desc.KLBaseKey = BaseDescription(o.Base.Header())
	}
	if out.Result, err = Reduce(out.Windows, &desc); err != nil {
		return nil, err
	}
	if secs := elapsed.Seconds(); secs > 0 {
		var forwarded int64
		for _, w := range o.Windows {
			if !runner.Skip(w.Index) {
				forwarded += int64(len(w.Tokens))
			}
		}
		out.Result.Timing = &compare.Timing{Seconds: secs, TokensPerSec: float64(forwarded) / secs}
	}
	return out, nil
}

// BaseDescription is how a result names the base log-probs it was scored
// against: the store's encoding ("llamacpp-u16" for llama.cpp's own
// --kl-divergence-base file) and its key.
func BaseDescription(h compare.StoreHeader) (format, key string) {
	format = string(h.Encoding)
	if h.Container == compare.ContainerLlamaCpp {
		format = "llamacpp-u16"
	}
	return format, h.Key()
}
