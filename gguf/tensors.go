package gguf

import (
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/quant"
)

// lookupHF returns the GGUF tensor behind a Hugging Face tensor name and
// marks it as read (Usage).
func (m *Model) lookupHF(hf string) (TensorInfo, *File, error) {
	ti, f, err := m.peekHF(hf)
	if err == nil {
		tn, _ := m.hfName(hf)
		m.mark(tn.GGUF)
	}
	return ti, f, err
}

// peekHF is lookupHF without marking (accounting, messages). For an
// expert's weight it returns expert's slice of the stacked 3-D tensor as a
// 2-D tensor of its own (expertSlice).
func (m *Model) peekHF(hf string) (TensorInfo, *File, error) {
	tn, ok := m.hfName(hf)
	ti, ok2 := m.tensors[tn.GGUF]
	if !ok || !ok2 {
		return TensorInfo{}, nil, fmt.Errorf("%s: no tensor for %q in the GGUF file", m.Path, hf)
	}
	if tn.Expert >= 0 {
		var err error
		if ti, err = expertSlice(ti, tn.Expert); err != nil {
			return TensorInfo{}, nil, err
		}
		if tn.GateUp != 0 {
			ti = gateUpHalf(ti, tn.GateUp)
		}
	}
	if tn.Shape != nil && len(ti.Dims) != len(tn.Shape) {
		// written without its size-1 dimensions (checkTensors checked
		// the others): presented with them.
		ti.Dims = make([]int64, len(tn.Shape))
		for i, d := range tn.Shape {
			ti.Dims[len(tn.Shape)-1-i] = int64(d)
		}
	}
	return ti, m.owner[tn.GGUF], nil
}

// Shape returns a tensor's Hugging Face shape by its Hugging Face name
// (ne reversed, with TensorName.Shape's size-1 dimensions), without
// marking it read.
func (m *Model) Shape(hf string) ([]int, bool) {
	ti, _, err := m.peekHF(hf)
	if err != nil {
		return nil, false
	}
	return reversed64(ti.Dims), true
}

func reversed64(ne []int64) []int {
	out := make([]int, len(ne))
	for i, d := range ne {
		out[len(ne)-1-i] = int(d)
	}
	return out
}

// DecayRate returns A = exp(A_log) of a Gated DeltaNet layer exactly as
// the file stores it (TensorName.Decay: llama.cpp's ssm_a = −exp(A_log) in
// float32, negated, in Hugging Face order), with ok true; ok is false when
// the file stores A_log itself (Float64 then gives it). hf is the A_log
// tensor's name.
func (m *Model) DecayRate(hf string) ([]float64, bool, error) {
	tn, ok := m.hfName(hf)
	if !ok || !tn.Decay {
		return nil, false, nil
	}
	ti, f, err := m.lookupHF(hf)
	if err != nil {
		return nil, false, err
	}
	v := make([]float64, ti.Numel())
	if err := m.decodeRange(ti, f, 0, ti.Numel(), v); err != nil {
		return nil, false, err
	}
	for i, s := range v {
		if !(s < 0) || math.IsInf(s, 0) {
			return nil, false, fmt.Errorf("%w: %s: tensor %q element %d = %v: llama.cpp stores −exp(A_log), which is negative and finite", ErrFormat, ti.File, ti.Name, i, s)
		}
		v[i] = -s
	}
	reorder(v, len(v), 1, tn.Rows, nil)
	return v, true, nil
}

// expertSlice returns expert e's 2-D weight (ne [in, out]) of a stacked
// tensor ne [in, out, experts] (llama.cpp's ffn_*_exps: the experts are
// its outermost dimension, each a contiguous run of out rows of blocks),
// named "<name>[e]" in messages.
func expertSlice(ti TensorInfo, e int) (TensorInfo, error) {
	if len(ti.Dims) != 3 || e < 0 || int64(e) >= ti.Dims[2] {
		return TensorInfo{}, fmt.Errorf("%w: %s: tensor %q has ne %v: no expert %d", ErrFormat, ti.File, ti.Name, ti.Dims, e)
	}
	size, err := rowBytes(ti.Type, ti.Dims[0]*ti.Dims[1])
	if err != nil {
		return TensorInfo{}, fmt.Errorf("%w: %s: tensor %q: %v", ErrFormat, ti.File, ti.Name, err)
	}
	out := ti
	out.Name = fmt.Sprintf("%s[%d]", ti.Name, e)
	out.Dims = []int64{ti.Dims[0], ti.Dims[1]}
	out.Offset += int64(e) * size
	out.Size = size
	return out, nil
}

// gateUpHalf returns the gate (h = 1) or up (h = 2) rows of an expert's
// slice of ffn_gate_up_exps (ne [in, 2·out]): the first or second half of
// its rows, each a contiguous run of whole rows (checkTensors checked the
// even row count).
func gateUpHalf(ti TensorInfo, h int) TensorInfo {
	out := ti
	out.Name = ti.Name + []string{"", ".gate", ".up"}[h]
	out.Dims = []int64{ti.Dims[0], ti.Dims[1] / 2}
	out.Size = ti.Size / 2
	out.Offset += int64(h-1) * out.Size
	return out
}

// hfName returns the table entry of a Hugging Face tensor name.
func (m *Model) hfName(hf string) (TensorName, bool) {
	if m.table == nil {
		return TensorName{}, false
	}
	tn, ok := m.table.byHF[hf]
	return tn, ok
}

// GGUFName returns the GGUF tensor holding a Hugging Face tensor of the
// model, and for an expert's weight its index in the stacked tensor (-1
// otherwise); "" when the model has no such tensor.
func (m *Model) GGUFName(hf string) (name string, expert int) {
	tn, ok := m.hfName(hf)
	if !ok {
		return "", -1
	}
	return tn.GGUF, tn.Expert
}

// TensorByGGUFName returns a tensor by its GGUF name.
func (m *Model) TensorByGGUFName(name string) (TensorInfo, bool) {
	ti, ok := m.tensors[name]
	return ti, ok
}

// TensorNames returns the GGUF tensor names in file order (parts in order).
func (m *Model) TensorNames() []string {
	var out []string
	for _, f := range m.Files {
		for _, t := range f.Tensors {
			out = append(out, t.Name)
		}
	}
	return out
}

// Where names the file holding a Hugging Face tensor or module, for
// messages (the model path when it has none).
func (m *Model) Where(hf string) string {
	for _, n := range []string{hf, hf + ".weight"} {
		if ti, _, err := m.peekHF(n); err == nil {
			return ti.File
		}
	}
	return m.Path
}

// decodeRange decodes elements [e0, e0+n) of a tensor (n and e0 whole
// blocks) to float64.
func (m *Model) decodeRange(ti TensorInfo, f *File, e0, n int64, dst []float64) error {
	bs := int64(ti.Type.BlockSize())
	if e0%bs != 0 || n%bs != 0 || int64(len(dst)) != n {
		return fmt.Errorf("%s: tensor %q: decoding [%d, +%d) into %d values", ti.File, ti.Name, e0, n, len(dst))
	}
	off, _ := rowBytes(ti.Type, e0)
	size, _ := rowBytes(ti.Type, n)
	raw, err := f.readAt(ti, off, size)
	if err != nil {
		return err
	}
	tmp := make([]float32, n)
	if err := m.decode(ti.Type, raw, int(n), tmp); err != nil {
		return fmt.Errorf("%s: tensor %q (%s): %w", ti.File, ti.Name, ti.Type, err)
	}
	for i, v := range tmp {
		dst[i] = float64(v)
	}
	return nil
}

// Float64 decodes a whole tensor by its Hugging Face name, returning its
// values (row-major) and its Hugging Face shape (ne reversed).
func (m *Model) Float64(hf string) ([]float64, []int, error) {
	if v, shape, ok, err := m.gptOssBias(hf); ok {
		return v, shape, err
	}
	ti, f, err := m.lookupHF(hf)
	if err != nil {
		return nil, nil, err
	}
	shape := make([]int, len(ti.Dims))
	for i, d := range ti.Dims {
		shape[len(shape)-1-i] = int(d)
	}
	dst := make([]float64, ti.Numel())
	if err := m.decodeRange(ti, f, 0, ti.Numel(), dst); err != nil {
		return nil, nil, err
	}
	tn, _ := m.hfName(hf)
	if tn.Rows != nil || tn.Cols != nil {
		rows := shape[0]
		reorder(dst, rows, len(dst)/rows, tn.Rows, tn.Cols)
	}
	if tn.FromGGUF != nil {
		stored := append([]float64(nil), dst...)
		tn.FromGGUF(dst)
		if err := m.applyResidual(tn, stored, dst); err != nil {
			return nil, nil, err
		}
	}
	return dst, shape, nil
}

// RowReader decodes blocks of rows of a 2-D tensor (the embedding).
type RowReader struct {
	m          *Model
	ti         TensorInfo
	f          *File
	rows, cols int
}

// Rows opens a 2-D tensor by its Hugging Face name for reading rows.
func (m *Model) Rows(hf string) (*RowReader, error) {
	ti, f, err := m.lookupHF(hf)
	if err != nil {
		return nil, err
	}
	if len(ti.Dims) != 2 {
		return nil, fmt.Errorf("%s: tensor %q has ne %v, want 2 dimensions", ti.File, ti.Name, ti.Dims)
	}
	return &RowReader{m: m, ti: ti, f: f, rows: int(ti.Dims[1]), cols: int(ti.Dims[0])}, nil
}

// Shape returns [rows, cols] (Hugging Face order).
func (r *RowReader) Shape() (int, int) { return r.rows, r.cols }

// Rows decodes rows [r0, r1) into dst (len (r1-r0)·cols).
func (r *RowReader) Rows(r0, r1 int, dst []float64) error {
	if r0 < 0 || r1 > r.rows || r0 > r1 || len(dst) != (r1-r0)*r.cols {
		return fmt.Errorf("%s: tensor %q: rows [%d, %d) of %d into %d values", r.ti.File, r.ti.Name, r0, r1, r.rows, len(dst))
	}
	return r.m.decodeRange(r.ti, r.f, int64(r0)*int64(r.cols), int64(r1-r0)*int64(r.cols), dst)
}

// Linear is a GGUF weight seen as a quant.Linear: its rows decoded by the
// type's decoder, and, for llama-architecture q/k weights, llama.cpp's row
// interleave undone so the rows are the Hugging Face model's.
type Linear struct {
	quant.Base
	m     *Model
	ti    TensorInfo
	f     *File
	heads int // > 0: undo the Q/K permutation over this many heads
	// rows, cols (nil: as stored): Hugging Face row i is stored row
	// rows[i], column j stored column cols[j] (TensorName.Rows, Cols).
	rows, cols []int
}

// Linear opens a linear module (Hugging Face name without ".weight").
// The head of a tied model (arch.HeadModule without output.weight) is
// token_embd.weight.
func (m *Model) Linear(module string) (quant.Linear, error) {
	name := module + ".weight"
	if module == arch.HeadModule && m.Spec.TiedHead {
		name = arch.EmbedName
	}
	ti, f, err := m.lookupHF(name)
	if err != nil {
		return nil, err
	}
	if len(ti.Dims) != 2 {
		return nil, fmt.Errorf("%s: tensor %q has ne %v, want 2 dimensions", ti.File, ti.Name, ti.Dims)
	}
	l := &Linear{
		Base: quant.Base{Name: module, Out: int(ti.Dims[1]), In: int(ti.Dims[0]), Fmt: "gguf-" + strings.ToLower(ti.Type.String()), Bytes: ti.Size, FileName: ti.File},
		m:    m, ti: ti, f: f,
	}
	if tn, _ := m.hfName(name); tn.Rows != nil || tn.Cols != nil {
		l.rows, l.cols = tn.Rows, tn.Cols
	}
	if m.decl.PermuteQK {
		switch {
		case strings.HasSuffix(module, ".self_attn.q_proj"):
			l.heads = m.Spec.Heads
		case strings.HasSuffix(module, ".self_attn.k_proj"):
			l.heads = m.Spec.KVHeads
		}
	}
	return l, nil
}

// Type returns the ggml type of the weight.
func (l *Linear) Type() Type { return l.ti.Type }

// Raw returns the weight's stored bytes: Out rows of In/BlockSize blocks
// of its type, in the file's row order (see RowOrder).
func (l *Linear) Raw() ([]byte, error) { return l.f.readAt(l.ti, 0, l.ti.Size) }

// RowOrder returns, for a weight whose rows llama.cpp's converter
// permuted (llama q_proj/k_proj), where each Hugging Face row is stored:
// row i of the Hugging Face weight is stored row RowOrder()[i]. It is nil
// when the rows are stored in the Hugging Face order.
func (l *Linear) RowOrder() []int {
	if l.rows != nil {
		return append([]int(nil), l.rows...)
	}
	if l.heads <= 0 {
		return nil
	}
	d := l.Out / l.heads
	rows := make([]int, l.Out)
	for h := 0; h < l.heads; h++ {
		for j := 0; j < d/2; j++ {
			for s := 0; s < 2; s++ {
				rows[h*d+s*d/2+j] = h*d + 2*j + s
			}
		}
	}
	return rows
}

// Raw returns a tensor's stored bytes by its Hugging Face name, with its
// GGUF tensor info (type, ne).
func (m *Model) Raw(hf string) (TensorInfo, []byte, error) {
	ti, f, err := m.lookupHF(hf)
	if err != nil {
		return TensorInfo{}, nil, err
	}
	raw, err := f.readAt(ti, 0, ti.Size)
	return ti, raw, err
}

// Dequantize implements quant.Linear.
func (l *Linear) Dequantize(dst []float64) error {
	if len(dst) != l.Out*l.In {
		return fmt.Errorf("gguf: %s: Dequantize: dst has %d elements, want %d×%d", l.Name, len(dst), l.Out, l.In)
	}
	if err := l.m.decodeRange(l.ti, l.f, 0, l.ti.Numel(), dst); err != nil {
		return err
	}
	for i, v := range dst {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: tensor %q: element [%d,%d] decodes to %v", l.ti.File, l.ti.Name, i/l.In, i%l.In, v)
		}
	}
	if l.heads > 0 {
		return Unpermute(dst, l.Out, l.In, l.heads)
	}
	if l.rows != nil || l.cols != nil {
		reorder(dst, l.Out, l.In, l.rows, l.cols)
	}
	return nil
}

// ColOrder returns, for a weight whose columns llama.cpp's converter
// reordered (qwen35's out_proj: value heads tiled), where each Hugging
// Face column is stored: column j is stored column ColOrder()[j]; nil when
// the columns are stored in the Hugging Face order.
func (l *Linear) ColOrder() []int { return append([]int(nil), l.cols...) }

// reorder rewrites a row-major [out][in] matrix in place so that element
// [i][j] becomes the stored element [rows[i]][cols[j]] (nil: identity).
func reorder(w []float64, out, in int, rows, cols []int) {
	src := append([]float64(nil), w...)
	for i := 0; i < out; i++ {
		r := i
		if rows != nil {
			r = rows[i]
		}
		for j := 0; j < in; j++ {
			c := j
			if cols != nil {
				c = cols[j]
			}
			w[i*in+j] = src[r*in+c]
		}
	}
}

// Unpermute undoes llama.cpp's converter permutation of a q or k weight
// (convert_hf_to_gguf's permute: rows viewed as [heads][2][D/2] are
// stored as [heads][D/2][2]), in place on a row-major [out][in] matrix:
// GGUF row h·D + 2j + s holds Hugging Face row h·D + s·D/2 + j.
func Unpermute(w []float64, out, in, heads int) error {
	if heads <= 0 || out%heads != 0 || (out/heads)%2 != 0 || len(w) != out*in {
		return fmt.Errorf("gguf: cannot unpermute %d×%d rows over %d heads", out, in, heads)
	}
	d := out / heads
	tmp := make([]float64, d*in)
	for h := 0; h < heads; h++ {
		blk := w[h*d*in : (h+1)*d*in]
		copy(tmp, blk)
		for j := 0; j < d/2; j++ {
			for s := 0; s < 2; s++ {
				copy(blk[(s*d/2+j)*in:(s*d/2+j+1)*in], tmp[(2*j+s)*in:(2*j+s+1)*in])
			}
		}
	}
	return nil
}

// Permute applies llama.cpp's converter permutation (the inverse of
// Unpermute) to the rows of a row-major [out][in] matrix of elements of
// esize bytes.
func Permute(w []byte, out, in, esize, heads int) error {
	if heads <= 0 || out%heads != 0 || (out/heads)%2 != 0 || len(w) != out*in*esize {
		return fmt.Errorf("gguf: cannot permute %d×%d rows over %d heads", out, in, heads)
	}
	d, row := out/heads, in*esize
	tmp := make([]byte, d*row)
	for h := 0; h < heads; h++ {
		blk := w[h*d*row : (h+1)*d*row]
		copy(tmp, blk)
		for j := 0; j < d/2; j++ {
			for s := 0; s < 2; s++ {
				copy(blk[(2*j+s)*row:(2*j+s+1)*row], tmp[(s*d/2+j)*row:(s*d/2+j+1)*row])
			}
		}
	}
	return nil
}
