package quant

import (
	"encoding/json"
	"fmt"
)

// GPTQConfig is a quant_method "gptq" config.
type GPTQConfig struct {
	Bits      int  `json:"bits"`
	GroupSize int  `json:"group_size"` // -1 = one group over in
	DescAct   bool `json:"desc_act"`
	Sym       bool `json:"sym"`
	V2        bool `json:"v2"` // checkpoint_format gptq_v2
}

func parseGPTQ(top map[string]json.RawMessage) (*GPTQConfig, error) {
	c := &GPTQConfig{}
	var err error
	if c.Bits, err = integer(top, "bits", 4); err != nil {
		return nil, err
	}
	switch c.Bits {
	case 2, 4, 8:
	default:
		return nil, fmt.Errorf("gptq bits %d not supported (2, 4, 8)", c.Bits)
	}
	if c.GroupSize, err = integer(top, "group_size", 128); err != nil {
		return nil, err
	}
	if c.GroupSize == 0 || c.GroupSize < -1 {
		return nil, fmt.Errorf("gptq group_size %d: want a positive size or -1", c.GroupSize)
	}
	if c.DescAct, err = boolean(top, "desc_act", false); err != nil {
		return nil, err
	}
	if c.Sym, err = boolean(top, "sym", true); err != nil {
		return nil, err
	}
	f, err := str(top, "checkpoint_format", "gptq")
	if err != nil {
		return nil, err
	}
	switch f {
	case "gptq":
	case "gptq_v2":
		c.V2 = true
	default:
		return nil, fmt.Errorf("gptq checkpoint_format %q not supported (gptq, gptq_v2)", f)
	}
	if v := top["dynamic"]; !isEmptyObject(v) {
		return nil, fmt.Errorf("gptq per-module \"dynamic\" overrides are not supported")
	}
	return c, nil
}

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
	return q.DequantizeRows(0, q.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (q *GPTQ) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := q.checkRows(r0, r1, dst); err != nil {
		return err
	}
	nr := r1 - r0
	zeros := make([]int, q.Groups*nr) // [group][row - r0]
	for g := 0; g < q.Groups; g++ {
		for o := r0; o < r1; o++ {
			zeros[g*nr+o-r0] = q.zero(g, o)
		}
	}
	per := 32 / q.Bits
	mask := uint32(1)<<q.Bits - 1
	// One packed row of words covers `per` inputs of every output: write
	// them as a contiguous run of dst[o, j*per : j*per+per].
	for j := 0; j < q.In/per; j++ {
		row := q.QWeight[j*q.Out+r0 : j*q.Out+r1]
		gi := q.GIdx[j*per : (j+1)*per]
		for oo, w := range row {
			o := r0 + oo
			d := dst[oo*q.In+j*per : oo*q.In+(j+1)*per]
			for k := range d {
				g := int(gi[k])
				d[k] = q.Scales[g*q.Out+o] * float64(int(w>>(uint(k)*uint(q.Bits))&mask)-zeros[g*nr+oo])
			}
		}
	}
	return q.checkFiniteRows(r0, dst)
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

func gptqFamily() family {
	return family{
		name:   "GPTQ",
		method: MethodGPTQ,
		parse: func(s *Scheme, top map[string]json.RawMessage) (err error) {
			s.GPTQ, err = parseGPTQ(top)
			return err
		},
		markers: []string{"qweight"},
		// AutoGPTQ's quantize_config.json (AutoAWQ's when it has AWQ keys)
		sideFiles: []string{"quantize_config.json"},
		claims:    func(top map[string]json.RawMessage) bool { return !hasAWQKeys(top) },
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			q, err := openGPTQ(t, s.GPTQ)
			if err != nil {
				return nil, err
			}
			return q, nil
		},
	}
}
