package quant

import (
	"fmt"
	"math"
)

// ActQuantizer fake-quantizes a Linear's input in place, x row-major
// [rows][cols], one row per token (formats.md section 8).
type ActQuantizer interface {
	Quantize(x []float64, rows, cols int) error
}

// Activation grid kinds of ActQuant.
const (
	ActInt = "int" // signed integer grid, RHE
	ActFP8 = "fp8" // float8 E4M3, RNE
	ActFP4 = "fp4" // NVFP4: E2M1 codes, E4M3 local scales over a global scale
	// ActMXFP4 is MXFP4: E2M1 codes, one power-of-two (E8M0) scale per 32
	// (MXScale).
	ActMXFP4 = "mxfp4"
	// ActLLMInt8 is bitsandbytes' LLM.int8 input side: outlier columns
	// (|x| >= Threshold in some row) kept, the rest int8 per row with
	// s = amax/127 (bnb.go).
	ActLLMInt8 = "llm-int8"
)

// ActQuant is the run-time input quantizer of formats.md §8.2 (the
// normative float64 rule): one binary64 operation per step in the order of
// the spec, divisions (never reciprocals), clamp before rounding, and the
// ±D pin for symmetric dynamic int.
//
// The result is a pure function of x, bit for bit. Two forward passes whose
// x differ in the last bit (different summation orders) can still pick
// different codes where y = x/s lies on a rounding boundary. Beyond the int8
// ±amax case the spec pins, such ties are structural in BF16 models: after
// RMSNorm the RMS factor cancels in x/s, leaving a ratio of bf16 products
// that can land exactly on an E4M3 midpoint or an integer + 0.5 (seen in
// fixtures/quantizer's end-to-end tests on the BF16 qwen2 fixture and the
// trained tiny-wt2-mistral model).
type ActQuant struct {
	Kind        string  // ActInt, ActFP8, ActFP4 or ActMXFP4
	Bits        int     // int: 1..8 (8 in practice); fp8: 8; fp4: 4
	Strategy    string  // "token" (one scale per row), "tensor" (whole input), "group"/"tensor_group" (GroupSize columns of one row)
	GroupSize   int     // columns per group for group/tensor_group
	Dynamic     bool    // scales computed from x (true) or the stored Scale (false)
	Symmetric   bool    // false: int with zero point
	Scale       float64 // static input_scale (as stored)
	ZeroPoint   float64 // static input_zero_point (asym int)
	GlobalScale float64 // fp4: input_global_scale (F32 value), a divisor of the local scale
	Threshold   float64 // llm-int8: outlier threshold (0: no outlier columns)
}

// grid returns qmin, qmax and D = (qmax-qmin)/2.
func (a *ActQuant) grid() (qmin, qmax, d float64) {
	switch a.Kind {
	case ActFP8:
		return -E4M3Max, E4M3Max, E4M3Max
	case ActFP4, ActMXFP4:
		return -6, 6, 6
	}
	qmin = -math.Ldexp(1, a.Bits-1)
	qmax = math.Ldexp(1, a.Bits-1) - 1
	return qmin, qmax, (qmax - qmin) / 2
}

func (a *ActQuant) describe() string {
	switch a.Kind {
	case ActLLMInt8:
		if a.Threshold > 0 {
			return "a-llm-int8-t" + formatThreshold(a.Threshold)
		}
		return "a-int8-row127"
	case ActFP4:
		return "a-nvfp4"
	case ActMXFP4:
		return "a-mxfp4"
	case ActFP8:
		if !a.Dynamic {
			return "a-fp8-static"
		}
		if a.Strategy == "group" {
			return fmt.Sprintf("a-fp8-g%d", a.GroupSize)
		}
		return "a-fp8-" + a.Strategy
	}
	s := fmt.Sprintf("a-int%d-", a.Bits)
	if a.Dynamic {
		s += a.Strategy
	} else {
		s += "static"
	}
	if !a.Symmetric {
		s += "-asym"
	}
	return s
}

// Quantize implements ActQuantizer.
func (a *ActQuant) Quantize(x []float64, rows, cols int) error {
	if rows < 0 || cols < 0 || len(x) != rows*cols {
		return fmt.Errorf("quant: activation quantizer: len(x)=%d, want %d×%d", len(x), rows, cols)
	}
	if a.Kind == ActLLMInt8 {
		a.llmInt8(x, rows, cols)
		return nil
	}
	switch a.Strategy {
	case "tensor":
		a.fakequant(x)
	case "token":
		for r := 0; r < rows; r++ {
			a.fakequant(x[r*cols : (r+1)*cols])
		}
	case "group", "tensor_group":
		if a.GroupSize <= 0 || cols%a.GroupSize != 0 {
			return fmt.Errorf("quant: activation quantizer: %d columns are not a multiple of group_size %d", cols, a.GroupSize)
		}
		for i := 0; i < len(x); i += a.GroupSize {
			a.fakequant(x[i : i+a.GroupSize])
		}
	default:
		return fmt.Errorf("quant: activation quantizer: unsupported strategy %q", a.Strategy)
	}
	return nil
}

// fakequant quantizes one group in place (formats.md §8.2).
func (a *ActQuant) fakequant(x []float64) {
	qmin, qmax, d := a.grid()
	var s, zp, amax float64
	if a.Dynamic {
		mn, mx := 0.0, 0.0
		for _, v := range x {
			mn = math.Min(mn, v)
			mx = math.Max(mx, v)
		}
		if a.Symmetric {
			amax = math.Max(-mn, mx)
			s = amax / d
		} else {
			s = (mx - mn) / (qmax - qmin)
			if s != 0 {
				zp = math.RoundToEven(clamp(clamp(qmin-mn/s, qmin, qmax), -128, 127))
			}
		}
	} else {
		s, zp = a.Scale, a.ZeroPoint
	}
	if a.Kind == ActFP4 {
		s = a.GlobalScale * s
		s = RoundE4M3(clamp(s, -E4M3Max, E4M3Max))
		if s == 0 {
			s = 0.125
		}
	} else if a.Kind == ActMXFP4 && amax > 0 {
		s = MXScale(amax)
	} else if s == 0 {
		// Only an all-zero group has s == 0; any eps gives xq = 0.
		for i := range x {
			x[i] = 0
		}
		return
	}
	eff := s
	if a.Kind == ActFP4 {
		eff = s / a.GlobalScale
	}
	pin := a.Kind == ActInt && a.Symmetric && a.Dynamic && amax > 0
	for i, v := range x {
		y := v / eff
		if pin && math.Abs(v) == amax {
			y = math.Copysign(d, v)
		}
		if !a.Symmetric {
			y = y + zp // CT adds a zero point only when one exists (-0 stays -0)
		}
		y = clamp(y, qmin, qmax)
		var q float64
		switch a.Kind {
		case ActInt:
			q = math.RoundToEven(y)
		case ActFP8:
			q = RoundE4M3(y)
		case ActFP4, ActMXFP4:
			q = DecodeE2M1(RoundE2M1(y))
		}
		if !a.Symmetric {
			q = q - zp
		}
		x[i] = q * eff
	}
}

func clamp(v, lo, hi float64) float64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// openAct builds the input quantizer of a Linear from its group's
// input_activations args and the module's stored constants.
func openAct(t tensors, a *Args, in int) (*ActQuant, error) {
	q := &ActQuant{Bits: a.NumBits, Strategy: a.Strategy, GroupSize: a.GroupSize, Dynamic: a.Dynamic, Symmetric: a.Symmetric}
	switch {
	case a.Type == "int":
		q.Kind = ActInt
	case a.Type == "float" && a.NumBits == 8:
		q.Kind = ActFP8
	case a.Type == "float" && a.NumBits == 4 && isMX(a):
		q.Kind = ActMXFP4
	case a.Type == "float" && a.NumBits == 4:
		q.Kind = ActFP4
	default:
		return nil, fmt.Errorf("module %s: unsupported input activation type %s %d-bit", t.module, a.Type, a.NumBits)
	}
	if err := checkInputArgs(a); err != nil {
		return nil, fmt.Errorf("module %s: input_activations: %w", t.module, err)
	}
	if (q.Strategy == "group" || q.Strategy == "tensor_group") && in%q.GroupSize != 0 {
		return nil, fmt.Errorf("module %s: input group_size %d does not divide in_features %d", t.module, q.GroupSize, in)
	}
	scalar := func(suffix string, dtypes ...string) (float64, error) {
		ti, err := t.get(suffix, dtypes...)
		if err != nil {
			return 0, err
		}
		if numel(ti.Shape) != 1 {
			return 0, t.errf(ti, "shape %v, want [1]", ti.Shape)
		}
		if ti.DType == "I8" {
			v, err := t.ints(ti)
			if err != nil {
				return 0, err
			}
			return float64(v[0]), nil
		}
		v, err := t.scales(ti)
		if err != nil {
			return 0, err
		}
		return v[0], nil
	}
	var err error
	if q.Kind == ActFP4 {
		if q.GlobalScale, err = scalar("input_global_scale", "F32"); err != nil {
			return nil, err
		}
	}
	if !q.Dynamic {
		if q.Scale, err = scalar("input_scale", "BF16", "F16", "F32"); err != nil {
			return nil, err
		}
		if q.Kind == ActInt && !q.Symmetric {
			if q.ZeroPoint, err = scalar("input_zero_point", "I8"); err != nil {
				return nil, err
			}
		}
	}
	return q, nil
}
