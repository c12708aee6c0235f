package oracle

import "math"

// attnShape is what the families' attention differs in.
type attnShape struct {
	heads, kvHeads, headDim int
	// window is the sliding window: query t sees keys j with
	// t−window < j ≤ t; 0 sees every key j ≤ t.
	window int
	// scale multiplies q·k (transformers' scaling).
	scale float64
	// softcap, when not 0, caps each scaled score s as
	// softcap·tanh(s/softcap) (Gemma 2's attn_logit_softcapping).
	softcap float64
	// sinks, when not nil, holds one logit per query head that joins the
	// softmax's denominator and whose value is dropped (gpt-oss's
	// self_attn.sinks: eager_attention_forward concatenates it to the
	// scores and drops its column after the softmax).
	sinks []float64
}

// attention is naive causal grouped-query attention: for query position t
// and head h, the softmax over the visible keys j of KV head
// h/(heads/kvHeads) of the scores q_t·k_j·scale (soft-capped; with the
// sink of h in the denominator), times the values v_j, summed. q holds
// heads×headDim values per position, k and v kvHeads×headDim.
func attention(q, k, v [][]float64, a attnShape) [][]float64 {
	D, group := a.headDim, a.heads/a.kvHeads
	out := make([][]float64, len(q))
	for t := range q {
		out[t] = make([]float64, a.heads*D)
		first := 0
		if a.window > 0 {
			first = max(0, t-a.window+1)
		}
		for h := 0; h < a.heads; h++ {
			g := h / group
			qh := q[t][h*D : (h+1)*D]
			w := make([]float64, t+1-first)
			top := math.Inf(-1)
			for j := first; j <= t; j++ {
				s := dot(qh, k[j][g*D:(g+1)*D]) * a.scale
				if a.softcap != 0 {
					s = math.Tanh(s/a.softcap) * a.softcap
				}
				w[j-first] = s
				top = math.Max(top, s)
			}
			if a.sinks != nil {
				top = math.Max(top, a.sinks[h])
			}
			z := 0.0
			for i := range w {
				w[i] = math.Exp(w[i] - top)
				z += w[i]
			}
			if a.sinks != nil {
				z += math.Exp(a.sinks[h] - top)
			}
			dst := out[t][h*D : (h+1)*D]
			for j := first; j <= t; j++ {
				pj := w[j-first] / z
				vj := v[j][g*D : (g+1)*D]
				for d := range dst {
					dst[d] += pj * vj[d]
				}
			}
		}
	}
	return out
}
