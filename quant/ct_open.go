package quant

import (
	"fmt"
	"slices"

	"github.com/qppl/qppl/checkpoint"
)

// This file routes a compressed-tensors module to the family that decodes
// its group's format (formats.go) and validates weight arguments per
// format; the families themselves live in their own files.

// openCT opens a module with compressed-tensors tensors under config group g.
func (s *Scheme) openCT(t tensors, g *Group) (Linear, error) {
	w := g.Weights
	var weight *checkpoint.TensorInfo // the stored weight, read once when a family asks
	var chosen *family
	listed := false
	for _, f := range families() {
		if !slices.Contains(f.ctFormats, g.Format) {
			continue
		}
		listed = true
		if f.accepts != nil {
			if weight == nil {
				ti, err := t.get("weight")
				if err != nil {
					return nil, err
				}
				weight = &ti
			}
			if !f.accepts(w, *weight) {
				continue
			}
		}
		chosen = &f
		break
	}
	switch {
	case chosen == nil && listed && weight != nil:
		return nil, t.errf(*weight, "dtype %s does not fit format %s with %s %d-bit weights", weight.DType, g.Format, w.Type, w.NumBits)
	case chosen == nil:
		return nil, fmt.Errorf("module %s: format %s cannot be decoded", t.module, g.Format)
	}
	l, err := chosen.open(s, t, g)
	if err != nil {
		return nil, err
	}
	base := l.(interface{ base() *Base }).base()
	base.Name = t.module
	base.Bytes = storedBytes(t.src, t.module)
	if g.Input != nil {
		if base.Act, err = openAct(t, g.Input, base.In); err != nil {
			return nil, err
		}
		base.Fmt += "+" + base.Act.describe()
	}
	return l, nil
}

// checkWeightArgs validates a group's weight arguments for its format with
// the family that owns the format's arguments (formats without one take
// any).
func checkWeightArgs(a *Args, format string) error {
	if a.Dynamic {
		return fmt.Errorf("dynamic weight quantization is not supported")
	}
	for _, f := range families() {
		if slices.Contains(f.argFormats, format) {
			return f.checkArgs(a, format)
		}
	}
	return nil
}
