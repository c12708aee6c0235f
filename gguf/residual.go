package gguf

import (
	"fmt"
	"math"
	"strings"
)

// ResidualPrefix starts the metadata keys qppl's converter adds beside a
// tensor the architecture stores transformed (TensorName.ToGGUF: gemma's
// norm gains 1 + w rounded to float32): ResidualPrefix + the GGUF tensor
// name holds, as a float32 array, what the transform's rounding lost,
// r = w − FromGGUF(ToGGUF(w)) per element, so that the Hugging Face value
// is exactly FromGGUF(v) + r (in float64). llama.cpp ignores these keys;
// the reader adds r only after checking that it changes no stored value
// (ToGGUF(FromGGUF(v) + r) = v for every element), so a file cannot say
// one thing to llama.cpp and another to qppl beyond that rounding. The
// key is written only for tensors where some r ≠ 0.
const ResidualPrefix = "qppl.residual."

// residualKV returns the residual of the converted values v (after ToGGUF)
// of the original values w, or ok false when every residual is 0. It fails
// when FromGGUF(v) + r would not give w back exactly.
func residualKV(tn TensorName, w, v []float64) (KV, bool, error) {
	back := append([]float64(nil), v...)
	tn.FromGGUF(back)
	r := make([]float32, len(w))
	nonzero := false
	for i := range w {
		d := w[i] - back[i]
		if float64(float32(d)) != d || back[i]+float64(float32(d)) != w[i] {
			return KV{}, false, fmt.Errorf("gguf: convert: tensor %q element %d: %v is not recoverable from the stored %v", tn.GGUF, i, w[i], v[i])
		}
		r[i] = float32(d)
		nonzero = nonzero || d != 0
	}
	if !nonzero {
		return KV{}, false, nil
	}
	return KV{ResidualPrefix + tn.GGUF, Float32Array(r)}, true, nil
}

// applyResidual adds the residual of the GGUF tensor tn.GGUF (when the file
// has one) to the Hugging Face values dst = FromGGUF(stored), after
// checking its type and length and that ToGGUF(dst + r) is the stored
// value again.
func (m *Model) applyResidual(tn TensorName, stored, dst []float64) error {
	key := ResidualPrefix + tn.GGUF
	v, ok := m.meta(key)
	if !ok {
		return nil
	}
	a, isArr := v.Array()
	if !isArr || a.Elem != TypeFloat32 || a.Len != len(dst) {
		return m.metaErr(key, v, fmt.Sprintf("want %d float32 values (the residual of tensor %q)", len(dst), tn.GGUF))
	}
	out := make([]float64, len(dst))
	for i := range dst {
		r, _ := a.At(i).Float()
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return m.metaErr(key, v, fmt.Sprintf("element %d is %v", i, r))
		}
		out[i] = dst[i] + r
	}
	check := append([]float64(nil), out...)
	tn.ToGGUF(check)
	for i := range check {
		if check[i] != stored[i] {
			return fmt.Errorf("%w: %s: metadata %q element %d: %v + residual does not round to the stored %v of tensor %q", ErrFormat, m.Files[0].Path, key, i, dst[i], stored[i], tn.GGUF)
		}
	}
	copy(dst, out)
	return nil
}

// checkResiduals validates every residual key when the model is opened:
// its tensor must be one the architecture stores transformed, and the
// residual must have its length and keep every stored value.
func (m *Model) checkResiduals() error {
	for _, f := range m.Files[:1] {
		for _, kv := range f.KVs {
			name, ok := strings.CutPrefix(kv.Key, ResidualPrefix)
			if !ok {
				continue
			}
			var tn *TensorName
			for i := range m.table.order {
				if x := &m.table.order[i]; x.GGUF == name && x.FromGGUF != nil && !x.StoredForm {
					tn = x
					break
				}
			}
			ti, ok := m.tensors[name]
			if tn == nil || !ok {
				return fmt.Errorf("%w: %s: metadata %q: tensor %q is not stored transformed", ErrFormat, m.Files[0].Path, kv.Key, name)
			}
			// Validate it now, not when the tensor is first read.
			dst := make([]float64, ti.Numel())
			if err := m.decodeRange(ti, m.owner[name], 0, ti.Numel(), dst); err != nil {
				return err
			}
			stored := append([]float64(nil), dst...)
			tn.FromGGUF(dst)
			if err := m.applyResidual(*tn, stored, dst); err != nil {
				return err
			}
		}
	}
	return nil
}
