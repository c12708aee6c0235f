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

func (b *Base) checkDst(dst []float64) error {
	if len(dst) != b.Out*b.In {
		return fmt.Errorf("quant: %s: Dequantize: dst has %d elements, want %d×%d", b.Name, len(dst), b.Out, b.In)
	}
	return nil
}

// checkFinite checks decoded values (the only way a finite scale gives a
// non-finite weight is overflow of the rounding dtype).
func (b *Base) checkFinite(dst []float64) error {
	for i, v := range dst {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %s: weight element [%d,%d] decodes to %v", b.FileName, b.Name, i/b.In, i%b.In, v)
		}
	}
	return nil
}

// Linear opens module (without the ".weight" suffix) of m.
func (s *Scheme) Linear(m *checkpoint.Model, module string) (Linear, error) {
	return s.Open(m, module)
}

// tensors is a module-scoped tensor reader with errors naming file and tensor.
type tensors struct {
	src    Source
	module string
}

func (t tensors) has(suffix string) bool {
	_, ok := t.src.Tensor(t.module + "." + suffix)
	return ok
}

func (t tensors) errf(ti checkpoint.TensorInfo, f string, a ...any) error {
	file := ti.File
	if file == "" {
		file = "checkpoint"
	}
	return fmt.Errorf("%s: tensor %s: %s", file, ti.Name, fmt.Sprintf(f, a...))
}

// file names the file holding the module's weight, for errors about a
// tensor that is absent.
func (t tensors) file() string {
	info := t.src.Tensor
	if pk, ok := t.src.(peeker); ok {
		info = pk.Peek
	}
	for _, s := range []string{"weight", "weight_packed", "qweight"} {
		if ti, ok := info(t.module + "." + s); ok && ti.File != "" {
			return ti.File
		}
	}
	return "checkpoint"
}

// get returns the tensor module.suffix, checking its dtype against dtypes
// (any when empty) and its rank.
func (t tensors) get(suffix string, dtypes ...string) (checkpoint.TensorInfo, error) {
	name := t.module + "." + suffix
	ti, ok := t.src.Tensor(name)
	if !ok {
		return ti, fmt.Errorf("%s: module %s: missing tensor %s", t.file(), t.module, name)
	}
	if len(dtypes) > 0 {
		okd := false
		for _, d := range dtypes {
			if string(ti.DType) == d {
				okd = true
			}
		}
		if !okd {
			return ti, t.errf(ti, "dtype %s, want %s", ti.DType, strings.Join(dtypes, " or "))
		}
	}
	return ti, nil
}

func (t tensors) raw(ti checkpoint.TensorInfo) ([]byte, error) {
	n := numel(ti.Shape)
	sz := int64(dtypeSize(string(ti.DType)))
	if n < 0 || sz == 0 || n*sz != ti.Size && ti.Size != 0 || n*sz > 1<<40 {
		return nil, t.errf(ti, "size %d bytes does not match dtype %s shape %v", ti.Size, ti.DType, ti.Shape)
	}
	b, err := t.src.ReadRaw(ti.Name)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", t.module, err)
	}
	if int64(len(b)) != n*sz {
		return nil, t.errf(ti, "read %d bytes, want %d", len(b), n*sz)
	}
	return b, nil
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<50)/int64(d)) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

func (t tensors) shape(ti checkpoint.TensorInfo, want ...int) error {
	if len(ti.Shape) != len(want) {
		return t.errf(ti, "shape %v, want %v", ti.Shape, want)
	}
	for i := range want {
		if ti.Shape[i] != want[i] {
			return t.errf(ti, "shape %v, want %v", ti.Shape, want)
		}
	}
	return nil
}

// floats reads a float tensor exactly.
func (t tensors) floats(ti checkpoint.TensorInfo) ([]float64, error) {
	b, err := t.raw(ti)
	if err != nil {
		return nil, err
	}
	v, ok := decodeFloats(string(ti.DType), b)
	if !ok {
		return nil, t.errf(ti, "dtype %s is not a float dtype", ti.DType)
	}
	return v, nil
}

// scales reads a scale tensor and checks every value is finite and > 0.
func (t tensors) scales(ti checkpoint.TensorInfo) ([]float64, error) {
	v, err := t.floats(ti)
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
			return nil, t.errf(ti, "element %d is %v: scales must be finite and > 0", i, x)
		}
	}
	return v, nil
}

func (t tensors) ints(ti checkpoint.TensorInfo) ([]int64, error) {
	b, err := t.raw(ti)
	if err != nil {
		return nil, err
	}
	v, ok := decodeInts(string(ti.DType), b)
	if !ok {
		return nil, t.errf(ti, "dtype %s is not an integer dtype", ti.DType)
	}
	return v, nil
}

func (t tensors) words(ti checkpoint.TensorInfo) ([]uint32, error) {
	v, err := t.ints(ti)
	if err != nil {
		return nil, err
	}
	w := make([]uint32, len(v))
	for i, x := range v {
		w[i] = uint32(x)
	}
	return w, nil
}

// peeker is a Source that describes a tensor without marking it as used
// (checkpoint.Model.Peek), so that accounting does not hide a tensor no
// decoder reads from the unused-tensor check.
type peeker interface {
	Peek(name string) (checkpoint.TensorInfo, bool)
}

// storedBytes sums the sizes of every tensor under module except its bias.
func storedBytes(src Source, module string) int64 {
	var n int64
	p := module + "."
	info := src.Tensor
	if pk, ok := src.(peeker); ok {
		info = pk.Peek
	}
	for _, name := range src.Names() {
		if strings.HasPrefix(name, p) && !strings.Contains(name[len(p):], ".") && name != p+"bias" {
			if ti, ok := info(name); ok {
				n += ti.Size
			}
		}
	}
	return n
}

// Open opens module (without ".weight") of src, choosing the decoder from
// the tensors present (formats.md §1 "For the Go loader" and §7).
func (s *Scheme) Open(src Source, module string) (Linear, error) {
	t := tensors{src, module}
	var l Linear
	var err error
	switch {
	case t.has("qweight"):
		switch s.Method {
		case MethodGPTQ:
			l, err = openGPTQ(t, s.GPTQ)
		case MethodAWQ:
			l, err = openAWQ(t, s.AWQ)
		default:
			return nil, fmt.Errorf("module %s: has qweight (GPTQ/AWQ) but quant_method is %s", module, s.Method)
		}
	case t.has("weight_packed") || (t.has("weight") && t.has("weight_scale")):
		if s.Method != MethodCT {
			return nil, fmt.Errorf("module %s: has compressed-tensors tensors but quant_method is %s", module, s.Method)
		}
		g := s.groupFor(module)
		if g == nil || g.Weights == nil {
			return nil, fmt.Errorf("%s: module %s has quantized tensors but no config_groups entry targets it (or it is in ignore)", s.source, module)
		}
		l, err = s.openCT(t, g)
	case t.has("weight"):
		l, err = openDense(t)
		if err == nil && s.Method == MethodCT {
			// A dense module can still carry input quantization (fake-quant
			// checkpoints); quantized-tensor modules handle it in openCT.
			if g := s.groupFor(module); g != nil && g.Input != nil && g.Format == FormatDense {
				b := l.(*Dense)
				if b.Act, err = openAct(t, g.Input, b.In); err != nil {
					return nil, err
				}
			}
		}
	default:
		return nil, fmt.Errorf("module %s: no weight tensors found (looked for weight, weight_packed, qweight)", module)
	}
	if err != nil {
		return nil, err
	}
	if out, in := l.Shape(); out <= 0 || in <= 0 {
		return nil, fmt.Errorf("module %s: empty weight [%d, %d]", module, out, in)
	}
	return l, nil
}

// Dense is an unquantized F32/F16/BF16/F64 weight.
type Dense struct {
	Base
	DType string // safetensors dtype of Raw
	Raw   []byte // the weight's bytes as stored, row-major [Out][In]
}

// matrix reads the 2-D [out, in] tensor module.suffix, of one of dtypes,
// as raw bytes.
func (t tensors) matrix(suffix string, dtypes ...string) (ti checkpoint.TensorInfo, raw []byte, err error) {
	if ti, err = t.get(suffix, dtypes...); err != nil {
		return ti, nil, err
	}
	if len(ti.Shape) != 2 {
		return ti, nil, t.errf(ti, "shape %v, want [out, in]", ti.Shape)
	}
	raw, err = t.raw(ti)
	return ti, raw, err
}

func openDense(t tensors) (*Dense, error) {
	ti, raw, err := t.matrix("weight", "F32", "F16", "BF16", "F64")
	if err != nil {
		return nil, err
	}
	d := &Dense{DType: string(ti.DType), Raw: raw}
	d.Base = Base{Name: t.module, Out: ti.Shape[0], In: ti.Shape[1], Fmt: strings.ToLower(string(ti.DType)),
		Bytes: storedBytes(t.src, t.module), FileName: ti.File}
	return d, nil
}

// Dequantize implements Linear.
func (d *Dense) Dequantize(dst []float64) error {
	if err := d.checkDst(dst); err != nil {
		return err
	}
	if !decodeFloatsInto(d.DType, d.Raw, dst) {
		return fmt.Errorf("quant: %s: cannot decode %d bytes of %s into %d weights", d.Name, len(d.Raw), d.DType, len(dst))
	}
	return nil
}
