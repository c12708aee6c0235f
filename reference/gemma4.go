package reference

import (
	"context"
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/detmath"
)

// gemma4Model holds the Gemma 4 text decoder's model-level weights and
// per-layer tables (arch/gemma4.go cites the transformers source).
type gemma4Model struct {
	pleEmbed rowReader // embed_tokens_per_layer [vocab_per_layer][layers·P]; nil without per-layer inputs
	pleProj  []float64 // per_layer_model_projection [layers·P][C]
	pleNorm  []float64 // per_layer_projection_norm [P]
	invFreq  [][]float64
	keep     []bool    // keep[j]: a KV-shared layer attends to layer j's keys and values
	ones     []float64 // the weightless v_norm (with_scale=False): [max head dim] ones
}

// bindGemma4 reads what Gemma 4 adds to the common layer weights.
func (m *model) bindGemma4(src source, vec func(string, int) ([]float64, error)) error {
	spec, d := m.spec, m.dims
	g := spec.Gemma4
	m.g4 = &gemma4Model{keep: make([]bool, d.L), ones: make([]float64, d.D)}
	for i := range m.g4.ones {
		m.g4.ones[i] = 1
	}
	var err error
	if g.PLE > 0 {
		pleEmbed, pleProj, pleNorm := spec.Gemma4Tensor(arch.Gemma4PLEEmbedName), spec.Gemma4Tensor(arch.Gemma4PLEProjName), spec.Gemma4Tensor(arch.Gemma4PLENormName)
		if m.g4.pleEmbed, err = src.Rows(pleEmbed); err != nil {
			return fmt.Errorf("reference: %s: %w", pleEmbed, err)
		}
		if r, c := m.g4.pleEmbed.Shape(); r != g.PLEVocab || c != d.L*g.PLE {
			return fmt.Errorf("reference: %s: tensor %q has shape [%d %d], want [%d %d] from config.json", src.Where(pleEmbed), pleEmbed, r, c, g.PLEVocab, d.L*g.PLE)
		}
		v, shape, err := src.Float64(pleProj)
		if err != nil {
			return fmt.Errorf("reference: %s: %w", pleProj, err)
		}
		if len(shape) != 2 || shape[0] != d.L*g.PLE || shape[1] != d.C {
			return fmt.Errorf("reference: %s: tensor %q has shape %v, want [%d %d]", src.Where(pleProj), pleProj, shape, d.L*g.PLE, d.C)
		}
		m.g4.pleProj = v
		if m.g4.pleNorm, err = vec(pleNorm, g.PLE); err != nil {
			return err
		}
	}
	for i := range m.layers {
		names := spec.Layer(i)
		l := &m.layers[i]
		if l.kv != nil {
			return fmt.Errorf("reference: %s: a quantized KV cache (kv_cache_scheme) is not supported for gemma4_text yet", names.Prefix+"self_attn")
		}
		if names.PLENorm != "" {
			if l.pleNorm, err = vec(names.PLENorm, d.C); err != nil {
				return err
			}
		}
		if l.layerScalar, err = vec(names.LayerScalar, 1); err != nil {
			return err
		}
		if spec.Sparse(i) {
			mw := &gemma4MoE{}
			for _, v := range []struct {
				dst  *[]float64
				name string
				n    int
			}{{&mw.scale, names.RouterScale, d.C}, {&mw.perExpert, names.PerExpertScale, spec.MoE.Experts},
				{&mw.preNorm, names.PreMoENorm, d.C}, {&mw.postNorm1, names.PostMLPNorm1, d.C}, {&mw.postNorm2, names.PostMoENorm, d.C}} {
				if *v.dst, err = vec(v.name, v.n); err != nil {
					return err
				}
			}
			// Gemma4TextRouter.forward: norm(r) · scale · hidden^-0.5, the
			// two factors formed once here (in float64: scale_c · C^-½).
			mw.routerIn = make([]float64, d.C)
			rs := 1 / math.Sqrt(float64(d.C))
			for c, v := range mw.scale {
				mw.routerIn[c] = v * rs
			}
			l.g4moe = mw
		}
		inv := spec.LayerInvFreq(i)
		for j, f := range inv {
			if !(f >= 0) || math.IsInf(f, 0) {
				return fmt.Errorf("reference: config.json: layer %d RoPE inv_freq[%d] = %v", i, j, f)
			}
		}
		m.g4.invFreq = append(m.g4.invFreq, inv)
		if src := g.KVSource(i); src != i {
			m.g4.keep[src] = true
		}
	}
	return nil
}

// forwardGemma4 is forward for the Gemma 4 text decoder
// (Gemma4TextModel.forward and Gemma4TextDecoderLayer.forward): the final
// norm output is left in ws.h.
func (m *model) forwardGemma4(ctx context.Context, ws *workspace, ids []int32, probe probeFunc) error {
	d, g, spec := m.dims, m.spec.Gemma4, m.spec
	T := len(ids)
	for t, id := range ids {
		if err := m.embed.Rows(int(id), int(id)+1, ws.x[t*d.C:(t+1)*d.C]); err != nil {
			return fmt.Errorf("reference: %w", err)
		}
	}
	probe(-1, arch.SiteEmbed, ws.x, d.C)
	f := math.Sqrt(float64(d.C)) // Gemma4TextScaledWordEmbedding, in float64 (see arch/gemma4.go)
	for i := range ws.x[:T*d.C] {
		ws.x[i] *= f
	}

	// Per-layer inputs (get_per_layer_inputs, project_per_layer_inputs):
	// ple[t][i·P:(i+1)·P] = (norm(proj(x)[t, i]·C^-½) + tab[id_t][i]·√P)·2^-½.
	P := g.PLE
	var ple []float64
	if P > 0 {
		ws.g4ple = grow(ws.g4ple, T*d.L*P)
		ws.g4tmp = grow(ws.g4tmp, T*d.L*P)
		ple = ws.g4ple
		tab := ws.g4tmp
		m.mul.MulNT(T, d.L*P, d.C, ws.x, d.C, m.g4.pleProj, d.C, ple, d.L*P)
		ps := 1 / math.Sqrt(float64(d.C))
		for i := range ple {
			ple[i] *= ps
		}
		rmsNorm(ple, ple, m.g4.pleNorm, T*d.L, P, d.eps)
		for t, id := range ids {
			if err := m.g4.pleEmbed.Rows(int(id), int(id)+1, tab[t*d.L*P:(t+1)*d.L*P]); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
		}
		es, is := math.Sqrt(float64(P)), 1/math.Sqrt(2)
		for i := range ple {
			ple[i] = (ple[i] + tab[i]*es) * is
		}
	}

	if len(ws.g4kv) != 2*d.L {
		ws.g4kv = make([][]float64, 2*d.L)
	}
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &m.layers[li]
		D, KV, W := spec.LayerHeadDim(li), spec.LayerKVHeads(li), spec.LayerIntermediate(li)
		ld := d
		ld.D, ld.KV = D, KV
		hd, kvd := d.H*D, KV*D
		half := D / 2
		ws.cos, ws.sin = grow(ws.cos, T*half), grow(ws.sin, T*half)
		for t := 0; t < T; t++ {
			for i, fr := range m.g4.invFreq[li] {
				ws.sin[t*half+i], ws.cos[t*half+i] = detmath.Sincos(float64(t) * fr)
			}
		}

		rmsNorm(ws.h, ws.x, l.attnNorm, T, d.C, d.eps)
		probe(li, arch.SiteAttnNorm, ws.h, d.C)
		if err := m.linear(ws, l.lin[arch.ProjQ], l.bias[arch.ProjQ], ws.h, T, d.C, ws.q, hd); err != nil {
			return err
		}
		rmsNorm(ws.q, ws.q, l.qNorm, T*d.H, D, d.eps)
		rope(ws.q, ws.cos, ws.sin, T, d.H, D, half)
		if src := g.KVSource(li); src != li { // KV-shared: the source layer's k, v after norm and RoPE
			copy(ws.k, ws.g4kv[2*src])
			copy(ws.v, ws.g4kv[2*src+1])
		} else {
			if err := m.linear(ws, l.lin[arch.ProjK], l.bias[arch.ProjK], ws.h, T, d.C, ws.k, kvd); err != nil {
				return err
			}
			if v := l.lin[arch.ProjV]; v != nil {
				if err := m.linear(ws, v, l.bias[arch.ProjV], ws.h, T, d.C, ws.v, kvd); err != nil {
					return err
				}
			} else { // attention_k_eq_v: values are k_proj's output before k_norm
				copy(ws.v[:T*kvd], ws.k[:T*kvd])
			}
			rmsNorm(ws.k, ws.k, l.kNorm, T*KV, D, d.eps)
			rope(ws.k, ws.cos, ws.sin, T, KV, D, half)
			rmsNorm(ws.v, ws.v, m.g4.ones[:D], T*KV, D, d.eps) // v_norm, with_scale=False
			probe(li, arch.SiteKCache, ws.k, kvd)
			probe(li, arch.SiteVCache, ws.v, kvd)
			if m.g4.keep[li] {
				ws.g4kv[2*li] = append(ws.g4kv[2*li][:0], ws.k[:T*kvd]...)
				ws.g4kv[2*li+1] = append(ws.g4kv[2*li+1][:0], ws.v[:T*kvd]...)
			}
		}
		m.attentionDims(ws, T, spec.Window(li), spec.AttnScale, 0, nil, ld)
		if err := m.linear(ws, l.lin[arch.ProjO], l.bias[arch.ProjO], ws.att, T, hd, ws.proj, d.C); err != nil {
			return err
		}
		rmsNorm(ws.proj, ws.proj, l.postAttnNorm, T, d.C, d.eps)
		probe(li, arch.SiteAttnOut, ws.proj, d.C)
		for i, v := range ws.proj[:T*d.C] {
			ws.x[i] += v
		}

		rmsNorm(ws.h, ws.x, l.mlpNorm, T, d.C, d.eps)
		probe(li, arch.SiteMLPNorm, ws.h, d.C)
		if err := m.linear(ws, l.lin[arch.ProjGate], nil, ws.h, T, d.C, ws.gate, W); err != nil {
			return err
		}
		if err := m.linear(ws, l.lin[arch.ProjUp], nil, ws.h, T, d.C, ws.up, W); err != nil {
			return err
		}
		for i, gv := range ws.gate[:T*W] {
			ws.gate[i] = geluTanh(gv) * ws.up[i]
		}
		if err := m.linear(ws, l.lin[arch.ProjDown], nil, ws.gate, T, W, ws.proj, d.C); err != nil {
			return err
		}
		if l.g4moe != nil {
			if err := m.gemma4Experts(ws, l, li, T, probe); err != nil {
				return err
			}
		}
		rmsNorm(ws.proj, ws.proj, l.postMLPNorm, T, d.C, d.eps)
		probe(li, arch.SiteMLPOut, ws.proj, d.C)
		for i, v := range ws.proj[:T*d.C] {
			ws.x[i] += v
		}

		if P > 0 { // per-layer input: x += norm(proj(gelu_tanh(gate(x)) · ple_i))
			ws.g4gate = grow(ws.g4gate, T*P)
			if err := m.linear(ws, l.lin[arch.ProjPLEGate], nil, ws.x, T, d.C, ws.g4gate, P); err != nil {
				return err
			}
			for t := 0; t < T; t++ {
				row := ws.g4gate[t*P : (t+1)*P]
				in := ple[(t*d.L+li)*P:]
				for j, gv := range row {
					row[j] = geluTanh(gv) * in[j]
				}
			}
			if err := m.linear(ws, l.lin[arch.ProjPLEProj], nil, ws.g4gate, T, P, ws.proj, d.C); err != nil {
				return err
			}
			rmsNorm(ws.proj, ws.proj, l.pleNorm, T, d.C, d.eps)
			for i, v := range ws.proj[:T*d.C] {
				ws.x[i] += v
			}
		}
		s := l.layerScalar[0]
		for i := range ws.x[:T*d.C] {
			ws.x[i] *= s
		}
		probe(li, arch.SiteLayerOut, ws.x, d.C)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rmsNorm(ws.h, ws.x, m.norm, T, d.C, d.eps)
	probe(-1, arch.SiteFinalNorm, ws.h, d.C)
	return nil
}

// gemma4Experts adds a Gemma 4 MoE block to the dense MLP output in ws.proj
// (Gemma4TextDecoderLayer.forward with enable_moe_block), the residual r
// being ws.x:
//
//	h1 = post_feedforward_layernorm_1(ws.proj)
//	z = norm(r) ⊙ scale · C^-½                     (norm: no weight)
//	routes = top-k of softmax(router.proj(z)), renormalised, · per_expert_scale
//	h2 = post_feedforward_layernorm_2(Σ w_e · expert_e(pre_feedforward_layernorm_2(r)))
//	ws.proj = h1 + h2
//
// Experts are decoded one at a time, only those some row chose
// (runExperts).
func (m *model) gemma4Experts(ws *workspace, l *layerWeights, li, T int, probe probeFunc) error {
	d, mw, moe := m.dims, l.g4moe, m.spec.MoE
	ws.g4h1 = grow(ws.g4h1, T*d.C)
	h1 := ws.g4h1[:T*d.C]
	rmsNorm(h1, ws.proj, mw.postNorm1, T, d.C, d.eps)
	rmsNorm(ws.h, ws.x, mw.routerIn, T, d.C, d.eps) // weightless norm, then scale · C^-½
	E := moe.Experts
	logits := ws.gate[:T*E]
	if err := m.linear(ws, l.lin[arch.ProjRouter], nil, ws.h, T, d.C, logits, E); err != nil {
		return err
	}
	probe(li, arch.SiteRouter, logits, E)
	routes := topKRoutes(logits, T, E, moe.TopK, true, mw.perExpert)
	rmsNorm(ws.h, ws.x, mw.preNorm, T, d.C, d.eps)
	out := ws.proj[:T*d.C]
	if err := m.runExperts(ws, routes, ws.h, out, m.gluExpert(ws, l, true)); err != nil {
		return err
	}
	rmsNorm(out, out, mw.postNorm2, T, d.C, d.eps)
	for i, v := range h1 {
		out[i] += v
	}
	return nil
}
