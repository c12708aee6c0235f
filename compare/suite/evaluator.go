package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/eval"
)

// Opened is a model opened for evaluation: its backend, what its storage
// costs (bits per weight, VRAM, format, for the result) and how to release
// both.
type Opened struct {
	Backend                   backends.Backend
	BPWLayer, BPWHead, VRAMGB float64
	Format                    string
	// KVCacheQuant, KVCacheScheme: eval.Identity's, for a checkpoint with
	// a quantized KV cache ("" otherwise).
	KVCacheQuant, KVCacheScheme string
	Close                       func() error
}

// BackendEvaluator is the Evaluator of qppl compare: it opens each model
// through Open (supplied by the command, the one place that names concrete
// backends) and runs eval.Evaluate; the base model writes its log-prob
// store under StoreDir, the others read it; with Runs every model's
// windows are journaled and resumed.
type BackendEvaluator struct {
	Open func(modelDir string) (*Opened, error)
	// Backend and Precision name the engine in cache keys ("" =
	// reference; precision "" = the backend's default).
	Backend, Precision string
	StoreDir           string
	Encoding           compare.Encoding
	TopK               int
	KLRows             int // KL windows in compare_q mode
	Progress           io.Writer
	// ExternalKey names the --kld-base file ExternalPath.
	ExternalKey, ExternalPath string
	// Runs, when set (--run-dir), journals every model's windows.
	Runs *RunDir
	// FreeSpace reads the free space before a base store is written (nil:
	// statfs; tests fake it).
	FreeSpace FreeSpace
	// KVCacheOff: --kv-cache-quant off (models with a quantized KV cache
	// are evaluated without it): part of the engine, so of cache keys.
	KVCacheOff bool
}

// Engine implements Evaluator: backend, precision, base store encoding,
// top-K and KL rows.
func (e *BackendEvaluator) Engine() string {
	name, prec := e.Backend, e.Precision
	if name == "" {
		name = "reference"
	}
	if name == "reference" {
		prec = "fp64"
	} else if prec == "" {
		prec = "bf16"
	}
	eng := fmt.Sprintf("%s/%s/base-%s/top-%d", name, prec, e.Encoding, e.TopK)
	if e.KLRows > 0 {
		eng += fmt.Sprintf("/kld-rows-%d", e.KLRows)
	}
	if e.KVCacheOff {
		eng += "/kv-cache-off"
	}
	return eng
}

// StorePath is the base log-prob store of key.
func (e *BackendEvaluator) StorePath(key string) string {
	if key != "" && key == e.ExternalKey {
		return e.ExternalPath
	}
	return filepath.Join(e.StoreDir, key+".qlp")
}

// HasBase implements Evaluator.
func (e *BackendEvaluator) HasBase(key string) bool {
	s, err := compare.OpenStore(e.StorePath(key))
	if err != nil {
		return false
	}
	s.Close()
	return true
}

// Evaluate implements Evaluator.
func (e *BackendEvaluator) Evaluate(ctx context.Context, job Job) (compare.Result, error) {
	m, err := e.Open(job.Model.ModelDir)
	if err != nil {
		return compare.Result{}, err
	}
	defer m.Close()
	info := m.Backend.Info()
	d := job.Data
	id := &eval.Identity{
		Version: eval.IdentityVersion, Command: "compare",
		Model: job.Model.ModelDir, ModelHash: job.ModelHash, Label: job.Model.Label, Backend: info.Name, Precision: info.Precision,
		Data: d.Info, DataSpecHash: d.Hash, Windows: len(d.Windows),
		TopK: e.TopK, BPWLayer: m.BPWLayer, BPWHead: m.BPWHead, VRAMGB: m.VRAMGB, Format: m.Format,
		KVCacheQuant: m.KVCacheQuant, KVCacheScheme: m.KVCacheScheme,
	}
	if job.SaveBase || job.UseBase {
		id.KLMode, id.KLBaseKey, id.KLBaseFormat = d.KLMode, job.BaseKey, string(e.Encoding)
		if job.UseBase && job.BaseKey == e.ExternalKey {
			id.KLBaseFormat = "external"
		}
	}
	o := eval.Options{Windows: d.Windows, Identity: id, TopK: e.TopK, Progress: e.Progress}

	// Run directory: the model's journal; the base's store reused when
	// complete, else the base evaluated again from its first window.
	saveBase := job.SaveBase
	storePath := e.StorePath(job.BaseKey)
	if e.Runs != nil {
		if o.RunDir, err = e.Runs.OpenModel(job, id, storePath, func() bool { return e.HasBase(job.BaseKey) }, &saveBase); err != nil {
			return compare.Result{}, err
		}
		defer o.RunDir.Close()
	}
	if saveBase || job.UseBase {
		if err := os.MkdirAll(e.StoreDir, 0o755); err != nil {
			return compare.Result{}, fmt.Errorf("base log-prob store: %w", err)
		}
	}
	if saveBase {
		if err := e.checkStoreSpace(storePath, d, info.Vocab); err != nil {
			return compare.Result{}, err
		}
		bs := eval.BaseStore{Path: storePath, Encoding: e.Encoding, KLMode: compare.KLMode(d.KLMode), KLRows: e.KLRows, ModelHash: job.ModelHash, Vocab: info.Vocab}
		if o.Save, err = eval.CreateBaseStore(bs, d.Windows, d.Tokens, d.Info, d.Hash); err != nil {
			return compare.Result{}, err
		}
		defer o.Save.Abort()
	}
	if job.UseBase {
		if o.Base, err = compare.OpenStore(storePath); err != nil {
			return compare.Result{}, err
		}
		defer o.Base.Close()
		if err := o.Base.Check(compare.StoreExpect{DataSpecHash: d.Hash, Vocab: info.Vocab}); err != nil {
			return compare.Result{}, err
		}
	}
	out, err := eval.Evaluate(ctx, m.Backend, o)
	if err != nil {
		var in *eval.Interrupted
		if !errors.As(err, &in) {
			return compare.Result{}, err
		}
		if o.RunDir == nil {
			return compare.Result{}, in.Err
		}
		in.RunDir = e.Runs.Dir
		in.Note = fmt.Sprintf("%d of %d windows are saved in %s", in.Done, in.Total, eval.JournalPath(o.RunDir.Dir))
		if saveBase {
			in.Note = "the base model's log-prob store was not finished: resuming evaluates the base model again from its first window"
		}
		return compare.Result{}, in
	}
	return out.Result, nil
}

// checkStoreSpace prints the size of the base store about to be written
// and refuses it when its file system has less free space.
func (e *BackendEvaluator) checkStoreSpace(path string, d *Data, vocab int) error {
	klRows := 0
	if compare.KLMode(d.KLMode) == compare.KLCompareQ {
		klRows = e.KLRows
	}
	layout, err := compare.StoreLayout(d.Windows, compare.KLMode(d.KLMode), klRows)
	if err != nil {
		return eval.Input(err)
	}
	rb, err := compare.RecordBytes(e.Encoding, vocab)
	if err != nil {
		return eval.Input(err)
	}
	positions := 0
	for _, w := range layout {
		positions += w.Positions
	}
	what := fmt.Sprintf("base log-prob store (%d positions × %d-token vocabulary, %s)", positions, vocab, e.Encoding)
	if err := CheckSpace(what, path, int64(positions)*int64(rb), e.FreeSpace, e.Progress); err != nil {
		return eval.Input(err)
	}
	return nil
}
