package quant

import (
	"fmt"

	"github.com/qppl/qppl/checkpoint"
)

// FP8 is a float-quantized / naive-quantized FP8 E4M3 weight (formats.md
// §2.3): W[r,c] = RoundDType(ScaleDType, e4m3(Codes[r,c]) *
// Scale[(r/BlockRows)*ScaleCols + c/BlockCols]).
type FP8 struct {
	Base
	Strategy             string // tensor, channel, group or block
	Codes                []byte // [Out][In] float8_e4m3fn bytes
	Scale                []float64
	ScaleDType           string
	ScaleRows, ScaleCols int // shape of Scale
	BlockRows, BlockCols int // rows/cols covered by one scale
}

// Dequantize implements Linear.
func (f *FP8) Dequantize(dst []float64) error {
	if err := f.checkDst(dst); err != nil {
		return err
	}
	return f.DequantizeRows(0, f.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (f *FP8) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := f.checkRows(r0, r1, dst); err != nil {
		return err
	}
	var e4m3 [256]float64
	for b := range e4m3 {
		e4m3[b] = DecodeE4M3(byte(b))
	}
	// One 256-entry table per scale, rebuilt when the scale row changes.
	lut := make([]float64, 256*f.ScaleCols)
	for r := r0; r < r1; r++ {
		if r == r0 || r%f.BlockRows == 0 {
			srow := f.Scale[(r/f.BlockRows)*f.ScaleCols : (r/f.BlockRows+1)*f.ScaleCols]
			for j, s := range srow {
				for b := range e4m3 {
					lut[j*256+b] = RoundDType(f.ScaleDType, e4m3[b]*s)
				}
			}
		}
		for c := 0; c < f.In; c++ {
			dst[(r-r0)*f.In+c] = lut[(c/f.BlockCols)*256+int(f.Codes[r*f.In+c])]
		}
	}
	return f.checkFiniteRows(r0, dst)
}

// NVFP4 is an nvfp4-pack-quantized weight (formats.md §2.2): E2M1 codes,

func openFP8(t tensors, w *Args) (*FP8, error) {
	return openFP8Scaled(t, w, "weight_scale", "BF16", "F16", "F32")
}

// openFP8Scaled opens an E4M3 weight whose scales (strategy and block of
// w) are the tensor scaleSuffix of one of scaleDTypes.
func openFP8Scaled(t tensors, w *Args, scaleSuffix string, scaleDTypes ...string) (*FP8, error) {
	ti, codes, err := t.matrix("weight", "F8_E4M3")
	if err != nil {
		return nil, err
	}
	out, in := ti.Shape[0], ti.Shape[1]
	for i, b := range codes {
		if b&0x7F == 0x7F {
			return nil, t.errf(ti, "element [%d,%d] is NaN (0x%02X)", i/in, i%in, b)
		}
	}
	sti, err := t.get(scaleSuffix, scaleDTypes...)
	if err != nil {
		return nil, err
	}
	f := &FP8{Strategy: w.Strategy, Codes: codes, ScaleDType: string(sti.DType)}
	switch w.Strategy {
	case "tensor":
		f.ScaleRows, f.ScaleCols, f.BlockRows, f.BlockCols = 1, 1, out, in
		if numel(sti.Shape) != 1 {
			return nil, t.errf(sti, "shape %v, want [1] for tensor strategy", sti.Shape)
		}
	case "channel":
		f.ScaleRows, f.ScaleCols, f.BlockRows, f.BlockCols = out, 1, 1, in
		if err := t.shape(sti, out, 1); err != nil {
			return nil, err
		}
	case "group":
		gs := w.GroupSize
		if in%gs != 0 {
			return nil, fmt.Errorf("module %s: quantization_config group_size %d does not divide in_features %d", t.module, gs, in)
		}
		f.ScaleRows, f.ScaleCols, f.BlockRows, f.BlockCols = out, in/gs, 1, gs
		if err := t.shape(sti, out, in/gs); err != nil {
			return nil, err
		}
	case "block":
		bh, bw := w.BlockStructure[0], w.BlockStructure[1]
		f.ScaleRows, f.ScaleCols, f.BlockRows, f.BlockCols = (out+bh-1)/bh, (in+bw-1)/bw, bh, bw
		if err := t.shape(sti, f.ScaleRows, f.ScaleCols); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("module %s: strategy %s not supported for fp8 weights", t.module, w.Strategy)
	}
	if f.Scale, err = t.scales(sti); err != nil {
		return nil, err
	}
	f.Base = Base{Out: out, In: in, Fmt: "fp8-" + w.Strategy, FileName: ti.File}
	if w.Strategy == "block" {
		f.Fmt = fmt.Sprintf("fp8-block%dx%d", f.BlockRows, f.BlockCols)
	}
	return f, nil
}

// fp8Family decodes F8_E4M3 weights stored under float-quantized or
// naive-quantized (and int-quantized, whose int arguments never fit).
func fp8Family() family {
	return family{
		name:       "fp8",
		argFormats: []string{FormatFloatQuantized, FormatNaiveQuantized},
		checkArgs: func(a *Args, format string) error {
			if a.Type == "float" && a.NumBits != 8 {
				return fmt.Errorf("format %s needs 8-bit float weights, got %d bits", format, a.NumBits)
			}
			switch a.Strategy {
			case "tensor", "channel", "group", "block":
			default:
				return fmt.Errorf("strategy %s is not supported for %s weights", a.Strategy, format)
			}
			return nil
		},
		ctFormats: []string{FormatIntQuantized, FormatNaiveQuantized, FormatFloatQuantized},
		accepts: func(w *Args, weight checkpoint.TensorInfo) bool {
			return weight.DType == "F8_E4M3" && w.Type == "float" && w.NumBits == 8
		},
		open: func(_ *Scheme, t tensors, g *Group) (Linear, error) {
			f, err := openFP8(t, g.Weights)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
	}
}
