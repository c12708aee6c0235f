package ggml

import "math/bits"

// Decoders of the grid ("i-quant") types, statement for statement as
// ggml's dequantize_row_<type>. Each looks up groups of 8 (IQ2, IQ1) or 4
// (IQ3) values in a codebook (grid, grids.go).

// grid is a packed codebook over constant strings (grids.go): entry i is
// the little-endian uint16 code at codes[2i:], and its j-th value is the
// int8 byte levels[code>>(width*j) & (1<<width-1)].
type grid struct {
	width  uint
	levels string
	codes  string
}

// code is entry i's packed level indices.
func (g grid) code(i int) uint { return uint(g.codes[2*i]) | uint(g.codes[2*i+1])<<8 }

// val is the j-th value of an entry's code.
func (g grid) val(c uint, j int) float32 {
	return float32(int8(g.levels[c>>(g.width*uint(j))&(1<<g.width-1)]))
}

// at is the j-th value of entry i.
func (g grid) at(i, j int) float32 { return g.val(g.code(i), j) }

// gridOf returns the codebook grid type t looks up and the values per
// entry (IQ1_M shares IQ1_S's grid); ok is false for other types.
func gridOf(t Type) (g grid, group int, ok bool) {
	switch t {
	case IQ2_XXS:
		return grid{iq2xxsWidth, iq2xxsLevels, iq2xxsCodes}, 8, true
	case IQ2_XS:
		return grid{iq2xsWidth, iq2xsLevels, iq2xsCodes}, 8, true
	case IQ2_S:
		return grid{iq2sWidth, iq2sLevels, iq2sCodes}, 8, true
	case IQ3_XXS:
		return grid{iq3xxsWidth, iq3xxsLevels, iq3xxsCodes}, 4, true
	case IQ3_S:
		return grid{iq3sWidth, iq3sLevels, iq3sCodes}, 4, true
	case IQ1_S, IQ1_M:
		return grid{iq1sWidth, iq1sLevels, iq1sCodes}, 8, true
	}
	return grid{}, 0, false
}

// ksign is ggml's ksigns_iq2xs: 7 stored sign bits plus an eighth that
// makes the count of negative values even.
func ksign(i uint32) uint32 {
	i &= 127
	return i | uint32(bits.OnesCount32(i)&1)<<7
}

// signed returns v, negated when bit j of signs is set.
func signed(v float32, signs uint32, j int) float32 {
	if signs>>uint(j)&1 != 0 {
		return -v
	}
	return v
}

// IQ2_XXS: d f16, 8 x (4 grid bytes, u32 of 4x7 sign bits and a 4-bit
// scale); y = d*(0.5+s)*0.25 * grid * sign.
func decodeIQ2_XXS(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ2_XXS)
	d := f16(b)
	qs := b[2:66]
	for ib := 0; ib < 8; ib++ {
		g := qs[8*ib : 8*ib+4]
		a := le32(qs[8*ib+4:])
		db := float32(d*(0.5+float32(a>>28))) * 0.25
		for l := 0; l < 4; l++ {
			s, c := ksign(a>>uint(7*l)), grid.code(int(g[l]))
			for j := 0; j < 8; j++ {
				y[j] = signed(db*grid.val(c, j), s, j)
			}
			y = y[8:]
		}
	}
}

// IQ2_XS: d f16, qs[32] u16 (9-bit grid index, 7 sign bits), scales[8]
// (two 4-bit scales per 32 values).
func decodeIQ2_XS(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ2_XS)
	d := f16(b)
	qs := b[2:66]
	sc := b[66:74]
	for ib := 0; ib < 8; ib++ {
		db := [2]float32{
			float32(d*(0.5+float32(sc[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(sc[ib]>>4))) * 0.25,
		}
		for l := 0; l < 4; l++ {
			q := uint32(le16(qs[2*(4*ib+l):]))
			s, c := ksign(q>>9), grid.code(int(q&511))
			for j := 0; j < 8; j++ {
				y[j] = signed(db[l/2]*grid.val(c, j), s, j)
			}
			y = y[8:]
		}
	}
}

// IQ2_S: d f16, qs[32] grid index low bits, signs[32], qh[8] (2 high index
// bits per group), scales[8].
func decodeIQ2_S(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ2_S)
	d := f16(b)
	qs := b[2:34]
	signs := b[34:66]
	qh := b[66:74]
	sc := b[74:82]
	for ib := 0; ib < 8; ib++ {
		db := [2]float32{
			float32(d*(0.5+float32(sc[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(sc[ib]>>4))) * 0.25,
		}
		for l := 0; l < 4; l++ {
			idx := int(qs[4*ib+l]) | int(qh[ib])<<uint(8-2*l)&0x300
			s, c := uint32(signs[4*ib+l]), grid.code(idx)
			for j := 0; j < 8; j++ {
				y[j] = signed(db[l/2]*grid.val(c, j), s, j)
			}
			y = y[8:]
		}
	}
}

// IQ3_XXS: d f16, qs[64] grid indices (4 values each), 8 u32 of 4x7 sign
// bits and a 4-bit scale; y = d*(0.5+s)*0.5 * grid * sign.
func decodeIQ3_XXS(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ3_XXS)
	d := f16(b)
	qs := b[2:66]
	ss := b[66:98]
	for ib := 0; ib < 8; ib++ {
		a := le32(ss[4*ib:])
		db := float32(d*(0.5+float32(a>>28))) * 0.5
		for l := 0; l < 4; l++ {
			s := ksign(a >> uint(7*l))
			c1, c2 := grid.code(int(qs[8*ib+2*l])), grid.code(int(qs[8*ib+2*l+1]))
			for j := 0; j < 4; j++ {
				y[j] = signed(db*grid.val(c1, j), s, j)
				y[j+4] = signed(db*grid.val(c2, j), s, j+4)
			}
			y = y[8:]
		}
	}
}

// IQ3_S: d f16, qs[64] grid index low bits, qh[8] ninth bits, signs[32],
// scales[4] (two 4-bit scales per 64 values); y = d*(1+2s) * grid * sign.
func decodeIQ3_S(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ3_S)
	d := f16(b)
	qs := b[2:66]
	qh := b[66:74]
	signs := b[74:106]
	sc := b[106:110]
	for ib := 0; ib < 8; ib++ {
		s4 := sc[ib/2]
		if ib%2 == 1 {
			s4 >>= 4
		}
		db := d * float32(1+2*int(s4&0xf))
		for l := 0; l < 4; l++ {
			g1 := int(qs[8*ib+2*l]) | int(qh[ib])<<uint(8-2*l)&256
			g2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<uint(7-2*l)&256
			s, c1, c2 := uint32(signs[4*ib+l]), grid.code(g1), grid.code(g2)
			for j := 0; j < 4; j++ {
				y[j] = signed(db*grid.val(c1, j), s, j)
				y[j+4] = signed(db*grid.val(c2, j), s, j+4)
			}
			y = y[8:]
		}
	}
}

// iq1Delta is IQ1S_DELTA (= IQ1M_DELTA), the shift of the ternary grid.
const iq1Delta = 0.125

// IQ1_S: d f16, qs[32] grid index low bits, qh[8] u16 (4x3 high index
// bits, 3-bit scale, delta sign); y = d*(2s+1) * (grid ± 0.125).
func decodeIQ1_S(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ1_S)
	d := f16(b)
	qs := b[2:34]
	for ib := 0; ib < 8; ib++ {
		qh := int(le16(b[34+2*ib:]))
		dl := d * float32(2*(qh>>12&7)+1)
		delta := float32(iq1Delta)
		if qh&0x8000 != 0 {
			delta = -iq1Delta
		}
		for l := 0; l < 4; l++ {
			c := grid.code(int(qs[4*ib+l]) | (qh>>uint(3*l)&7)<<8)
			for j := 0; j < 8; j++ {
				y[j] = dl * (grid.val(c, j) + delta)
			}
			y = y[8:]
		}
	}
}

// IQ1_M: qs[32] grid index low bits, qh[16] (3 high index bits and a delta
// sign per 8 values), scales[8] as 4 u16: 3-bit scales per 8+8 values and,
// in their top nibbles, the f16 super-block scale.
func decodeIQ1_M(b []byte, y []float32) {
	grid, _, _ := gridOf(IQ1_M)
	qs := b[0:32]
	qh := b[32:48]
	var sc [4]int
	for i := range sc {
		sc[i] = int(le16(b[48+2*i:]))
	}
	d := F16ToF32(uint16(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000))
	for ib := 0; ib < 8; ib++ {
		dl1 := d * float32(2*(sc[ib/2]>>uint(6*(ib%2)+0)&7)+1)
		dl2 := d * float32(2*(sc[ib/2]>>uint(6*(ib%2)+3)&7)+1)
		h0, h1 := int(qh[2*ib]), int(qh[2*ib+1])
		idx := [4]int{
			int(qs[4*ib+0]) | h0<<8&0x700,
			int(qs[4*ib+1]) | h0<<4&0x700,
			int(qs[4*ib+2]) | h1<<8&0x700,
			int(qs[4*ib+3]) | h1<<4&0x700,
		}
		bitsd := [4]int{h0 & 0x08, h0 & 0x80, h1 & 0x08, h1 & 0x80}
		for l := 0; l < 4; l++ {
			delta := float32(iq1Delta)
			if bitsd[l] != 0 {
				delta = -iq1Delta
			}
			dl := dl1
			if l >= 2 {
				dl = dl2
			}
			c := grid.code(idx[l])
			for j := 0; j < 8; j++ {
				y[j] = dl * (grid.val(c, j) + delta)
			}
			y = y[8:]
		}
	}
}

// isGrid reports whether t decodes through a grid.
func (t Type) isGrid() bool {
	switch t {
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
		return true
	}
	return false
}

// Grid returns the codebook that grid type t looks up, expanded: entry i's
// values are values[i*group : (i+1)*group] (IQ1_M shares IQ1_S's grid). ok
// is false for a type without a grid. The slice is fresh; the CUDA kernels
// upload it.
func Grid(t Type) (values []int8, group int, ok bool) {
	g, group, ok := gridOf(t)
	if !ok {
		return nil, 0, false
	}
	n := len(g.codes) / 2
	values = make([]int8, n*group)
	for i := 0; i < n; i++ {
		for j := 0; j < group; j++ {
			values[i*group+j] = int8(g.at(i, j))
		}
	}
	return values, group, true
}
