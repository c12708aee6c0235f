package reference

import (
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/detmath"
	"github.com/qppl/qppl/internal/torchtopk"
)

// mixture computes a mixture-of-experts MLP (Qwen3MoeSparseMoeBlock) of
// the normed rows ws.h into ws.proj (probeRouter sees the router logits):
//
//	p = softmax(h·W_routerᵀ)                    per row, float64
//	S = the TopK largest p (ties as torch.topk: internal/torchtopk)
//	w = p_S, divided by Σ p_S when NormTopK
//	out = Σ_{e ∈ S, ascending e} w_e · down_e(silu(gate_e(h)) ⊙ up_e(h))
//
// Each expert that some row chose is decoded (through m.linear, into the
// scratch buffer) only then, one at a time, and runs on exactly the rows
// routed to it, gathered into ws.moeIn — as transformers passes
// hidden_states[top_x] to the expert, so an activation quantizer sees the
// same rows. Experts no row chose are never decoded.
func (m *model) mixture(ws *workspace, l *layerWeights, T int, probeRouter func(logits []float64)) error {
	d := m.dims
	moe := m.spec.MoE
	E := moe.Experts
	logits := ws.gate[:T*E]
	if err := m.linear(ws, l.lin[arch.ProjRouter], nil, ws.h, T, d.C, logits, E); err != nil {
		return err
	}
	probeRouter(logits)
	routes := topKRoutes(logits, T, E, moe.TopK, moe.NormTopK, nil)
	if err := m.runExperts(ws, routes, ws.h, ws.proj[:T*d.C], m.gluExpert(ws, l, false)); err != nil {
		return err
	}
	if moe.SharedIntermediate > 0 {
		return m.sharedExpert(ws, l, T)
	}
	return nil
}

// route is one row routed to an expert, with its routing weight.
type route struct {
	row int
	w   float64
}

// topKRoutes turns router logits [T][E] into routes[e], the rows that
// chose expert e in ascending row order: per row p = softmax(logits), the
// k largest p as torch.topk chooses them on the CPU, ties included
// (internal/torchtopk; see arch/qwen3_moe.go),
// each weight p_e, divided by their sum when norm, then multiplied by
// scale[e] when scale is not nil (gemma4's per_expert_scale).
func topKRoutes(logits []float64, T, E, k int, norm bool, scale []float64) [][]route {
	routes := make([][]route, E)
	p := make([]float64, E)
	for t := 0; t < T; t++ {
		row := logits[t*E : (t+1)*E]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = max(mx, v)
		}
		var sum float64
		for e, v := range row {
			p[e] = detmath.Exp(v - mx)
			sum += p[e]
		}
		for e := range p {
			p[e] /= sum
		}
		chosen := torchtopk.Indices(p, k)
		var top float64
		for _, e := range chosen {
			top += p[e]
		}
		for _, e := range chosen {
			w := p[e]
			if norm {
				w /= top
			}
			if scale != nil {
				w *= scale[e]
			}
			routes[e] = append(routes[e], route{t, w})
		}
	}
	return routes
}

// runExperts sets out [T][C] to Σ_e Σ_{(row, w) ∈ routes[e]} w ·
// expert(e)(in[row]), experts in ascending order. Each expert that some row
// chose runs only then, one at a time (so it is decoded only then), on
// exactly the rows routed to it, gathered into ws.moeIn — as transformers
// passes hidden_states[top_x] to the expert, so an activation quantizer
// sees the same rows: expert(e, n, x, y) sets y [n][C] from x [n][C].
// Experts no row chose never run.
func (m *model) runExperts(ws *workspace, routes [][]route, in, out []float64, expert func(e, n int, x, y []float64) error) error {
	d := m.dims
	clear(out)
	for e, rs := range routes {
		if len(rs) == 0 {
			continue
		}
		n := len(rs)
		x := ws.moeIn[:n*d.C]
		for i, r := range rs {
			copy(x[i*d.C:(i+1)*d.C], in[r.row*d.C:(r.row+1)*d.C])
		}
		y := ws.moeOut[:n*d.C]
		if err := expert(e, n, x, y); err != nil {
			return err
		}
		for i, r := range rs {
			dst := out[r.row*d.C : (r.row+1)*d.C]
			for c, v := range y[i*d.C : (i+1)*d.C] {
				dst[c] += r.w * v
			}
		}
	}
	return nil
}

// gluExpert returns the expert body of l's experts for runExperts:
// down(act(gate x) ⊙ up x) with act silu, or gelu_tanh when gelu, each
// Linear through m.linear (decoded by rows, or into the scratch buffer).
func (m *model) gluExpert(ws *workspace, l *layerWeights, gelu bool) func(e, n int, x, y []float64) error {
	d := m.dims
	W := m.spec.MoE.Intermediate
	return func(e, n int, x, y []float64) error {
		ex := &l.experts[e]
		gate, up := ws.gate[:n*W], ws.up[:n*W]
		if err := m.linear(ws, ex[arch.ProjGate], nil, x, n, d.C, gate, W); err != nil {
			return err
		}
		if err := m.linear(ws, ex[arch.ProjUp], nil, x, n, d.C, up, W); err != nil {
			return err
		}
		for i, g := range gate {
			if gelu {
				gate[i] = geluTanh(g) * up[i]
			} else {
				gate[i] = g / (1 + detmath.Exp(-g)) * up[i] // silu(g) * u
			}
		}
		return m.linear(ws, ex[arch.ProjDown], nil, gate, n, W, y, d.C)
	}
}

// sharedExpert adds qwen3_5_moe's shared expert to ws.proj
// (Qwen3_5MoeSparseMoeBlock.forward): every row h gets
// sigmoid(shared_expert_gate(h)) · down(silu(gate(h)) ⊙ up(h)), the MLP of
// width shared_expert_intermediate_size, after the routed experts' sum.
func (m *model) sharedExpert(ws *workspace, l *layerWeights, T int) error {
	d := m.dims
	W := m.spec.MoE.SharedIntermediate
	gate, up := ws.gate[:T*W], ws.up[:T*W]
	if err := m.linear(ws, l.lin[arch.ProjSharedGate], nil, ws.h, T, d.C, gate, W); err != nil {
		return err
	}
	if err := m.linear(ws, l.lin[arch.ProjSharedUp], nil, ws.h, T, d.C, up, W); err != nil {
		return err
	}
	for i, g := range gate {
		gate[i] = g / (1 + detmath.Exp(-g)) * up[i]
	}
	y := ws.moeOut[:T*d.C]
	if err := m.linear(ws, l.lin[arch.ProjSharedDown], nil, gate, T, W, y, d.C); err != nil {
		return err
	}
	sg := ws.moeIn[:T] // the gate's [T][1] logits
	if err := m.linear(ws, l.lin[arch.ProjSharedExpertGate], nil, ws.h, T, d.C, sg, 1); err != nil {
		return err
	}
	out := ws.proj[:T*d.C]
	for t := 0; t < T; t++ {
		s := 1 / (1 + detmath.Exp(-sg[t]))
		for c, v := range y[t*d.C : (t+1)*d.C] {
			out[t*d.C+c] += s * v
		}
	}
	return nil
}
