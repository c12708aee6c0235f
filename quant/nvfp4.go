package quant

import (
	"fmt"
	"math"
)

// NVFP4 is an nvfp4-pack-quantized weight (formats.md §2.2): E2M1 codes,
// low nibble first, per-16 E4M3 scales divided by the global scale:
// W = RoundDType(OutDType, f32(e2m1 * f32(e4m3(s) / GlobalScale))).
type NVFP4 struct {
	Base
	Packed      []byte  // [Out][In/2]; byte n holds element 2n (low nibble) and 2n+1 (high)
	Scales      []byte  // [Out][In/16] float8_e4m3fn
	GlobalScale float32 // weight_global_scale (a divisor), or ModelOpt's weight_scale_2 when Scale2
	OutDType    string  // dtype the decoded weight is rounded to (the model dtype)
	// Scale2 says GlobalScale multiplies the block scales (ModelOpt's
	// weight_scale_2): W = RoundDType(OutDType, f32(e2m1 * f32(e4m3(s) *
	// GlobalScale))) (modelopt.go).
	Scale2 bool
}

// Dequantize implements Linear.
func (n *NVFP4) Dequantize(dst []float64) error {
	if err := n.checkDst(dst); err != nil {
		return err
	}
	return n.DequantizeRows(0, n.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (n *NVFP4) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := n.checkRows(r0, r1, dst); err != nil {
		return err
	}
	gs := float64(n.GlobalScale)
	half, sixteenth := n.In/2, n.In/16
	var lut [16]float64
	for r := r0; r < r1; r++ {
		for g := 0; g < sixteenth; g++ {
			eff := RoundF32(DecodeE4M3(n.Scales[r*sixteenth+g]) / gs)
			if n.Scale2 {
				eff = RoundF32(DecodeE4M3(n.Scales[r*sixteenth+g]) * gs)
			}
			for code := range lut {
				lut[code] = RoundDType(n.OutDType, RoundF32(DecodeE2M1(byte(code))*eff))
			}
			d := dst[(r-r0)*n.In+16*g : (r-r0)*n.In+16*g+16]
			p := n.Packed[r*half+8*g : r*half+8*g+8]
			for k, b := range p {
				d[2*k] = lut[b&0xF]
				d[2*k+1] = lut[b>>4]
			}
		}
	}
	return n.checkFiniteRows(r0, dst)
}

func openNVFP4(t tensors, outDType string) (*NVFP4, error) {
	return openNVFP4Tensors(t, outDType, "weight_packed", "weight_global_scale")
}

// openNVFP4Tensors opens packed E2M1 codes (tensor packedName), E4M3
// weight_scale per 16 and the F32 per-tensor scale globalName.
func openNVFP4Tensors(t tensors, outDType, packedName, globalName string) (*NVFP4, error) {
	pti, err := t.get(packedName, "U8")
	if err != nil {
		return nil, err
	}
	if len(pti.Shape) != 2 {
		return nil, t.errf(pti, "shape %v, want [out, in/2]", pti.Shape)
	}
	out, in := pti.Shape[0], 2*pti.Shape[1]
	if in%16 != 0 {
		return nil, t.errf(pti, "in_features %d is not a multiple of 16", in)
	}
	sti, err := t.get("weight_scale", "F8_E4M3")
	if err != nil {
		return nil, err
	}
	if err := t.shape(sti, out, in/16); err != nil {
		return nil, err
	}
	gti, err := t.get(globalName, "F32")
	if err != nil {
		return nil, err
	}
	if numel(gti.Shape) != 1 {
		return nil, t.errf(gti, "shape %v, want [1] (or [])", gti.Shape)
	}
	gsv, err := t.scales(gti)
	if err != nil {
		return nil, err
	}
	packed, err := t.raw(pti)
	if err != nil {
		return nil, err
	}
	scales, err := t.raw(sti)
	if err != nil {
		return nil, err
	}
	for i, b := range scales {
		v := DecodeE4M3(b)
		if math.IsNaN(v) || v <= 0 {
			return nil, t.errf(sti, "element %d is %v (0x%02X): scales must be finite and > 0", i, v, b)
		}
	}
	n := &NVFP4{Packed: packed, Scales: scales, GlobalScale: float32(gsv[0]), OutDType: outDType}
	n.Base = Base{Out: out, In: in, Fmt: "nvfp4", FileName: pti.File}
	return n, nil
}

func nvfp4Family() family {
	return family{
		name:       "nvfp4",
		argFormats: []string{FormatNVFP4},
		checkArgs: func(a *Args, format string) error {
			if a.Type != "float" || a.NumBits != 4 || a.GroupSize != 16 {
				return fmt.Errorf("format %s needs float 4-bit weights with group_size 16", format)
			}
			return nil
		},
		ctFormats: []string{FormatNVFP4},
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			n, err := openNVFP4(t, s.ModelDType)
			if err != nil {
				return nil, err
			}
			return n, nil
		},
	}
}
