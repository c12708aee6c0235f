package quant

import (
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// Source is what quant reads tensors from; *checkpoint.Model implements it.
type Source interface {
	Tensor(name string) (checkpoint.TensorInfo, bool)
	ReadRaw(name string) ([]byte, error)
	Names() []string
}

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

// RowDequantizer is implemented by the Linears that decode any range of
// output rows on their own, so a caller can decode a layer block by block
// instead of holding all out·in float64 values at once.
type RowDequantizer interface {
	// DequantizeRows writes rows [r0, r1) of the exact weight, row-major,
	// into dst (len (r1-r0)·in): the same values Dequantize writes there.
	// Safe for concurrent use.
	DequantizeRows(r0, r1 int, dst []float64) error
}

// Base holds what every concrete Linear has.
type Base struct {
	Name     string // module name without ".weight"
	Out, In  int    // logical weight shape [Out, In]
	Fmt      string // short format description (Format())
	Bytes    int64  // stored bytes of the module's tensors, bias excluded
	Act      *ActQuant
	FileName string // file holding the weight, for error messages
}

// Module implements Linear.
func (b *Base) Module() string { return b.Name }

// Shape implements Linear.
func (b *Base) Shape() (int, int) { return b.Out, b.In }

// Format implements Linear.
func (b *Base) Format() string { return b.Fmt }

// StoredBytes implements Linear.
func (b *Base) StoredBytes() int64 { return b.Bytes }

// InputQuantizer implements Linear (nil when Act is nil).
func (b *Base) InputQuantizer() ActQuantizer {
	if b.Act == nil {
		return nil
	}
	return b.Act
}

func (b *Base) base() *Base { return b }

func (b *Base) checkDst(dst []float64) error {
	if len(dst) != b.Out*b.In {
		return fmt.Errorf("quant: %s: Dequantize: dst has %d elements, want %d×%d", b.Name, len(dst), b.Out, b.In)
	}
	return nil
}

func (b *Base) checkRows(r0, r1 int, dst []float64) error {
	if r0 < 0 || r1 > b.Out || r0 > r1 || len(dst) != (r1-r0)*b.In {
		return fmt.Errorf("quant: %s: DequantizeRows: rows [%d, %d) of %d into %d elements (in %d)", b.Name, r0, r1, b.Out, len(dst), b.In)
	}
	return nil
}

// checkFinite checks decoded values (the only way a finite scale gives a
// non-finite weight is overflow of the rounding dtype).
func (b *Base) checkFinite(dst []float64) error { return b.checkFiniteRows(0, dst) }

// checkFiniteRows is checkFinite for rows starting at r0.
func (b *Base) checkFiniteRows(r0 int, dst []float64) error {
	for i, v := range dst {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %s: weight element [%d,%d] decodes to %v", b.FileName, b.Name, r0+i/b.In, i%b.In, v)
		}
	}
	return nil
}

// Linear opens module (without the ".weight" suffix) of m.
func (s *Scheme) Linear(m *checkpoint.Model, module string) (Linear, error) {
	return s.Open(m, module)
}

// Open opens module (without ".weight") of src, choosing the decoder from
// the tensors present (formats.md §1 "For the Go loader" and §7): a format
// family's own marker tensor (qweight: GPTQ, AWQ) under its quant_method,
// compressed-tensors tensors (weight_packed, or weight with weight_scale)
// under the group that targets the module, else a dense weight.
func (s *Scheme) Open(src Source, module string) (Linear, error) {
	if tensor, e, r0, rows, ok := fusedExpertOf(src, module); ok { // quant/fused.go
		return openFusedExpert(src, module, tensor, e, r0, rows)
	}
	t := tensors{src, module}
	l, err := s.open(t)
	if err != nil {
		return nil, err
	}
	if out, in := l.Shape(); out <= 0 || in <= 0 {
		return nil, fmt.Errorf("module %s: empty weight [%d, %d]", module, out, in)
	}
	return l, nil
}

func (s *Scheme) open(t tensors) (Linear, error) {
	module := t.module
	fams := families()
	// A family with its own quant_method opens the modules that have one
	// of its marker tensors.
	for _, f := range fams {
		if f.method == "" || f.method != s.Method {
			continue
		}
		for _, k := range f.markers {
			if t.has(k) {
				return f.open(s, t, nil)
			}
		}
	}
	// A marker only one family uses, under another quant_method.
	var markedBy []string
	marker := ""
	for _, f := range fams {
		for _, k := range f.markers {
			if !ctTensor(k) && t.has(k) && (marker == "" || marker == k) {
				markedBy, marker = append(markedBy, f.name), k
			}
		}
	}
	if len(markedBy) > 0 {
		return nil, fmt.Errorf("module %s: has %s (%s) but quant_method is %s", module, marker, strings.Join(markedBy, "/"), s.Method)
	}
	switch {
	case t.has("weight_packed") || (t.has("weight") && t.has("weight_scale")):
		if s.Method != MethodCT {
			return nil, fmt.Errorf("module %s: has compressed-tensors tensors but quant_method is %s", module, s.Method)
		}
		g := s.groupFor(module)
		if g == nil || g.Weights == nil {
			return nil, fmt.Errorf("%s: module %s has quantized tensors but no config_groups entry targets it (or it is in ignore)", s.source, module)
		}
		return s.openCT(t, g)
	case t.has("weight"):
		l, err := openDense(t)
		if err == nil && s.Method == MethodCT {
			// A dense module can still carry input quantization (fake-quant
			// checkpoints); quantized-tensor modules handle it in openCT.
			if g := s.groupFor(module); g != nil && g.Input != nil && g.Format == FormatDense {
				if l.Act, err = openAct(t, g.Input, l.In); err != nil {
					return nil, err
				}
			}
		}
		return l, err
	}
	return nil, fmt.Errorf("module %s: no weight tensors found (looked for %s)", module, strings.Join(linearMarkers(), ", "))
}
