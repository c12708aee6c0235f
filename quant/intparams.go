package quant

import (
	"fmt"
)

// This file holds what the compressed-tensors integer families (ctpack.go,
// ctint.go) share: scales, zero points and g_idx, and the bit packing.

// IntParams are the scale, zero-point and group parameters shared by the
// integer formats (compressed-tensors pack-quantized and int-quantized).
//
// The weight is W[r,c] = RoundDType(ScaleDType, (q[r,c] - Zero[r*Groups+g]) *
// Scale[r*Groups+g]) where q is the signed code and g is GIdx[c] when GIdx is
// set, else c/GroupSize (0 for tensor and channel strategies).
type IntParams struct {
	Bits       int       // 1..8
	Symmetric  bool      // no zero point when true (Zero is nil)
	Strategy   string    // "tensor", "channel" or "group"
	GroupSize  int       // columns per group; In for tensor/channel
	Groups     int       // scale columns: ceil(In/GroupSize), 1 for tensor/channel
	Scale      []float64 // [Out][Groups], exact stored values (tensor scales replicated per row)
	ScaleDType string    // dtype the scale is stored in (BF16, F16, F32): the product is rounded to it
	Zero       []int32   // [Out][Groups] signed zero points in code space, nil when symmetric
	GIdx       []int32   // [In] group of each column (actorder=group), nil otherwise
}

func (p *IntParams) group(c int) int {
	if p.GIdx != nil {
		return int(p.GIdx[c])
	}
	return c / p.GroupSize
}

func (p *IntParams) value(r, g, q int) float64 {
	i := r*p.Groups + g
	z := 0
	if p.Zero != nil {
		z = int(p.Zero[i])
	}
	return RoundDType(p.ScaleDType, float64(q-z)*p.Scale[i])
}

// PackedInt is a compressed-tensors pack-quantized weight (formats.md §2.1):
// each row's offset-binary codes u = q + 2^(Bits-1) packed into little-endian

// code returns the unsigned field u of element i of one packed row.
func unpackField(row []uint32, i, b int, legacy bool) int {
	mask := uint64(1)<<b - 1
	if legacy {
		per := 32 / b
		return int(uint64(row[i/per]>>(uint(i%per)*uint(b))) & mask)
	}
	p := i * b
	w, off := p/32, uint(p%32)
	v := uint64(row[w]) >> off
	if int(off)+b > 32 {
		v |= uint64(row[w+1]) << (32 - off)
	}
	return int(v & mask)
}

func packedWidth(n, b int, legacy bool) int {
	if legacy {
		per := 32 / b
		return (n + per - 1) / per
	}
	return (n*b + 31) / 32
}

// luts returns, for row r, the decoded value of every code u (offset
// binary) of every group: lut[g<<Bits + u] = value(r, g, u - 2^(Bits-1)).
// One RoundDType per (group, code) instead of per element.
func (p *IntParams) luts(r int, lut []float64) []float64 {
	n := 1 << p.Bits
	lut = lut[:0]
	off := n / 2
	for g := 0; g < p.Groups; g++ {
		for u := 0; u < n; u++ {
			lut = append(lut, p.value(r, g, u-off))
		}
	}
	return lut
}

// intParams reads weight_scale, zero point and g_idx for out×in codes.
func intParams(t tensors, w *Args, out, in int, packedZero bool) (IntParams, error) {
	p := IntParams{Bits: w.NumBits, Symmetric: w.Symmetric, Strategy: w.Strategy}
	sti, err := t.get("weight_scale", "BF16", "F16", "F32")
	if err != nil {
		return p, err
	}
	p.ScaleDType = string(sti.DType)
	switch w.Strategy {
	case "tensor":
		p.GroupSize, p.Groups = in, 1
		if numel(sti.Shape) != 1 {
			return p, t.errf(sti, "shape %v, want [1] for tensor strategy", sti.Shape)
		}
	case "channel":
		p.GroupSize, p.Groups = in, 1
		if err := t.shape(sti, out, 1); err != nil {
			return p, err
		}
	case "group":
		p.GroupSize = w.GroupSize
		if in > p.GroupSize && in%p.GroupSize != 0 {
			return p, fmt.Errorf("module %s: quantization_config group_size %d does not divide in_features %d", t.module, p.GroupSize, in)
		}
		p.Groups = (in + p.GroupSize - 1) / p.GroupSize
		if err := t.shape(sti, out, p.Groups); err != nil {
			return p, err
		}
	default:
		return p, fmt.Errorf("module %s: strategy %s not supported for int weights", t.module, w.Strategy)
	}
	sc, err := t.scales(sti)
	if err != nil {
		return p, err
	}
	p.Scale = replicate(sc, out, p.Groups)
	if !w.Symmetric {
		zti, err := t.get("weight_zero_point", "I32", "I8")
		if err != nil {
			return p, err
		}
		lo, hi := -(1 << (p.Bits - 1)), 1<<(p.Bits-1)-1
		var z []int64
		switch {
		case zti.DType == "I8" || w.Strategy == "tensor" || !packedZero:
			// unpacked signed zero points: tensor [1], legacy [out, G]
			want := []int{out, p.Groups}
			if w.Strategy == "tensor" {
				if numel(zti.Shape) != 1 {
					return p, t.errf(zti, "shape %v, want [1]", zti.Shape)
				}
			} else if err := t.shape(zti, want...); err != nil {
				return p, err
			}
			if z, err = t.ints(zti); err != nil {
				return p, err
			}
		default:
			// I32 packed along dim 0: [ceil(out*b/32), G]; legacy
			// word-aligned for b ∈ {3,5,6,7} detected by the width.
			if len(zti.Shape) != 2 || zti.Shape[1] != p.Groups {
				return p, t.errf(zti, "shape %v, want [%d, %d]", zti.Shape, packedWidth(out, p.Bits, false), p.Groups)
			}
			legacy, err := detectLegacy(zti.Shape[0], out, p.Bits)
			if err != nil {
				return p, t.errf(zti, "%v", err)
			}
			words, err := t.words(zti)
			if err != nil {
				return p, err
			}
			nw := zti.Shape[0]
			z = make([]int64, out*p.Groups)
			col := make([]uint32, nw)
			for g := 0; g < p.Groups; g++ {
				for i := 0; i < nw; i++ {
					col[i] = words[i*p.Groups+g]
				}
				for r := 0; r < out; r++ {
					z[r*p.Groups+g] = int64(unpackField(col, r, p.Bits, legacy) - (1 << (p.Bits - 1)))
				}
			}
		}
		zz := make([]int32, len(z))
		for i, v := range z {
			if v < int64(lo) || v > int64(hi) {
				return p, t.errf(zti, "zero point %d at %d outside [%d, %d]", v, i, lo, hi)
			}
			zz[i] = int32(v)
		}
		p.Zero = replicateInt(zz, out, p.Groups)
	}
	if t.has("weight_g_idx") {
		gti, err := t.get("weight_g_idx", "I32", "I64")
		if err != nil {
			return p, err
		}
		if err := t.shape(gti, in); err != nil {
			return p, err
		}
		gv, err := t.ints(gti)
		if err != nil {
			return p, err
		}
		if p.GIdx, err = checkGIdx(gv, in, p.GroupSize, p.Groups); err != nil {
			return p, t.errf(gti, "%v", err)
		}
	}
	return p, nil
}

func replicate(v []float64, rows, cols int) []float64 {
	if len(v) == rows*cols {
		return v
	}
	out := make([]float64, rows*cols)
	for i := range out {
		out[i] = v[0]
	}
	return out
}

func replicateInt(v []int32, rows, cols int) []int32 {
	if len(v) == rows*cols {
		return v
	}
	out := make([]int32, rows*cols)
	for i := range out {
		out[i] = v[0]
	}
	return out
}

// detectLegacy tells the dense bitstream from the legacy word-aligned layout
// by the packed width (formats.md §2.1 "Version trap"); dense wins when both
// fit.
func detectLegacy(width, n, b int) (bool, error) {
	if width == packedWidth(n, b, false) {
		return false, nil
	}
	if 32%b != 0 && width == packedWidth(n, b, true) {
		return true, nil
	}
	return false, fmt.Errorf("packed width %d does not fit %d %d-bit values (want %d)", width, n, b, packedWidth(n, b, false))
}

func intFormat(prefix string, p IntParams) string {
	f := fmt.Sprintf("%s-int%d", prefix, p.Bits)
	switch p.Strategy {
	case "group":
		f += fmt.Sprintf("-g%d", p.GroupSize)
	default:
		f += "-" + p.Strategy
	}
	if p.Symmetric {
		f += "-sym"
	} else {
		f += "-asym"
	}
	if p.GIdx != nil {
		f += "-actorder"
	}
	return f
}

// checkIntArgs validates the weight arguments of the integer formats.
func checkIntArgs(a *Args, format string) error {
	if a.Type != "int" {
		return fmt.Errorf("format %s needs int weights, got %s", format, a.Type)
	}
	switch a.Strategy {
	case "tensor", "channel", "group":
	default:
		return fmt.Errorf("strategy %s is not supported for %s weights", a.Strategy, format)
	}
	return nil
}
