package reference

import (
	"fmt"
	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/detmath"
	"github.com/qppl/qppl/internal/torchtopk"
	"github.com/qppl/qppl/quant"
)

// gptOssExperts are one gpt-oss layer's fused experts, one Linear per
// expert in nn.Linear orientation (quant.OpenGptOssExperts): gateUp[e]
// [2·I, C] (even rows gate, odd rows up), down[e] [C, I], with their
// biases gateUpBias [E][2·I] and downBias [E][C].
type gptOssExperts struct {
	gateUp, down         []quant.Linear
	gateUpBias, downBias []float64
}

// gptOssSource is a source that can open gpt-oss's fused experts.
type gptOssSource interface {
	GptOssExperts(gateUp, down string, experts, hidden, inter int) (gu, dn []quant.Linear, err error)
}

// GptOssExperts implements gptOssSource through package quant.
func (s checkpointSource) GptOssExperts(gateUp, down string, experts, hidden, inter int) ([]quant.Linear, []quant.Linear, error) {
	return s.scheme.OpenGptOssExperts(s.m, gateUp, down, experts, hidden, inter)
}

// bindGptOss reads every layer's sinks, expert handles and expert biases.
func (m *model) bindGptOss(src source, vec func(string, int) ([]float64, error)) error {
	spec := m.spec
	gs, ok := src.(gptOssSource)
	if !ok {
		return fmt.Errorf("reference: %s: this source cannot read gpt-oss's fused experts", spec.Name)
	}
	E, I, C := spec.MoE.Experts, spec.MoE.Intermediate, m.C
	for i := range m.layers {
		l := &m.layers[i]
		names := spec.Layer(i)
		var err error
		if l.sinks, err = vec(names.Sinks, m.H); err != nil {
			return err
		}
		gu, gub, dn, db := spec.GptOssExperts(i)
		x := &gptOssExperts{}
		if x.gateUp, x.down, err = gs.GptOssExperts(gu, dn, E, C, I); err != nil {
			return fmt.Errorf("reference: %w", err)
		}
		for e := 0; e < E; e++ {
			m.noteLinear(x.gateUp[e], 2*I*C)
			m.noteLinear(x.down[e], C*I)
		}
		for _, b := range []struct {
			dst  *[]float64
			name string
			n    int
		}{{&x.gateUpBias, gub, 2 * I}, {&x.downBias, db, C}} {
			v, shape, err := src.Float64(b.name)
			if err != nil {
				return fmt.Errorf("reference: %s: %w", b.name, err)
			}
			if len(shape) != 2 || shape[0] != E || shape[1] != b.n || len(v) != E*b.n {
				return fmt.Errorf("reference: %s: tensor %q has shape %v, want [%d %d]", src.Where(b.name), b.name, shape, E, b.n)
			}
			*b.dst = v
		}
		l.gptOss = x
	}
	return nil
}

// gptOssMixture computes gpt-oss's MLP (GptOssMLP: GptOssTopKRouter, then
// GptOssExperts) of the normed rows ws.h into ws.proj:
//
//	logits = h·W_routerᵀ + b_router
//	S = the TopK largest logits (ties as torch.topk: internal/torchtopk)
//	w = softmax over the logits of S (topk first, then softmax)
//	gate_e, up_e = the even and odd columns of h·gate_upᵀ + b_gate_up
//	a_e = (clamp(up_e, −limit, limit) + 1) · g·sigmoid(alpha·g), g = min(gate_e, limit)
//	out = Σ_{e ∈ S, ascending e} w_e · (a_e·downᵀ + b_down)
//
// Each expert some row chose is decoded only then, one at a time, on the
// rows routed to it; the others are never decoded.
func (m *model) gptOssMixture(ws *workspace, l *layerWeights, T int, probeRouter func(logits []float64)) error {
	d := m.dims
	moe, g, x := m.spec.MoE, m.spec.GptOss, l.gptOss
	E, k, I := moe.Experts, moe.TopK, moe.Intermediate
	logits := ws.gate[:T*E]
	if err := m.linear(ws, l.lin[arch.ProjRouter], l.bias[arch.ProjRouter], ws.h, T, d.C, logits, E); err != nil {
		return err
	}
	probeRouter(logits)
	routes := make([][]route, E)
	p := make([]float64, k)
	for t := 0; t < T; t++ {
		row := logits[t*E : (t+1)*E]
		order := torchtopk.Indices(row, k) // descending, ties as torch.topk
		mx := row[order[0]]
		var sum float64
		for j, e := range order[:k] {
			p[j] = detmath.Exp(row[e] - mx)
			sum += p[j]
		}
		for j, e := range order[:k] {
			routes[e] = append(routes[e], route{t, p[j] / sum})
		}
	}
	return m.runExperts(ws, routes, ws.h, ws.proj[:T*d.C], func(e, n int, rows, y []float64) error {
		gu := ws.gate[:n*2*I]
		if err := m.linear(ws, x.gateUp[e], x.gateUpBias[e*2*I:(e+1)*2*I], rows, n, d.C, gu, 2*I); err != nil {
			return err
		}
		act := ws.up[:n*I]
		for i := range act {
			gate := min(gu[2*i], g.Limit)
			up := min(max(gu[2*i+1], -g.Limit), g.Limit)
			glu := gate / (1 + detmath.Exp(-gate*g.Alpha))
			act[i] = (up + 1) * glu
		}
		return m.linear(ws, x.down[e], x.downBias[e*d.C:(e+1)*d.C], act, n, I, y, d.C)
	})
}
