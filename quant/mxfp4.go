package quant

import (
	"fmt"
	"github.com/qppl/qppl/checkpoint"
	"math"
	"strings"
)

// MXFP4 is an mxfp4-pack-quantized weight: E2M1 codes packed like NVFP4 and
// one E8M0 scale 2^(e-127) per 32 columns. The product is exact.
type MXFP4 struct {
	Base
	Packed []byte // [Out][In/2]
	Scales []byte // [Out][In/32] E8M0 exponents
}

// Dequantize implements Linear.
func (m *MXFP4) Dequantize(dst []float64) error {
	if err := m.checkDst(dst); err != nil {
		return err
	}
	return m.DequantizeRows(0, m.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (m *MXFP4) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := m.checkRows(r0, r1, dst); err != nil {
		return err
	}
	half, groups := m.In/2, m.In/32
	var lut [16]float64
	for r := r0; r < r1; r++ {
		for g := 0; g < groups; g++ {
			sc := DecodeE8M0(m.Scales[r*groups+g])
			for code := range lut {
				lut[code] = DecodeE2M1(byte(code)) * sc
			}
			d := dst[(r-r0)*m.In+32*g : (r-r0)*m.In+32*g+32]
			p := m.Packed[r*half+16*g : r*half+16*g+16]
			for k, b := range p {
				d[2*k] = lut[b&0xF]
				d[2*k+1] = lut[b>>4]
			}
		}
	}
	return m.checkFiniteRows(r0, dst)
}

func openMXFP4(t tensors) (*MXFP4, error) {
	pti, err := t.get("weight_packed", "U8")
	if err != nil {
		return nil, err
	}
	if len(pti.Shape) != 2 {
		return nil, t.errf(pti, "shape %v, want [out, in/2]", pti.Shape)
	}
	out, in := pti.Shape[0], 2*pti.Shape[1]
	if in%32 != 0 {
		return nil, t.errf(pti, "in_features %d is not a multiple of 32", in)
	}
	sti, err := t.get("weight_scale", "U8", "F8_E8M0")
	if err != nil {
		return nil, err
	}
	if err := t.shape(sti, out, in/32); err != nil {
		return nil, err
	}
	packed, err := t.raw(pti)
	if err != nil {
		return nil, err
	}
	scales, err := e8m0Scales(t, sti)
	if err != nil {
		return nil, err
	}
	m := &MXFP4{Packed: packed, Scales: scales}
	m.Base = Base{Out: out, In: in, Fmt: "mxfp4", FileName: pti.File}
	return m, nil
}

func mxfp4Family() family {
	return family{
		name:       "mxfp4",
		argFormats: []string{FormatMXFP4},
		checkArgs: func(a *Args, format string) error {
			if a.Type != "float" || a.NumBits != 4 || a.GroupSize != 32 {
				return fmt.Errorf("format %s needs float 4-bit weights with group_size 32", format)
			}
			return nil
		},
		ctFormats: []string{FormatMXFP4},
		open: func(_ *Scheme, t tensors, _ *Group) (Linear, error) {
			m, err := openMXFP4(t)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
	}
}

// isMX reports MX arguments: E8M0 scales (scale_dtype uint8) or float
// 4-bit values in groups of 32 (compressed-tensors' is_mx).
func isMX(a *Args) bool {
	return strings.Contains(a.ScaleDType, "uint8") || (a.Type == "float" && a.NumBits == 4 && a.GroupSize == 32)
}

// checkMXInputArgs accepts MX activations as compressed-tensors' MXFP4
// preset writes them: dynamic, symmetric, float 4-bit groups of 32.
func checkMXInputArgs(a *Args) error {
	if a.Type != "float" || a.NumBits != 4 || a.Strategy != "group" || a.GroupSize != 32 || !a.Dynamic || !a.Symmetric {
		return fmt.Errorf("MX activations need dynamic symmetric float 4-bit groups of 32 (have %s %d-bit, strategy %s, group %d, dynamic %v)",
			a.Type, a.NumBits, a.Strategy, a.GroupSize, a.Dynamic)
	}
	return nil
}

// MXScale is the E8M0 scale compressed-tensors gives a group whose largest
// magnitude is amax > 0 (generate_mxfp4_scales): amax rounded to a power of
// two p, up when its significand is at least 1.75 (round_to_power_2 adds
// 2^5 to the bf16 bits and keeps sign and exponent), then 2^(log2 p - 2),
// the exponent clamped to the E8M0 range [-127, 128].
func MXScale(amax float64) float64 {
	frac, k := math.Frexp(amax) // amax = frac·2^k, frac in [0.5, 1)
	e := k - 1
	if frac >= 0.875 { // significand 2·frac >= 1.75
		e++
	}
	return math.Ldexp(1, min(128, max(-127, e-2)))
}

// e8m0Scales reads the E8M0 group scales of sti, refusing the E8M0 NaN.
func e8m0Scales(t tensors, sti checkpoint.TensorInfo) ([]byte, error) {
	scales, err := t.raw(sti)
	if err != nil {
		return nil, err
	}
	for i, b := range scales {
		if b == 255 {
			return nil, t.errf(sti, "element %d is the E8M0 NaN (0xFF)", i)
		}
	}
	return scales, nil
}
