// Package quant parses quantization_config, describes how each Linear of a
// checkpoint is stored, decodes packed weights exactly to float64 and
// accounts bits per weight.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package quant

import (
	"errors"

	"github.com/qppl/qppl/checkpoint"
)

var errTODO = errors.New("quant: not implemented yet")

// Scheme is a parsed quantization_config (or the absence of one).
type Scheme struct{}

// Parse reads cfg.QuantizationConfig; a nil config gives the dense scheme.
func Parse(cfg *checkpoint.Config) (*Scheme, error) { return &Scheme{}, nil }

// Linear is one linear layer's weight as stored in the checkpoint.
type Linear interface {
	Module() string // e.g. "model.layers.0.self_attn.q_proj"
	Shape() (out, in int)
	Format() string     // e.g. "bf16", "ct-int4-g128-sym", "nvfp4"
	StoredBytes() int64 // bytes of all its stored tensors (for bpw)
	// Dequantize writes the exact weight, row-major [out][in], into dst
	// (len out*in).
	Dequantize(dst []float64) error
	// InputQuantizer returns the run-time activation quantizer this layer's
	// checkpoint prescribes, or nil for weight-only formats.
	InputQuantizer() ActQuantizer
}

// ActQuantizer fake-quantizes a Linear's input in place, x row-major
// [rows][cols], one row per token (formats.md section 8).
type ActQuantizer interface {
	Quantize(x []float64, rows, cols int) error
}

// Linear opens module (without the ".weight" suffix) of m.
func (s *Scheme) Linear(m *checkpoint.Model, module string) (Linear, error) { return nil, errTODO }
