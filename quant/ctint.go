package quant

import "github.com/qppl/qppl/checkpoint"

// weight: signed codes stored as I8, one per element (formats.md §2.4).
// UnpackedInt is a compressed-tensors int-quantized (or naive-quantized int)
// weight: signed codes stored as I8, one per element (formats.md §2.4).
type UnpackedInt struct {
	Base
	IntParams
	Codes []int8 // [Out][In]
}

// Dequantize implements Linear.
func (u *UnpackedInt) Dequantize(dst []float64) error {
	if err := u.checkDst(dst); err != nil {
		return err
	}
	return u.DequantizeRows(0, u.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (u *UnpackedInt) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := u.checkRows(r0, r1, dst); err != nil {
		return err
	}
	var lut []float64
	off := 1 << (u.Bits - 1)
	for r := r0; r < r1; r++ {
		lut = u.luts(r, lut)
		for c := 0; c < u.In; c++ {
			dst[(r-r0)*u.In+c] = lut[u.group(c)<<u.Bits+int(u.Codes[r*u.In+c])+off]
		}
	}
	return u.checkFiniteRows(r0, dst)
}

// FP8 is a float-quantized / naive-quantized FP8 E4M3 weight (formats.md
// §2.3): W[r,c] = RoundDType(ScaleDType, e4m3(Codes[r,c]) *

func openUnpacked(t tensors, w *Args) (*UnpackedInt, error) {
	ti, raw, err := t.matrix("weight", "I8")
	if err != nil {
		return nil, err
	}
	out, in := ti.Shape[0], ti.Shape[1]
	u := &UnpackedInt{Codes: make([]int8, len(raw))}
	lo, hi := -(1 << (w.NumBits - 1)), 1<<(w.NumBits-1)-1
	for i, b := range raw {
		v := int8(b)
		if int(v) < lo || int(v) > hi {
			return nil, t.errf(ti, "code %d at [%d,%d] outside the %d-bit range [%d, %d]", v, i/in, i%in, w.NumBits, lo, hi)
		}
		u.Codes[i] = v
	}
	if u.IntParams, err = intParams(t, w, out, in, false); err != nil {
		return nil, err
	}
	u.Base = Base{Out: out, In: in, Fmt: intFormat("ct-unpacked", u.IntParams), FileName: ti.File}
	return u, nil
}

// ctIntFamily decodes I8 codes stored under int-quantized (W8A8), and under
// naive-quantized or float-quantized when the weights are int.
func ctIntFamily() family {
	return family{
		name:       "int-quantized",
		argFormats: []string{FormatIntQuantized},
		checkArgs:  checkIntArgs,
		ctFormats:  []string{FormatIntQuantized, FormatNaiveQuantized, FormatFloatQuantized},
		accepts: func(w *Args, weight checkpoint.TensorInfo) bool {
			return weight.DType == "I8" && w.Type == "int"
		},
		open: func(_ *Scheme, t tensors, g *Group) (Linear, error) {
			u, err := openUnpacked(t, g.Weights)
			if err != nil {
				return nil, err
			}
			return u, nil
		},
	}
}
