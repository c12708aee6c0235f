package gguf

import (
	"fmt"

	"github.com/qppl/qppl/quant"
)

// GptOssExperts opens gpt-oss's fused experts of one layer (the Hugging
// Face names gateUp and down, arch.Spec.GptOssExperts) from the split
// GGUF tensors (arch_gptoss.go) in nn.Linear orientation, as
// quant.Scheme.OpenGptOssExperts gives them for a safetensors checkpoint:
// gateUp[e] [2·inter, hidden] with gate rows at even and up rows at odd
// indices (expert e's slices of ffn_gate_exps and ffn_up_exps,
// interleaved again), down[e] [hidden, inter] (expert e's slice of
// ffn_down_exps).
func (m *Model) GptOssExperts(gateUp, down string, experts, hidden, inter int) (gu, dn []quant.Linear, err error) {
	if m.Spec.GptOss == nil {
		return nil, nil, fmt.Errorf("%s: not a gpt-oss model", m.Path)
	}
	for e := 0; e < experts; e++ {
		g, err := m.Linear(fmt.Sprintf("%s.gate[%d]", gateUp, e))
		if err != nil {
			return nil, nil, err
		}
		u, err := m.Linear(fmt.Sprintf("%s.up[%d]", gateUp, e))
		if err != nil {
			return nil, nil, err
		}
		d, err := m.Linear(fmt.Sprintf("%s[%d]", down, e))
		if err != nil {
			return nil, nil, err
		}
		for _, c := range []struct {
			l       quant.Linear
			out, in int
		}{{g, inter, hidden}, {u, inter, hidden}, {d, hidden, inter}} {
			if o, i := c.l.Shape(); o != c.out || i != c.in {
				return nil, nil, fmt.Errorf("%w: %s: %s has shape [%d %d], want [%d %d]", ErrFormat, m.Path, c.l.Module(), o, i, c.out, c.in)
			}
		}
		gu = append(gu, &interleaved{name: fmt.Sprintf("%s[%d]", gateUp, e), gate: g, up: u})
		dn = append(dn, d)
	}
	return gu, dn, nil
}

// gptOssBias reads gate_up_proj_bias [E, 2·I] from its gate and up halves
// (ffn_gate_exps.bias, ffn_up_exps.bias), interleaved again; ok is false
// for any other name.
func (m *Model) gptOssBias(hf string) (v []float64, shape []int, ok bool, err error) {
	if m.Spec == nil || m.Spec.GptOss == nil {
		return nil, nil, false, nil
	}
	if _, direct := m.hfName(hf); direct {
		return nil, nil, false, nil
	}
	if _, isGate := m.hfName(hf + ".gate"); !isGate {
		return nil, nil, false, nil
	}
	g, gs, err := m.Float64(hf + ".gate")
	if err != nil {
		return nil, nil, true, err
	}
	u, us, err := m.Float64(hf + ".up")
	if err != nil {
		return nil, nil, true, err
	}
	if len(gs) != 2 || len(us) != 2 || gs[0] != us[0] || gs[1] != us[1] {
		return nil, nil, true, fmt.Errorf("%w: %s: %s: gate half %v and up half %v differ", ErrFormat, m.Path, hf, gs, us)
	}
	E, I := gs[0], gs[1]
	v = make([]float64, 2*E*I)
	for e := 0; e < E; e++ {
		for j := 0; j < I; j++ {
			v[e*2*I+2*j], v[e*2*I+2*j+1] = g[e*I+j], u[e*I+j]
		}
	}
	return v, []int{E, 2 * I}, true, nil
}

// interleaved is one gpt-oss expert's gate_up Linear: row 2j is the gate
// Linear's row j, row 2j+1 the up Linear's row j.
type interleaved struct {
	name     string
	gate, up quant.Linear
}

func (l *interleaved) Module() string { return l.name }
func (l *interleaved) Shape() (out, in int) {
	o, i := l.gate.Shape()
	return 2 * o, i
}
func (l *interleaved) Format() string                     { return l.gate.Format() }
func (l *interleaved) StoredBytes() int64                 { return l.gate.StoredBytes() + l.up.StoredBytes() }
func (l *interleaved) InputQuantizer() quant.ActQuantizer { return nil }

// Dequantize writes the gate and up rows, interleaved.
func (l *interleaved) Dequantize(dst []float64) error {
	o, in := l.gate.Shape()
	if len(dst) != 2*o*in {
		return fmt.Errorf("%s: Dequantize into %d values, want %d", l.name, len(dst), 2*o*in)
	}
	buf := make([]float64, o*in)
	for h, x := range []quant.Linear{l.gate, l.up} {
		if err := x.Dequantize(buf); err != nil {
			return err
		}
		for j := 0; j < o; j++ {
			copy(dst[(2*j+h)*in:(2*j+h+1)*in], buf[j*in:(j+1)*in])
		}
	}
	return nil
}
