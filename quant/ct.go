package quant

import (
	"fmt"
	"math"
)

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

// Dequantize implements Linear.
func (p *PackedInt) Dequantize(dst []float64) error {
	if err := p.checkDst(dst); err != nil {
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
	for r := 0; r < p.Out; r++ {
		lut = p.luts(r, lut)
		row := p.Packed[r*p.WordsPerRow : (r+1)*p.WordsPerRow]
		d := dst[r*p.In : (r+1)*p.In]
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
	return p.checkFinite(dst)
}

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
	var lut []float64
	off := 1 << (u.Bits - 1)
	for r := 0; r < u.Out; r++ {
		lut = u.luts(r, lut)
		for c := 0; c < u.In; c++ {
			dst[r*u.In+c] = lut[u.group(c)<<u.Bits+int(u.Codes[r*u.In+c])+off]
		}
	}
	return u.checkFinite(dst)
}

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
	var e4m3 [256]float64
	for b := range e4m3 {
		e4m3[b] = DecodeE4M3(byte(b))
	}
	// One 256-entry table per scale, rebuilt when the scale row changes.
	lut := make([]float64, 256*f.ScaleCols)
	for r := 0; r < f.Out; r++ {
		if r%f.BlockRows == 0 {
			srow := f.Scale[(r/f.BlockRows)*f.ScaleCols : (r/f.BlockRows+1)*f.ScaleCols]
			for j, s := range srow {
				for b := range e4m3 {
					lut[j*256+b] = RoundDType(f.ScaleDType, e4m3[b]*s)
				}
			}
		}
		for c := 0; c < f.In; c++ {
			dst[r*f.In+c] = lut[(c/f.BlockCols)*256+int(f.Codes[r*f.In+c])]
		}
	}
	return f.checkFinite(dst)
}

// NVFP4 is an nvfp4-pack-quantized weight (formats.md §2.2): E2M1 codes,
// low nibble first, per-16 E4M3 scales divided by the global scale:
// W = RoundDType(OutDType, f32(e2m1 * f32(e4m3(s) / GlobalScale))).
type NVFP4 struct {
	Base
	Packed      []byte  // [Out][In/2]; byte n holds element 2n (low nibble) and 2n+1 (high)
	Scales      []byte  // [Out][In/16] float8_e4m3fn
	GlobalScale float32 // weight_global_scale (a divisor)
	OutDType    string  // dtype the decoded weight is rounded to (the model dtype)
}

// Dequantize implements Linear.
func (n *NVFP4) Dequantize(dst []float64) error {
	if err := n.checkDst(dst); err != nil {
		return err
	}
	gs := float64(n.GlobalScale)
	half, sixteenth := n.In/2, n.In/16
	var lut [16]float64
	for r := 0; r < n.Out; r++ {
		for g := 0; g < sixteenth; g++ {
			eff := RoundF32(DecodeE4M3(n.Scales[r*sixteenth+g]) / gs)
			for code := range lut {
				lut[code] = RoundDType(n.OutDType, RoundF32(DecodeE2M1(byte(code))*eff))
			}
			d := dst[r*n.In+16*g : r*n.In+16*g+16]
			p := n.Packed[r*half+8*g : r*half+8*g+8]
			for k, b := range p {
				d[2*k] = lut[b&0xF]
				d[2*k+1] = lut[b>>4]
			}
		}
	}
	return n.checkFinite(dst)
}

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
	half, groups := m.In/2, m.In/32
	var lut [16]float64
	for r := 0; r < m.Out; r++ {
		for g := 0; g < groups; g++ {
			sc := DecodeE8M0(m.Scales[r*groups+g])
			for code := range lut {
				lut[code] = DecodeE2M1(byte(code)) * sc
			}
			d := dst[r*m.In+32*g : r*m.In+32*g+32]
			p := m.Packed[r*half+16*g : r*half+16*g+16]
			for k, b := range p {
				d[2*k] = lut[b&0xF]
				d[2*k+1] = lut[b>>4]
			}
		}
	}
	return m.checkFinite(dst)
}

// ---- opening compressed-tensors modules ----

func (s *Scheme) openCT(t tensors, g *Group) (Linear, error) {
	w := g.Weights
	var l Linear
	var base *Base
	var err error
	switch g.Format {
	case FormatPackQuantized:
		var p *PackedInt
		p, err = openPacked(t, w)
		if p != nil {
			l, base = p, &p.Base
		}
	case FormatIntQuantized, FormatNaiveQuantized, FormatFloatQuantized:
		ti, e := t.get("weight")
		if e != nil {
			return nil, e
		}
		switch {
		case ti.DType == "I8" && w.Type == "int":
			var u *UnpackedInt
			u, err = openUnpacked(t, w)
			if u != nil {
				l, base = u, &u.Base
			}
		case ti.DType == "F8_E4M3" && w.Type == "float" && w.NumBits == 8:
			var f *FP8
			f, err = openFP8(t, w)
			if f != nil {
				l, base = f, &f.Base
			}
		default:
			return nil, t.errf(ti, "dtype %s does not fit format %s with %s %d-bit weights", ti.DType, g.Format, w.Type, w.NumBits)
		}
	case FormatNVFP4:
		var n *NVFP4
		n, err = openNVFP4(t, s.ModelDType)
		if n != nil {
			l, base = n, &n.Base
		}
	case FormatMXFP4:
		var m *MXFP4
		m, err = openMXFP4(t)
		if m != nil {
			l, base = m, &m.Base
		}
	case FormatDense:
		d, e := openDense(t)
		if e != nil {
			return nil, e
		}
		l, base, err = d, &d.Base, nil
	default:
		return nil, fmt.Errorf("module %s: format %s cannot be decoded", t.module, g.Format)
	}
	if err != nil {
		return nil, err
	}
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

// checkGIdx validates g_idx (formats.md §7 item 4): -1 anywhere means
// absent (nil); otherwise values in [0, G) and every group has exactly gs
// members (the last group in-(G-1)*gs).
func checkGIdx(gv []int64, in, gs, groups int) ([]int32, error) {
	for _, v := range gv {
		if v == -1 {
			return nil, nil
		}
	}
	count := make([]int, groups)
	out := make([]int32, in)
	for c, v := range gv {
		if v < 0 || v >= int64(groups) {
			return nil, fmt.Errorf("g_idx[%d] = %d out of range [0, %d)", c, v, groups)
		}
		count[v]++
		out[c] = int32(v)
	}
	for g, n := range count {
		want := gs
		if g == groups-1 {
			want = in - (groups-1)*gs
		}
		if n != want {
			return nil, fmt.Errorf("g_idx: group %d has %d members, want %d", g, n, want)
		}
	}
	return out, nil
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

func openFP8(t tensors, w *Args) (*FP8, error) {
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
	sti, err := t.get("weight_scale", "BF16", "F16", "F32")
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

func openNVFP4(t tensors, outDType string) (*NVFP4, error) {
	pti, err := t.get("weight_packed", "U8")
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
	gti, err := t.get("weight_global_scale", "F32")
	if err != nil {
		return nil, err
	}
	if numel(gti.Shape) != 1 {
		return nil, t.errf(gti, "shape %v, want [1]", gti.Shape)
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
	scales, err := t.raw(sti)
	if err != nil {
		return nil, err
	}
	for i, b := range scales {
		if b == 255 {
			return nil, t.errf(sti, "element %d is the E8M0 NaN (0xFF)", i)
		}
	}
	m := &MXFP4{Packed: packed, Scales: scales}
	m.Base = Base{Out: out, In: in, Fmt: "mxfp4", FileName: pti.File}
	return m, nil
}
