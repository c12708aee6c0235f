package oracle

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/qppl/qppl/checkpoint"
)

// g4settings is the oracle's own reading of a gemma4_text config.json
// (Gemma4TextConfig in transformers' configuration_gemma4.py, read
// independently of package arch).
type g4settings struct {
	vocab, hidden, inter, layers, heads       int
	kvHeads, headDim, globalKV, globalHeadDim int
	eps                                       float64
	tied, bias, kEqV, doubleWide              bool
	window, firstShared, ple, pleVocab        int
	full                                      []bool
	slidingTheta, fullTheta, partial, factor  float64
	finalCap                                  float64
	prefix                                    string // "model.", or "model.language_model." (gemma4's text_config)
	// enable_moe_block: every layer adds num_experts experts of width
	// moe_intermediate_size, top_k_experts per token.
	moe                     bool
	experts, topK, moeInter int
}

// readG4 reads cfg.Raw with Gemma4TextConfig's defaults: every key absent
// or null takes the dataclass default (None where the field is Optional).
func readG4(cfg *checkpoint.Config) (*g4settings, error) {
	raw := cfg.Raw
	prefix, wrapperTie := "model.", true
	if cfg.ModelType == "gemma4" {
		// Gemma4Config: the decoder's keys under text_config (required:
		// without it the default Gemma4TextConfig would be built), its
		// modules under Gemma4Model.language_model; its own
		// tie_word_embeddings (True) must agree with text_config's.
		tc, ok := raw["text_config"]
		if !ok || string(tc) == "null" {
			return nil, fmt.Errorf("oracle: gemma4 without text_config")
		}
		if v, ok := raw["tie_word_embeddings"]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &wrapperTie); err != nil {
				return nil, fmt.Errorf("oracle: gemma4 tie_word_embeddings: %w", err)
			}
		}
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(tc, &sub); err != nil {
			return nil, fmt.Errorf("oracle: gemma4 text_config: %w", err)
		}
		raw, prefix = sub, "model.language_model."
	}
	num := func(key string, def float64) (float64, bool, error) {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return def, false, nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return 0, true, fmt.Errorf("oracle: gemma4 %s: %w", key, err)
		}
		return f, true, nil
	}
	var err error
	geti := func(key string, def int) int {
		f, _, e := num(key, float64(def))
		if e != nil && err == nil {
			err = e
		}
		return int(f)
	}
	getf := func(key string, def float64) float64 {
		f, _, e := num(key, def)
		if e != nil && err == nil {
			err = e
		}
		return f
	}
	getb := func(key string, def bool) bool {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return def
		}
		var b bool
		if e := json.Unmarshal(v, &b); e != nil && err == nil {
			err = fmt.Errorf("oracle: gemma4 %s: %w", key, e)
		}
		return b
	}
	s := &g4settings{
		vocab: geti("vocab_size", 262144), hidden: geti("hidden_size", 2304), inter: geti("intermediate_size", 9216),
		layers: geti("num_hidden_layers", 30), heads: geti("num_attention_heads", 8),
		kvHeads: geti("num_key_value_heads", 4), headDim: geti("head_dim", 256),
		eps: getf("rms_norm_eps", 1e-6), tied: getb("tie_word_embeddings", true), bias: getb("attention_bias", false),
		window: geti("sliding_window", 512), finalCap: getf("final_logit_softcapping", 0),
		kEqV: getb("attention_k_eq_v", false), doubleWide: getb("use_double_wide_mlp", false),
		ple: geti("hidden_size_per_layer_input", 0), pleVocab: geti("vocab_size_per_layer_input", 262144),
		globalHeadDim: geti("global_head_dim", 0),
		slidingTheta:  1e4, fullTheta: 1e6, partial: 0.25, factor: 1, prefix: prefix,
	}
	if cfg.ModelType == "gemma4" && s.tied != wrapperTie {
		return nil, fmt.Errorf("oracle: gemma4 tie_word_embeddings: wrapper %v, text_config %v", wrapperTie, s.tied)
	}
	if _, ok := raw["hidden_size_per_layer_input"]; !ok {
		s.ple = 256 // the dataclass default; null means none
	}
	if _, ok := raw["global_head_dim"]; !ok {
		s.globalHeadDim = 512
	}
	if s.globalHeadDim == 0 {
		s.globalHeadDim = s.headDim
	}
	s.moe = getb("enable_moe_block", false)
	if s.moe {
		s.experts, s.topK, s.moeInter = geti("num_experts", 0), geti("top_k_experts", 0), geti("moe_intermediate_size", 0)
		if s.experts <= 0 || s.topK <= 0 || s.topK > s.experts || s.moeInter <= 0 {
			return nil, fmt.Errorf("oracle: gemma4 MoE: %d experts, top %d, width %d", s.experts, s.topK, s.moeInter)
		}
	}
	s.globalKV = s.kvHeads
	if s.kEqV {
		s.globalKV = geti("num_global_key_value_heads", 0)
	}
	if err != nil {
		return nil, err
	}
	// layer_types: default sliding unless (i+1) % 6 == 0; last always full.
	s.full = make([]bool, s.layers)
	var types []string
	if v, ok := raw["layer_types"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &types); err != nil || len(types) != s.layers {
			return nil, fmt.Errorf("oracle: gemma4 layer_types %s", v)
		}
	}
	for i := range s.full {
		if types != nil {
			s.full[i] = types[i] == "full_attention"
		} else {
			s.full[i] = (i+1)%6 == 0
		}
	}
	s.full[s.layers-1] = true
	n := geti("num_kv_shared_layers", 0)
	s.firstShared = s.layers
	if s.layers-n > 0 && n > 0 {
		s.firstShared = s.layers - n
	}
	if v, ok := raw["rope_parameters"]; ok && string(v) != "null" {
		var rp map[string]struct {
			Type    string   `json:"rope_type"`
			Theta   *float64 `json:"rope_theta"`
			Partial *float64 `json:"partial_rotary_factor"`
			Factor  *float64 `json:"factor"`
		}
		if err := json.Unmarshal(v, &rp); err != nil {
			return nil, fmt.Errorf("oracle: gemma4 rope_parameters: %w", err)
		}
		sl, fu := rp["sliding_attention"], rp["full_attention"]
		if sl.Type != "default" || fu.Type != "proportional" {
			return nil, fmt.Errorf("oracle: gemma4 rope types %q, %q", sl.Type, fu.Type)
		}
		if sl.Theta != nil {
			s.slidingTheta = *sl.Theta
		}
		if fu.Theta != nil {
			s.fullTheta = *fu.Theta
		}
		s.partial = 1
		if fu.Partial != nil {
			s.partial = *fu.Partial
		}
		if fu.Factor != nil {
			s.factor = *fu.Factor
		}
	}
	return s, nil
}

// source returns the layer whose keys and values layer i attends to.
func (s *g4settings) source(i int) int {
	if i < s.firstShared {
		return i
	}
	for j := s.firstShared - 1; j >= 0; j-- {
		if s.full[j] == s.full[i] {
			return j
		}
	}
	return -1
}

// g4LogProbs is LogProbs for gemma4_text: every position's prefix is run
// through the whole network again, naively.
func g4LogProbs(cfg *checkpoint.Config, get Getter, tokens []int32, opt Options) ([][]float64, error) {
	s, err := readG4(cfg)
	if err != nil {
		return nil, err
	}
	if opt.KVCacheFP8 {
		return nil, fmt.Errorf("oracle: gemma4_text with an FP8 KV cache is not implemented")
	}
	w := func(name string, shape ...int) ([]float64, error) { return shaped(get, name, shape...) }
	mat := func(name string, out, in int) (matrix, error) { return matrixOf(get, name, out, in) }
	emb, err := w(s.prefix+"embed_tokens.weight", s.vocab, s.hidden)
	if err != nil {
		return nil, err
	}
	type layer struct {
		in, postAttn, preFF, postFF, qn, kn, pleNorm []float64
		q, k, v, o, gate, up, down, pg, pp           matrix
		qb, kb, vb, ob                               []float64
		scalar                                       float64
		hd, kv, width                                int
		// MoE (Gemma4TextRouter, Gemma4TextExperts): router.proj,
		// router.scale, router.per_expert_scale, the block's three norms
		// and the experts.
		router                   matrix
		rScale, perExpert        []float64
		preFF2, postFF1, postFF2 []float64
		experts                  []expert
	}
	ls := make([]layer, s.layers)
	for i := range ls {
		p := fmt.Sprintf("%slayers.%d.", s.prefix, i)
		l := &ls[i]
		l.hd, l.kv, l.width = s.headDim, s.kvHeads, s.inter
		if s.full[i] {
			l.hd, l.kv = s.globalHeadDim, s.globalKV
		}
		if s.doubleWide && i >= s.firstShared {
			l.width *= 2
		}
		for _, n := range []struct {
			dst  *[]float64
			name string
			n    int
		}{{&l.in, "input_layernorm", s.hidden}, {&l.postAttn, "post_attention_layernorm", s.hidden},
			{&l.preFF, "pre_feedforward_layernorm", s.hidden}, {&l.postFF, "post_feedforward_layernorm", s.hidden},
			{&l.qn, "self_attn.q_norm", l.hd}} {
			if *n.dst, err = w(p+n.name+".weight", n.n); err != nil {
				return nil, err
			}
		}
		if l.q, err = mat(p+"self_attn.q_proj", s.heads*l.hd, s.hidden); err != nil {
			return nil, err
		}
		if l.o, err = mat(p+"self_attn.o_proj", s.hidden, s.heads*l.hd); err != nil {
			return nil, err
		}
		if s.bias {
			if l.qb, err = w(p+"self_attn.q_proj.bias", s.heads*l.hd); err != nil {
				return nil, err
			}
			if l.ob, err = w(p+"self_attn.o_proj.bias", s.hidden); err != nil {
				return nil, err
			}
		}
		if s.source(i) == i {
			if l.k, err = mat(p+"self_attn.k_proj", l.kv*l.hd, s.hidden); err != nil {
				return nil, err
			}
			if l.kn, err = w(p+"self_attn.k_norm.weight", l.hd); err != nil {
				return nil, err
			}
			if s.bias {
				if l.kb, err = w(p+"self_attn.k_proj.bias", l.kv*l.hd); err != nil {
					return nil, err
				}
			}
			if !(s.kEqV && s.full[i]) {
				if l.v, err = mat(p+"self_attn.v_proj", l.kv*l.hd, s.hidden); err != nil {
					return nil, err
				}
				if s.bias {
					if l.vb, err = w(p+"self_attn.v_proj.bias", l.kv*l.hd); err != nil {
						return nil, err
					}
				}
			}
		}
		if l.gate, err = mat(p+"mlp.gate_proj", l.width, s.hidden); err != nil {
			return nil, err
		}
		if l.up, err = mat(p+"mlp.up_proj", l.width, s.hidden); err != nil {
			return nil, err
		}
		if l.down, err = mat(p+"mlp.down_proj", s.hidden, l.width); err != nil {
			return nil, err
		}
		if s.ple > 0 {
			if l.pg, err = mat(p+"per_layer_input_gate", s.ple, s.hidden); err != nil {
				return nil, err
			}
			if l.pp, err = mat(p+"per_layer_projection", s.hidden, s.ple); err != nil {
				return nil, err
			}
			if l.pleNorm, err = w(p+"post_per_layer_input_norm.weight", s.hidden); err != nil {
				return nil, err
			}
		}
		if s.moe {
			if err := g4LoadMoE(s, get, w, mat, p, &l.router, &l.rScale, &l.perExpert, &l.preFF2, &l.postFF1, &l.postFF2, &l.experts); err != nil {
				return nil, err
			}
		}
		sc, err := w(p+"layer_scalar", 1)
		if err != nil {
			return nil, err
		}
		l.scalar = sc[0]
	}
	var pleTab, pleProj, pleNorm []float64
	if s.ple > 0 {
		if pleTab, err = w(s.prefix+"embed_tokens_per_layer.weight", s.pleVocab, s.layers*s.ple); err != nil {
			return nil, err
		}
		if pleProj, err = w(s.prefix+"per_layer_model_projection.weight", s.layers*s.ple, s.hidden); err != nil {
			return nil, err
		}
		if pleNorm, err = w(s.prefix+"per_layer_projection_norm.weight", s.ple); err != nil {
			return nil, err
		}
	}
	finalNorm, err := w(s.prefix+"norm.weight", s.hidden)
	if err != nil {
		return nil, err
	}
	head := emb
	if !s.tied {
		if head, err = w("lm_head.weight", s.vocab, s.hidden); err != nil {
			return nil, err
		}
	}
	gelu := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	ones := func(n int) []float64 {
		o := make([]float64, n)
		for i := range o {
			o[i] = 1
		}
		return o
	}
	// rotate applies rotate-half RoPE at position pos to each head of x
	// (width hd), with frequencies freq.
	rotate := func(x []float64, hd int, pos int, freq []float64) {
		for h := 0; h < len(x)/hd; h++ {
			v := x[h*hd : (h+1)*hd]
			for j := 0; j < hd/2; j++ {
				sn, cs := math.Sincos(float64(pos) * freq[j])
				a, b := v[j], v[j+hd/2]
				v[j], v[j+hd/2] = a*cs-b*sn, b*cs+a*sn
			}
		}
	}
	freqs := func(i, hd int) []float64 {
		f := make([]float64, hd/2)
		if !s.full[i] {
			for j := range f {
				f[j] = math.Pow(s.slidingTheta, -float64(2*j)/float64(hd))
			}
			return f
		}
		for j := 0; j < int(s.partial*float64(hd)/2); j++ {
			f[j] = math.Pow(s.fullTheta, -float64(2*j)/float64(hd))
		}
		for j := range f {
			f[j] /= s.factor
		}
		return f
	}
	perHead := func(x []float64, hd int, wt []float64) []float64 {
		out := make([]float64, 0, len(x))
		for h := 0; h < len(x)/hd; h++ {
			out = append(out, rms(x[h*hd:(h+1)*hd], wt, s.eps)...)
		}
		return out
	}

	run := func(toks []int32) ([][]float64, error) {
		T := len(toks)
		xs := make([][]float64, T)
		for t, id := range toks {
			xs[t] = make([]float64, s.hidden)
			for c := range xs[t] {
				xs[t][c] = emb[int(id)*s.hidden+c] * math.Sqrt(float64(s.hidden))
			}
		}
		var ple [][]float64 // [T][layers·P]
		if s.ple > 0 {
			ple = make([][]float64, T)
			for t, id := range toks {
				ple[t] = make([]float64, s.layers*s.ple)
				for r := range ple[t] {
					ple[t][r] = dot(pleProj[r*s.hidden:(r+1)*s.hidden], xs[t]) / math.Sqrt(float64(s.hidden))
				}
				for i := 0; i < s.layers; i++ {
					seg := rms(ple[t][i*s.ple:(i+1)*s.ple], pleNorm, s.eps)
					for j := range seg {
						tab := pleTab[int(id)*s.layers*s.ple+i*s.ple+j] * math.Sqrt(float64(s.ple))
						ple[t][i*s.ple+j] = (seg[j] + tab) / math.Sqrt2
					}
				}
			}
		}
		keys := make([][][]float64, s.layers)
		vals := make([][][]float64, s.layers)
		for i, l := range ls {
			normed := make([][]float64, T)
			for t := range xs {
				normed[t] = rms(xs[t], l.in, s.eps)
			}
			q, err := apply(l.q, l.qb, normed, opt)
			if err != nil {
				return nil, err
			}
			f := freqs(i, l.hd)
			for t := range q {
				q[t] = perHead(q[t], l.hd, l.qn)
				rotate(q[t], l.hd, t, f)
			}
			if src := s.source(i); src != i {
				keys[i], vals[i] = keys[src], vals[src]
			} else {
				k, err := apply(l.k, l.kb, normed, opt)
				if err != nil {
					return nil, err
				}
				v := k
				if l.v.rows != nil {
					if v, err = apply(l.v, l.vb, normed, opt); err != nil {
						return nil, err
					}
				}
				keys[i], vals[i] = make([][]float64, T), make([][]float64, T)
				for t := range k {
					vals[i][t] = perHead(v[t], l.hd, ones(l.hd))
					keys[i][t] = perHead(k[t], l.hd, l.kn)
					rotate(keys[i][t], l.hd, t, f)
				}
			}
			window := 0
			if !s.full[i] {
				window = s.window
			}
			att := attention(q, keys[i], vals[i], attnShape{heads: s.heads, kvHeads: l.kv, headDim: l.hd,
				window: window, scale: 1}) // scaling 1.0
			o, err := apply(l.o, l.ob, att, opt)
			if err != nil {
				return nil, err
			}
			for t := range xs {
				a := rms(o[t], l.postAttn, s.eps)
				for c := range xs[t] {
					xs[t][c] += a[c]
				}
			}
			for t := range xs {
				normed[t] = rms(xs[t], l.preFF, s.eps)
			}
			gt, err := apply(l.gate, nil, normed, opt)
			if err != nil {
				return nil, err
			}
			up, err := apply(l.up, nil, normed, opt)
			if err != nil {
				return nil, err
			}
			for t := range gt {
				for j := range gt[t] {
					gt[t][j] = gelu(gt[t][j]) * up[t][j]
				}
			}
			dn, err := apply(l.down, nil, gt, opt)
			if err != nil {
				return nil, err
			}
			if s.moe {
				// Gemma4TextDecoderLayer.forward: the residual xs routes and
				// feeds the experts; the two outputs add after their norms.
				h2, err := g4Experts(s, l.router, l.rScale, l.perExpert, l.preFF2, l.experts, xs, gelu, opt)
				if err != nil {
					return nil, err
				}
				for t := range dn {
					h1 := rms(dn[t], l.postFF1, s.eps)
					h2t := rms(h2[t], l.postFF2, s.eps)
					for c := range dn[t] {
						dn[t][c] = h1[c] + h2t[c]
					}
				}
			}
			for t := range xs {
				m := rms(dn[t], l.postFF, s.eps)
				for c := range xs[t] {
					xs[t][c] += m[c]
				}
			}
			if s.ple > 0 {
				pg, err := apply(l.pg, nil, xs, opt)
				if err != nil {
					return nil, err
				}
				for t := range pg {
					for j := range pg[t] {
						pg[t][j] = gelu(pg[t][j]) * ple[t][i*s.ple+j]
					}
				}
				pp, err := apply(l.pp, nil, pg, opt)
				if err != nil {
					return nil, err
				}
				for t := range xs {
					m := rms(pp[t], l.pleNorm, s.eps)
					for c := range xs[t] {
						xs[t][c] += m[c]
					}
				}
			}
			for t := range xs {
				for c := range xs[t] {
					xs[t][c] *= l.scalar
				}
			}
		}
		for t := range xs {
			xs[t] = rms(xs[t], finalNorm, s.eps)
		}
		return xs, nil
	}

	out := make([][]float64, len(tokens))
	for p, id := range tokens {
		if id < 0 || int(id) >= s.vocab {
			return nil, fmt.Errorf("oracle: token %d at position %d outside vocabulary of %d", id, p, s.vocab)
		}
	}
	for p := range tokens {
		hidden, err := run(tokens[:p+1])
		if err != nil {
			return nil, err
		}
		last := hidden[p]
		if opt.InputQuant != nil && !s.tied {
			flat := make([]float64, 0, (p+1)*s.hidden)
			for _, r := range hidden {
				flat = append(flat, r...)
			}
			if err := opt.InputQuant("lm_head", flat, p+1, s.hidden); err != nil {
				return nil, fmt.Errorf("oracle: lm_head: input quantization: %w", err)
			}
			last = flat[p*s.hidden:]
		}
		logits := make([]float64, s.vocab)
		for v := range logits {
			logits[v] = dot(head[v*s.hidden:(v+1)*s.hidden], last)
			if c := s.finalCap; c != 0 {
				logits[v] = math.Tanh(logits[v]/c) * c
			}
		}
		out[p] = logSoftmax(logits)
	}
	return out, nil
}

// g4LoadMoE reads a Gemma 4 MoE layer under prefix p: the router's
// proj/scale/per_expert_scale, the norms pre_feedforward_layernorm_2,
// post_feedforward_layernorm_1 and _2, and the experts — from the fused
// experts.gate_up_proj [E, 2·I, hidden] (gate rows, then up rows, per
// expert) and experts.down_proj [E, hidden, I] when the checkpoint has
// them, else from experts.{e}.{gate,up,down}_proj.
func g4LoadMoE(s *g4settings, get Getter, w func(string, ...int) ([]float64, error), mat func(string, int, int) (matrix, error),
	p string, router *matrix, scale, perExpert, pre2, post1, post2 *[]float64, experts *[]expert) error {
	var err error
	if *router, err = mat(p+"router.proj", s.experts, s.hidden); err != nil {
		return err
	}
	for _, v := range []struct {
		dst  *[]float64
		name string
		n    int
	}{{scale, "router.scale", s.hidden}, {perExpert, "router.per_expert_scale", s.experts},
		{pre2, "pre_feedforward_layernorm_2.weight", s.hidden}, {post1, "post_feedforward_layernorm_1.weight", s.hidden},
		{post2, "post_feedforward_layernorm_2.weight", s.hidden}} {
		if *v.dst, err = w(p+v.name, v.n); err != nil {
			return err
		}
	}
	*experts, err = loadExperts(get, mat, p, "experts.%d.gate_proj", "experts.%d.up_proj", "experts.%d.down_proj", s.experts, s.moeInter, s.hidden)
	return err
}

// g4Experts is Gemma4TextRouter followed by Gemma4TextExperts on the
// residual rows xs: each row's router input is its weightless RMSNorm
// times router.scale times hidden^-0.5; the probabilities are the softmax
// of router.proj of it; the top_k_experts largest are taken as torch.topk
// takes them (torchTopK, ties included), divided by their sum and multiplied by
// per_expert_scale; each expert (gelu-tanh GeGLU) runs on the
// pre_feedforward_layernorm_2 rows routed to it and its weighted output is
// added in expert order.
func g4Experts(s *g4settings, router matrix, scale, perExpert, pre2 []float64, experts []expert, xs [][]float64,
	gelu func(float64) float64, opt Options) ([][]float64, error) {
	ones := make([]float64, s.hidden)
	for i := range ones {
		ones[i] = 1
	}
	z := make([][]float64, len(xs))
	in := make([][]float64, len(xs))
	for t, x := range xs {
		n := rms(x, ones, s.eps)
		z[t] = make([]float64, s.hidden)
		for c := range n {
			z[t][c] = n[c] * scale[c] / math.Sqrt(float64(s.hidden))
		}
		in[t] = rms(x, pre2, s.eps)
	}
	logits, err := apply(router, nil, z, opt)
	if err != nil {
		return nil, err
	}
	weight := make([]map[int]float64, len(xs))
	for t, lg := range logits {
		p := logSoftmax(lg)
		for i := range p {
			p[i] = math.Exp(p[i])
		}
		weight[t] = map[int]float64{}
		var sum float64
		for _, e := range torchTopK(p, s.topK) {
			weight[t][e] = p[e]
			sum += p[e]
		}
		for e := range weight[t] {
			weight[t][e] = weight[t][e] / sum * perExpert[e]
		}
	}
	out := make([][]float64, len(xs))
	for t := range out {
		out[t] = make([]float64, s.hidden)
	}
	for e, x := range experts {
		var rows []int
		var sub [][]float64
		for t := range in {
			if _, ok := weight[t][e]; ok {
				rows = append(rows, t)
				sub = append(sub, in[t])
			}
		}
		if len(rows) == 0 {
			continue
		}
		g, err := apply(x.gate, nil, sub, opt)
		if err != nil {
			return nil, err
		}
		u, err := apply(x.up, nil, sub, opt)
		if err != nil {
			return nil, err
		}
		for i := range g {
			for j := range g[i] {
				g[i][j] = gelu(g[i][j]) * u[i][j]
			}
		}
		y, err := apply(x.down, nil, g, opt)
		if err != nil {
			return nil, err
		}
		for i, t := range rows {
			for c := range out[t] {
				out[t][c] += weight[t][e] * y[i][c]
			}
		}
	}
	return out, nil
}
