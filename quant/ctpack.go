package quant

import (
	"fmt"
)

// PackedInt is a compressed-tensors pack-quantized weight (formats.md §2.1):
// each row's offset-binary codes u = q + 2^(Bits-1) packed into little-endian
// 32-bit words.
type PackedInt struct {
	Base
	IntParams
	// Legacy is the pre-2026 word-aligned layout for Bits ∈ {3,5,6,7}:
	// floor(32/Bits) values per word at bits k*Bits. Otherwise the row is a
	// dense bitstream, element i at bits [i*Bits, i*Bits+Bits).
	Legacy      bool
	WordsPerRow int
	Packed      []uint32 // [Out][WordsPerRow]
}

// Dequantize implements Linear.
func (p *PackedInt) Dequantize(dst []float64) error {
	if err := p.checkDst(dst); err != nil {
		return err
	}
	return p.DequantizeRows(0, p.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (p *PackedInt) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := p.checkRows(r0, r1, dst); err != nil {
		return err
	}
	var lut []float64
	base := make([]int, p.In) // lut offset of each column's group
	for c := range base {
		base[c] = p.group(c) << p.Bits
	}
	b := p.Bits
	fast := !p.Legacy && 32%b == 0
	per, mask := 32/b, uint32(1)<<b-1
	for r := r0; r < r1; r++ {
		lut = p.luts(r, lut)
		row := p.Packed[r*p.WordsPerRow : (r+1)*p.WordsPerRow]
		d := dst[(r-r0)*p.In : (r-r0+1)*p.In]
		if fast { // b ∈ {1,2,4,8}: whole fields per word
			for c := range d {
				d[c] = lut[base[c]+int(row[c/per]>>(uint(c%per)*uint(b))&mask)]
			}
			continue
		}
		for c := range d {
			d[c] = lut[base[c]+unpackField(row, c, b, p.Legacy)]
		}
	}
	return p.checkFiniteRows(r0, dst)
}

// UnpackedInt is a compressed-tensors int-quantized (or naive-quantized int)

func openPacked(t tensors, w *Args) (*PackedInt, error) {
	pti, err := t.get("weight_packed", "I32")
	if err != nil {
		return nil, err
	}
	if len(pti.Shape) != 2 {
		return nil, t.errf(pti, "shape %v, want [out, words]", pti.Shape)
	}
	out, width := pti.Shape[0], pti.Shape[1]
	in := 0
	if t.has("weight_shape") {
		sti, err := t.get("weight_shape", "I64", "I32")
		if err != nil {
			return nil, err
		}
		sv, err := t.ints(sti)
		if err != nil {
			return nil, err
		}
		if len(sv) != 2 || sv[0] != int64(out) || sv[1] <= 0 || sv[1] > 1<<30 {
			return nil, t.errf(sti, "value %v does not fit weight_packed rows %d", sv, out)
		}
		in = int(sv[1])
	} else {
		return nil, fmt.Errorf("%s: module %s: missing tensor %s.weight_shape", t.file(), t.module, t.module)
	}
	b := w.NumBits
	legacy, err := detectLegacy(width, in, b)
	if err != nil {
		return nil, t.errf(pti, "%v", err)
	}
	words, err := t.words(pti)
	if err != nil {
		return nil, err
	}
	p := &PackedInt{Legacy: legacy, WordsPerRow: width, Packed: words}
	if p.IntParams, err = intParams(t, w, out, in, true); err != nil {
		return nil, err
	}
	p.Base = Base{Out: out, In: in, Fmt: intFormat("ct", p.IntParams), FileName: pti.File}
	return p, nil
}

func ctPackFamily() family {
	return family{
		name:       "pack-quantized",
		argFormats: []string{FormatPackQuantized},
		checkArgs:  checkIntArgs,
		ctFormats:  []string{FormatPackQuantized},
		open: func(_ *Scheme, t tensors, g *Group) (Linear, error) {
			p, err := openPacked(t, g.Weights)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	}
}
