package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// AWQConfig is a quant_method "awq" (GEMM) config.
type AWQConfig struct {
	Bits      int  `json:"bits"`
	GroupSize int  `json:"group_size"`
	ZeroPoint bool `json:"zero_point"`
}

// Scheme is a parsed quantization_config (or the absence of one).

func parseAWQ(top map[string]json.RawMessage) (*AWQConfig, error) {
	c := &AWQConfig{}
	var err error
	if c.Bits, err = integer(top, "bits", 0); err != nil {
		return nil, err
	}
	if c.Bits == 0 {
		if c.Bits, err = integer(top, "w_bit", 4); err != nil {
			return nil, err
		}
	}
	if c.Bits != 4 {
		return nil, fmt.Errorf("awq bits %d not supported (4)", c.Bits)
	}
	if c.GroupSize, err = integer(top, "group_size", 0); err != nil {
		return nil, err
	}
	if c.GroupSize == 0 {
		if c.GroupSize, err = integer(top, "q_group_size", 128); err != nil {
			return nil, err
		}
	}
	if c.GroupSize <= 0 {
		return nil, fmt.Errorf("awq group_size %d: want a positive size", c.GroupSize)
	}
	if c.ZeroPoint, err = boolean(top, "zero_point", true); err != nil {
		return nil, err
	}
	if !c.ZeroPoint {
		return nil, fmt.Errorf("awq zero_point false is not supported")
	}
	v, err := str(top, "version", "gemm")
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(v) {
	case "gemm":
	case "gemv", "gemv_fast":
		// a different packing of qweight (and scales), not the GEMM one
		return nil, fmt.Errorf("awq version %q: AutoAWQ's GEMV layout is not evaluated by qppl yet (only GEMM); nothing was computed", v)
	default:
		return nil, fmt.Errorf("awq version %q not supported (gemm)", v)
	}
	return c, nil
}

// groupFor returns the config group that targets module (a Linear), or nil
// when none does or the module is ignored. Priority: exact name, regex,
// class name; ties go to the first group in sorted name order.
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
	return a.DequantizeRows(0, a.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (a *AWQ) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := a.checkRows(r0, r1, dst); err != nil {
		return err
	}
	w8 := a.Out / 8
	nr := r1 - r0
	zeros := make([]int, a.Groups*nr) // [group][row - r0]
	for g := 0; g < a.Groups; g++ {
		for o := r0; o < r1; o++ {
			zeros[g*nr+o-r0] = awqField(a.QZeros[g*w8:(g+1)*w8], o)
		}
	}
	// Tiles of 8 inputs × 8 outputs: reads 8 words, writes 8 runs of 8.
	for i0 := 0; i0 < a.In; i0 += 8 {
		n := min(8, a.In-i0)
		for j := r0 / 8; j < (r1+7)/8; j++ {
			for c := 0; c < 8; c++ {
				o := 8*j + c
				if o < r0 || o >= r1 {
					continue
				}
				sh := uint(AWQNibble(c)) * 4
				d := dst[(o-r0)*a.In+i0 : (o-r0)*a.In+i0+n]
				for k := range d {
					i := i0 + k
					g := i / a.GroupSize
					d[k] = float64(int(a.QWeight[i*w8+j]>>sh&0xF)-zeros[g*nr+o-r0]) * a.Scales[g*a.Out+o]
				}
			}
		}
	}
	return a.checkFiniteRows(r0, dst)
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

func awqFamily() family {
	return family{
		name:   "AWQ",
		method: MethodAWQ,
		parse: func(s *Scheme, top map[string]json.RawMessage) (err error) {
			s.AWQ, err = parseAWQ(top)
			return err
		},
		markers:   []string{"qweight"},
		sideFiles: []string{"quant_config.json", "quantize_config.json"},
		claims:    hasAWQKeys,
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			a, err := openAWQ(t, s.AWQ)
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	}
}

// hasAWQKeys reports AutoAWQ's own key names (w_bit, q_group_size), which
// AutoGPTQ's quantize_config.json never has.
func hasAWQKeys(top map[string]json.RawMessage) bool {
	_, w := top["w_bit"]
	_, g := top["q_group_size"]
	return w || g
}
