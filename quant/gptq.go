package quant

import (
	"fmt"

	"github.com/qppl/qppl/checkpoint"
)

// GPTQ is an AutoGPTQ/GPTQModel weight (formats.md §4):
// W[o,i] = Scales[g*Out+o] * (u[i,o] - z[g,o]) with g = GIdx[i], u the
// unsigned Bits-bit field of QWeight packed along in, z the zero point
// (stored field + 1 for checkpoint_format gptq v1, the field itself for v2).
// The product is exact in float64 (no rounding).
type GPTQ struct {
	Base
	Bits       int       // 2, 4 or 8
	GroupSize  int       // In when the config says -1
	Groups     int       // ceil(In/GroupSize)
	V2         bool      // gptq_v2: zeros stored without the v1 off-by-one
	QWeight    []uint32  // [In*Bits/32][Out]: word [j,o] field k = u[j*(32/Bits)+k, o]
	QZeros     []uint32  // [Groups][Out*Bits/32]: word [g,j] field k = stored zero of column j*(32/Bits)+k
	Scales     []float64 // [Groups][Out]
	ScaleDType string
	GIdx       []int32 // [In]
}

func (q *GPTQ) zero(g, o int) int {
	per := 32 / q.Bits
	w := q.QZeros[g*(q.Out/per)+o/per]
	z := int(w>>(uint(o%per)*uint(q.Bits))) & (1<<q.Bits - 1)
	if !q.V2 {
		z++
	}
	return z
}

// Dequantize implements Linear.
func (q *GPTQ) Dequantize(dst []float64) error {
	if err := q.checkDst(dst); err != nil {
		return err
	}
	zeros := make([]int, q.Groups*q.Out)
	for g := 0; g < q.Groups; g++ {
		for o := 0; o < q.Out; o++ {
			zeros[g*q.Out+o] = q.zero(g, o)
		}
	}
	per := 32 / q.Bits
	mask := uint32(1)<<q.Bits - 1
	// One packed row of words covers `per` inputs of every output: write
	// them as a contiguous run of dst[o, j*per : j*per+per].
	for j := 0; j < q.In/per; j++ {
		row := q.QWeight[j*q.Out : (j+1)*q.Out]
		gi := q.GIdx[j*per : (j+1)*per]
		for o, w := range row {
			d := dst[o*q.In+j*per : o*q.In+(j+1)*per]
			for k := range d {
				g := int(gi[k])*q.Out + o
				d[k] = q.Scales[g] * float64(int(w>>(uint(k)*uint(q.Bits))&mask)-zeros[g])
			}
		}
	}
	return q.checkFinite(dst)
}

func openGPTQ(t tensors, c *GPTQConfig) (*GPTQ, error) {
	qti, err := t.get("qweight", "I32")
	if err != nil {
		return nil, err
	}
	per := 32 / c.Bits
	if len(qti.Shape) != 2 {
		return nil, t.errf(qti, "shape %v, want [in*bits/32, out]", qti.Shape)
	}
	in, out := qti.Shape[0]*per, qti.Shape[1]
	if in == 0 || out == 0 {
		return nil, t.errf(qti, "empty weight (shape %v)", qti.Shape)
	}
	gs := c.GroupSize
	if gs == -1 {
		gs = in
	}
	if in > gs && in%gs != 0 {
		return nil, fmt.Errorf("module %s: quantization_config group_size %d does not divide in_features %d", t.module, gs, in)
	}
	if out%per != 0 {
		return nil, t.errf(qti, "out_features %d is not a multiple of %d (qzeros packing)", out, per)
	}
	groups := (in + gs - 1) / gs
	q := &GPTQ{Bits: c.Bits, GroupSize: gs, Groups: groups, V2: c.V2}
	if q.QWeight, q.QZeros, q.Scales, q.ScaleDType, err = readPacked(t, qti, groups, out/per, out); err != nil {
		return nil, err
	}
	if t.has("g_idx") {
		gti, err := t.get("g_idx", "I32", "I64")
		if err != nil {
			return nil, err
		}
		if err := t.shape(gti, in); err != nil {
			return nil, err
		}
		gv, err := t.ints(gti)
		if err != nil {
			return nil, err
		}
		if q.GIdx, err = checkGIdx(gv, in, gs, groups); err != nil {
			return nil, t.errf(gti, "%v", err)
		}
	}
	if q.GIdx == nil {
		q.GIdx = make([]int32, in)
		for i := range q.GIdx {
			q.GIdx[i] = int32(i / gs)
		}
	}
	ver := "v1"
	if c.V2 {
		ver = "v2"
	}
	q.Base = Base{Out: out, In: in, FileName: qti.File,
		Fmt: fmt.Sprintf("gptq-int%d-g%d-%s", c.Bits, c.GroupSize, ver)}
	if c.DescAct {
		q.Fmt += "-actorder"
	}
	q.Name, q.Bytes = t.module, storedBytes(t.src, t.module)
	return q, nil
}

// AWQ is an AutoAWQ GEMM weight (formats.md §4): W[o,i] = (u[i,o] -
// z[i/GroupSize,o]) * Scales[(i/GroupSize)*Out+o], u and z unsigned 4-bit,
// column 8j+c of a word row at nibble AWQNibble(c). Exact in float64.
type AWQ struct {
	Base
	GroupSize  int
	Groups     int       // In/GroupSize
	QWeight    []uint32  // [In][Out/8]
	QZeros     []uint32  // [Groups][Out/8]
	Scales     []float64 // [Groups][Out]
	ScaleDType string
}

// AWQOrder returns the column (0..7) stored at nibble k (0..7) of an AWQ
// word: [0, 2, 4, 6, 1, 3, 5, 7]. AWQNibble is its inverse. (Functions, not
// exported arrays, so that no importer can change how weights decode.)
func AWQOrder(k int) int { return [8]int{0, 2, 4, 6, 1, 3, 5, 7}[k] }

// AWQNibble returns the nibble (0..7) of an AWQ word holding column c (0..7):
// [0, 4, 1, 5, 2, 6, 3, 7].
func AWQNibble(c int) int { return [8]int{0, 4, 1, 5, 2, 6, 3, 7}[c] }

func awqField(words []uint32, o int) int {
	return int(words[o/8]>>(uint(AWQNibble(o%8))*4)) & 0xF
}

// Dequantize implements Linear.
func (a *AWQ) Dequantize(dst []float64) error {
	if err := a.checkDst(dst); err != nil {
		return err
	}
	w8 := a.Out / 8
	zeros := make([]int, a.Groups*a.Out)
	for g := 0; g < a.Groups; g++ {
		for o := 0; o < a.Out; o++ {
			zeros[g*a.Out+o] = awqField(a.QZeros[g*w8:(g+1)*w8], o)
		}
	}
	// Tiles of 8 inputs × 8 outputs: reads 8 words, writes 8 runs of 8.
	for i0 := 0; i0 < a.In; i0 += 8 {
		n := min(8, a.In-i0)
		for j := 0; j < w8; j++ {
			for c := 0; c < 8; c++ {
				o := 8*j + c
				sh := uint(AWQNibble(c)) * 4
				d := dst[o*a.In+i0 : o*a.In+i0+n]
				for k := range d {
					i := i0 + k
					g := (i/a.GroupSize)*a.Out + o
					d[k] = float64(int(a.QWeight[i*w8+j]>>sh&0xF)-zeros[g]) * a.Scales[g]
				}
			}
		}
	}
	return a.checkFinite(dst)
}

func openAWQ(t tensors, c *AWQConfig) (*AWQ, error) {
	qti, err := t.get("qweight", "I32")
	if err != nil {
		return nil, err
	}
	if len(qti.Shape) != 2 {
		return nil, t.errf(qti, "shape %v, want [in, out/8]", qti.Shape)
	}
	in, out := qti.Shape[0], qti.Shape[1]*8
	if in == 0 || out == 0 {
		return nil, t.errf(qti, "empty weight (shape %v)", qti.Shape)
	}
	gs := c.GroupSize
	if in%gs != 0 {
		return nil, fmt.Errorf("module %s: quantization_config group_size %d does not divide in_features %d", t.module, gs, in)
	}
	groups := in / gs
	a := &AWQ{GroupSize: gs, Groups: groups}
	if a.QWeight, a.QZeros, a.Scales, a.ScaleDType, err = readPacked(t, qti, groups, out/8, out); err != nil {
		return nil, err
	}
	a.Base = Base{Name: t.module, Out: out, In: in, FileName: qti.File,
		Fmt: fmt.Sprintf("awq-int4-g%d", gs), Bytes: storedBytes(t.src, t.module)}
	return a, nil
}

// readPacked reads the tensors GPTQ and AWQ share: the qweight words (qti,
// shape already checked), qzeros I32 [groups, zeroCols] and scales
// F16/BF16/F32 [groups, out].
func readPacked(t tensors, qti checkpoint.TensorInfo, groups, zeroCols, out int) (qweight, qzeros []uint32, scales []float64, scaleDType string, err error) {
	zti, err := t.get("qzeros", "I32")
	if err != nil {
		return nil, nil, nil, "", err
	}
	if err := t.shape(zti, groups, zeroCols); err != nil {
		return nil, nil, nil, "", err
	}
	sti, err := t.get("scales", "F16", "BF16", "F32")
	if err != nil {
		return nil, nil, nil, "", err
	}
	if err := t.shape(sti, groups, out); err != nil {
		return nil, nil, nil, "", err
	}
	if qweight, err = t.words(qti); err != nil {
		return nil, nil, nil, "", err
	}
	if qzeros, err = t.words(zti); err != nil {
		return nil, nil, nil, "", err
	}
	if scales, err = t.scales(sti); err != nil {
		return nil, nil, nil, "", err
	}
	return qweight, qzeros, scales, string(sti.DType), nil
}
