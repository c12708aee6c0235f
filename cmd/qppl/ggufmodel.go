package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/dataset/hub"
	"github.com/qppl/qppl/eval"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/quant"
	"github.com/qppl/qppl/reference"
	"github.com/qppl/qppl/tokenizer"
)

// evalModel is the model a command evaluates: a checkpoint directory (or
// hub id) or a GGUF file.
type evalModel struct {
	path   string // the model directory, or the .gguf file
	tokDir string // where tokenizer.json is looked for
	Config *checkpoint.Config
	ckpt   *checkpoint.Model // nil for GGUF
	gguf   *gguf.Model       // nil for safetensors
	// A GGUF file without a tokenizer.json (given or beside it): the
	// tokenizer rebuilt from its tokenizer.ggml.* metadata, or why it
	// cannot be (reported only when text must be tokenized).
	tokJSON, tokConfig []byte
	tokErr             error
}

// isGGUFPath reports whether --model names a GGUF file.
func isGGUFPath(p string) bool { return strings.HasSuffix(strings.ToLower(p), ".gguf") }

// ggufOptions are the type decoders qppl reads GGUF weights with.
func ggufOptions() gguf.Options { return gguf.Options{Decoder: ggufDecoder()} }

// openEvalModel opens --model: a .gguf file (tokenizer: --tokenizer, or
// tokenizer.json beside the file, refused when its vocabulary disagrees
// with the file's tokenizer.ggml.tokens), else a directory or hub id (whose
// --tokenizer, if any, eval.Prepare loads). An unsupported quantization is
// an input error found before anything runs. Errors are usage errors.
func openEvalModel(ctx context.Context, model, revision, tok string, stderr io.Writer) (*evalModel, error) {
	path := model
	if isGGUFPath(model) {
		if revision != "" {
			return nil, usageErr(fmt.Errorf("eval: --revision goes with a hub id, not the GGUF file %s", model))
		}
	} else {
		dir, err := hub.ResolveModel(ctx, model, hub.ModelOptions{Revision: revision, Progress: stderr})
		if err != nil {
			return nil, usageErr(err)
		}
		path, tok = dir, "" // the directory's tokenizer is checked by eval.Prepare
	}
	m, err := openLocalModel(path, tok)
	if err != nil {
		return nil, usageErr(err)
	}
	if m.ckpt != nil {
		if _, err := quant.ParseJSON(m.Config.QuantizationConfig, m.Config.TorchDtype, filepath.Join(path, checkpoint.ConfigFile)); err != nil {
			m.Close()
			return nil, usageErr(fmt.Errorf("eval: %w", err))
		}
	}
	return m, nil
}

// openLocalModel opens a model directory, or a .gguf file with its
// tokenizer (tok, or tokenizer.json beside the file) checked against the
// file's vocabulary.
func openLocalModel(model, tok string) (*evalModel, error) {
	if !isGGUFPath(model) {
		m, err := arch.OpenDir(model)
		if err != nil {
			return nil, err
		}
		return &evalModel{path: model, tokDir: model, Config: m.Config, ckpt: m}, nil
	}
	g, err := gguf.OpenModel(model, ggufOptions())
	if err != nil {
		return nil, err
	}
	em := &evalModel{path: model, tokDir: filepath.Dir(model), Config: g.Config, gguf: g}
	if tok != "" {
		em.tokDir = tok
	}
	t, err := tokenizer.Load(em.tokDir)
	switch {
	case err == nil:
		if err := g.CheckVocab(em.tokDir, t.VocabSize(), t.IDToToken); err != nil {
			g.Close()
			return nil, err
		}
	case tok != "" || !errors.Is(err, fs.ErrNotExist):
		g.Close()
		return nil, fmt.Errorf("--tokenizer: %w", err)
	case g.HasTokenizer():
		// no tokenizer.json: the file's own tokenizer metadata, where
		// it provably gives the Hugging Face tokenizer (gguf.TokenizerJSON)
		em.tokJSON, em.tokConfig, em.tokErr = g.TokenizerJSON()
	}
	return em, nil
}

// withTokenizer completes a data preparation with the tokenizer rebuilt
// from the GGUF metadata (when that is the model's tokenizer); when it
// cannot be rebuilt and the data is text, it says why (a usage error).
func (m *evalModel) withTokenizer(po eval.PrepareOptions) (eval.PrepareOptions, error) {
	if m.gguf == nil || po.Tokenizer != m.tokDir {
		return po, nil
	}
	switch {
	case m.tokJSON != nil:
		po.Tokenizer, po.TokenizerJSON, po.TokenizerConfig = m.path, m.tokJSON, m.tokConfig
	case m.tokErr != nil && po.Source.Tokens == "":
		return po, usageErr(fmt.Errorf("no tokenizer.json beside %s and none given with --tokenizer, and its own metadata cannot stand in for it: %w", m.path, m.tokErr))
	}
	return po, nil
}

// configDir is the directory of the model's config.json and
// generation_config.json, "" for a GGUF file (its metadata is the config).
func (m *evalModel) configDir() string {
	if m.gguf != nil {
		return ""
	}
	return m.path
}

// usageTracker records which checkpoint tensors a backend reads.
type usageTracker interface {
	Stop()
	Unused() []string
}

// trackUsage starts recording the tensors the backend reads (a GGUF
// model: gguf.OpenModel already refuses tensors the architecture does not
// use, and each backend checks that it read every one).
func (m *evalModel) trackUsage() usageTracker {
	if m.gguf != nil {
		return m.gguf.TrackUsage()
	}
	return m.ckpt.TrackUsage()
}

// Close closes the model files.
func (m *evalModel) Close() error {
	if m.gguf != nil {
		return m.gguf.Close()
	}
	return m.ckpt.Close()
}

// openBackend opens the chosen backend over the model.
func (m *evalModel) openBackend(o backendOptions) (backends.Backend, error) {
	if m.gguf == nil {
		return openBackend(m.ckpt, o)
	}
	if o.AllowUnused {
		return nil, usageErr(fmt.Errorf("--%s: the GGUF file %s is read whole (a tensor its architecture does not use is always refused)", flagAllowUnused, m.path))
	}
	switch o.Name {
	case "", "reference":
		if o.Precision != "" && o.Precision != "fp64" {
			return nil, usageErr(fmt.Errorf("--precision %s: the reference backend computes in fp64", o.Precision))
		}
		b, err := reference.NewGGUF(m.gguf, reference.Options{})
		if err != nil {
			return nil, usageErr(err)
		}
		return b, nil
	}
	g := m.gguf
	return openDeviceBackend(func(devs []device.Device, opt cuda.Options) (*cuda.Backend, error) { return cuda.NewGGUF(g, devs, opt) }, o)
}

// inspect returns the bits-per-weight report.
func (m *evalModel) inspect() (*quant.Report, error) {
	if m.gguf != nil {
		return m.gguf.Inspect()
	}
	return quant.Inspect(m.ckpt)
}

// ggufDecoder decodes every type package gguf/ggml decodes.
func ggufDecoder() gguf.Decoder { return gguf.GGMLDecoder }

// inspectGGUF prints a GGUF model's bpw report plus the per-type breakdown
// (decoder Linears and the whole file); --json adds it as "gguf_types".
func inspectGGUF(w io.Writer, path string, asJSON bool) error {
	m, err := gguf.OpenModel(path, gguf.Options{Decoder: ggufDecoder(), Inspect: true})
	if err != nil {
		return usageErr(err)
	}
	defer m.Close()
	r, err := m.Inspect()
	if err != nil {
		return usageErr(err)
	}
	layers, all := m.TypeBreakdown()
	type share struct {
		Type    string  `json:"type"`
		Tensors int     `json:"tensors"`
		Weights int64   `json:"weights"`
		Bytes   int64   `json:"bytes"`
		BPW     float64 `json:"bpw"`
	}
	conv := func(ss []gguf.TypeShare) []share {
		out := make([]share, len(ss))
		for i, s := range ss {
			out[i] = share{s.Type.String(), s.Tensors, s.Weights, s.Bytes, float64(s.Bytes) * 8 / float64(s.Weights)}
		}
		return out
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*quant.Report
			Arch  string `json:"gguf_architecture"`
			Types any    `json:"gguf_types"`
		}{r, m.Arch, map[string][]share{"decoder_linears": conv(layers), "file": conv(all)}})
	}
	if err := writeInspect(w, r); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nGGUF %s, per ggml type:\n", m.Arch)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tdecoder tensors\tdecoder weights\tdecoder bpw\tfile tensors\tfile bytes\t")
	byType := map[gguf.Type]gguf.TypeShare{}
	for _, s := range layers {
		byType[s.Type] = s
	}
	for _, a := range all {
		l := byType[a.Type]
		bpw := "-"
		if l.Weights > 0 {
			bpw = fmt.Sprintf("%.4f", float64(l.Bytes)*8/float64(l.Weights))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t\n", a.Type, l.Tensors, l.Weights, bpw, a.Tensors, a.Bytes)
	}
	return tw.Flush()
}
