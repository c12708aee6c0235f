package oracle

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/qppl/qppl/checkpoint"
)

// goSettings is the oracle's own reading of a gpt_oss config.json
// (transformers models/gpt_oss/configuration_gpt_oss.py GptOssConfig and
// modeling_gpt_oss.py), written apart from arch/gpt_oss.go.
type goSettings struct {
	vocab, hidden, inter, layers, heads, kvHeads, headDim int
	eps, theta                                            float64
	tied, bias                                            bool
	experts, topK                                         int
	windows                                               []int // per layer, 0: full attention
	alpha, limit                                          float64
	// YaRN (GptOssConfig's default rope parameters when absent).
	yarn                                 bool
	factor, betaFast, betaSlow, attnFact float64
	origMax                              int
	truncate                             bool
	// other is a linear or llama3 rope (inverseFrequencies); nil otherwise.
	other *checkpoint.RopeScaling
}

// readGO reads cfg.Raw.
func readGO(cfg *checkpoint.Config) (*goSettings, error) {
	raw := cfg.Raw
	if raw == nil {
		return nil, fmt.Errorf("oracle: gpt_oss needs config.json's keys")
	}
	has := func(k string) bool { v, ok := raw[k]; return ok && string(v) != "null" }
	num := func(k string, def float64) float64 {
		if !has(k) {
			return def
		}
		var v float64
		if err := json.Unmarshal(raw[k], &v); err != nil {
			return math.NaN()
		}
		return v
	}
	s := &goSettings{}
	s.vocab, s.hidden, s.inter = int(num("vocab_size", 201088)), int(num("hidden_size", 2880)), int(num("intermediate_size", 2880))
	s.layers, s.heads = int(num("num_hidden_layers", 36)), int(num("num_attention_heads", 64))
	s.kvHeads = int(num("num_key_value_heads", 8))
	if _, present := raw["num_key_value_heads"]; present && !has("num_key_value_heads") {
		s.kvHeads = s.heads // None → num_attention_heads
	}
	s.headDim = int(num("head_dim", 64))
	if _, present := raw["head_dim"]; present && !has("head_dim") {
		s.headDim = s.hidden / s.heads
	}
	s.eps, s.theta = num("rms_norm_eps", 1e-5), num("rope_theta", 150000)
	s.tied = has("tie_word_embeddings") && string(raw["tie_word_embeddings"]) == "true"
	s.bias = !has("attention_bias") || string(raw["attention_bias"]) == "true"
	s.experts = int(num("num_experts", 128))
	if has("num_local_experts") {
		s.experts = int(num("num_local_experts", 128))
	}
	s.topK = int(num("num_experts_per_tok", 4))
	s.alpha, s.limit = num("swiglu_alpha", 1.702), num("swiglu_limit", 7.0)
	window := int(num("sliding_window", 128))
	var types []string
	if has("layer_types") {
		if err := json.Unmarshal(raw["layer_types"], &types); err != nil || len(types) != s.layers {
			return nil, fmt.Errorf("oracle: gpt_oss layer_types: %v", err)
		}
	}
	s.windows = make([]int, s.layers)
	for i := range s.windows {
		sliding := i%2 == 0 // "sliding_attention" if bool((i + 1) % 2)
		if types != nil {
			sliding = types[i] == "sliding_attention"
		}
		if sliding {
			s.windows[i] = window
		}
	}
	// Rope: rope_scaling (or v5 rope_parameters), else GptOssConfig's yarn.
	var rp map[string]any
	for _, k := range []string{"rope_scaling", "rope_parameters"} {
		if has(k) {
			if err := json.Unmarshal(raw[k], &rp); err != nil {
				return nil, fmt.Errorf("oracle: %s: %v", k, err)
			}
			break
		}
	}
	if rp == nil {
		rp = map[string]any{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
			"truncate": false, "original_max_position_embeddings": 4096.0}
	}
	if th, ok := rp["rope_theta"].(float64); ok {
		s.theta = th
	}
	typ, _ := rp["rope_type"].(string)
	if typ == "" {
		typ, _ = rp["type"].(string)
	}
	f := func(k string) float64 { v, _ := rp[k].(float64); return v }
	switch typ {
	case "", "default":
	case "linear":
		s.other = &checkpoint.RopeScaling{Type: typ, Factor: f("factor")}
	case "llama3":
		s.other = &checkpoint.RopeScaling{Type: typ, Factor: f("factor"), LowFreqFactor: f("low_freq_factor"),
			HighFreqFactor: f("high_freq_factor"), OriginalMaxPositionEmbeddings: int(f("original_max_position_embeddings"))}
	case "yarn":
		s.yarn = true
		s.factor, _ = rp["factor"].(float64)
		s.betaFast, _ = rp["beta_fast"].(float64)
		if s.betaFast == 0 {
			s.betaFast = 32
		}
		s.betaSlow, _ = rp["beta_slow"].(float64)
		if s.betaSlow == 0 {
			s.betaSlow = 1
		}
		s.truncate = true
		if v, ok := rp["truncate"]; ok {
			b, _ := v.(bool)
			s.truncate = b
		}
		s.origMax = int(num("max_position_embeddings", 131072))
		if v, ok := rp["original_max_position_embeddings"].(float64); ok && v != 0 {
			s.origMax = int(v)
		}
		s.attnFact, _ = rp["attention_factor"].(float64)
		if s.attnFact == 0 {
			s.attnFact = 1
			if s.factor > 1 {
				s.attnFact = 0.1*math.Log(s.factor) + 1
			}
		}
	default:
		return nil, fmt.Errorf("oracle: gpt_oss rope type %q", typ)
	}
	return s, nil
}

// invFreq returns the oracle's own YaRN (or default) inverse frequencies
// and the cos/sin scale: modeling_rope_utils.py _compute_yarn_parameters.
func (s *goSettings) invFreq() ([]float64, float64, error) {
	if s.other != nil {
		f, err := inverseFrequencies(&checkpoint.Config{RopeTheta: s.theta, RopeScaling: s.other}, s.headDim)
		return f, 1, err
	}
	dim := float64(s.headDim)
	f := make([]float64, s.headDim/2)
	for i := range f {
		f[i] = 1 / math.Pow(s.theta, float64(2*i)/dim)
	}
	if !s.yarn {
		return f, 1, nil
	}
	corrDim := func(rotations float64) float64 {
		return dim * math.Log(float64(s.origMax)/(rotations*2*math.Pi)) / (2 * math.Log(s.theta))
	}
	lo, hi := corrDim(s.betaFast), corrDim(s.betaSlow)
	if s.truncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo = math.Max(lo, 0)
	hi = math.Min(hi, dim-1)
	if lo == hi {
		hi += 0.001
	}
	for i := range f {
		ramp := (float64(i) - lo) / (hi - lo)
		ramp = math.Min(1, math.Max(0, ramp))
		extrapolationFactor := 1 - ramp
		f[i] = f[i]/s.factor*(1-extrapolationFactor) + f[i]*extrapolationFactor
	}
	return f, s.attnFact, nil
}

// goLogProbs is LogProbs for gpt_oss: one causal pass over all tokens.
func goLogProbs(cfg *checkpoint.Config, get Getter, tokens []int32, opt Options) ([][]float64, error) {
	s, err := readGO(cfg)
	if err != nil {
		return nil, err
	}
	if opt.KVCacheFP8 {
		return nil, fmt.Errorf("oracle: gpt_oss with an FP8 KV cache is not implemented")
	}
	w := func(name string, shape ...int) ([]float64, error) { return shaped(get, name, shape...) }
	mat := func(name string, out, in int) (matrix, error) { return matrixOf(get, name, out, in) }
	T, C, H, KV, D := len(tokens), s.hidden, s.heads, s.kvHeads, s.headDim
	E, I := s.experts, s.inter
	emb, err := w("model.embed_tokens.weight", s.vocab, C)
	if err != nil {
		return nil, err
	}
	for p, id := range tokens {
		if id < 0 || int(id) >= s.vocab {
			return nil, fmt.Errorf("oracle: token %d at position %d outside vocabulary of %d", id, p, s.vocab)
		}
	}
	x := make([][]float64, T)
	for t, id := range tokens {
		x[t] = append([]float64(nil), emb[int(id)*C:(int(id)+1)*C]...)
	}
	freqs, scale, err := s.invFreq()
	if err != nil {
		return nil, err
	}
	rot := func(v []float64, pos int) {
		half := D / 2
		for i := 0; i < half; i++ {
			c, sn := math.Cos(float64(pos)*freqs[i])*scale, math.Sin(float64(pos)*freqs[i])*scale
			a, b := v[i], v[half+i]
			v[i] = a*c - b*sn
			v[half+i] = b*c + a*sn
		}
	}
	for li := 0; li < s.layers; li++ {
		p := fmt.Sprintf("model.layers.%d.", li)
		inNorm, err := w(p+"input_layernorm.weight", C)
		if err != nil {
			return nil, err
		}
		postNorm, err := w(p+"post_attention_layernorm.weight", C)
		if err != nil {
			return nil, err
		}
		sinks, err := w(p+"self_attn.sinks", H)
		if err != nil {
			return nil, err
		}
		proj := map[string]matrix{}
		bias := map[string][]float64{}
		for _, n := range []struct {
			name    string
			out, in int
		}{{"q_proj", H * D, C}, {"k_proj", KV * D, C}, {"v_proj", KV * D, C}, {"o_proj", C, H * D}} {
			if proj[n.name], err = mat(p+"self_attn."+n.name, n.out, n.in); err != nil {
				return nil, err
			}
			if s.bias {
				if bias[n.name], err = w(p+"self_attn."+n.name+".bias", n.out); err != nil {
					return nil, err
				}
			}
		}
		// Attention.
		h := make([][]float64, T)
		for t := range x {
			h[t] = rms(x[t], inNorm, s.eps)
		}
		q, err := apply(proj["q_proj"], bias["q_proj"], h, opt)
		if err != nil {
			return nil, err
		}
		k, err := apply(proj["k_proj"], bias["k_proj"], h, opt)
		if err != nil {
			return nil, err
		}
		v, err := apply(proj["v_proj"], bias["v_proj"], h, opt)
		if err != nil {
			return nil, err
		}
		for t := 0; t < T; t++ {
			for hh := 0; hh < H; hh++ {
				rot(q[t][hh*D:(hh+1)*D], t)
			}
			for g := 0; g < KV; g++ {
				rot(k[t][g*D:(g+1)*D], t)
			}
		}
		// The sinks join each softmax as one more logit (attnShape.sinks).
		att := attention(q, k, v, attnShape{heads: H, kvHeads: KV, headDim: D,
			window: s.windows[li], scale: 1 / math.Sqrt(float64(D)), sinks: sinks})
		o, err := apply(proj["o_proj"], bias["o_proj"], att, opt)
		if err != nil {
			return nil, err
		}
		for t := range x {
			for c := range x[t] {
				x[t][c] += o[t][c]
			}
		}
		// Mixture of experts.
		router, err := mat(p+"mlp.router", E, C)
		if err != nil {
			return nil, err
		}
		rb, err := w(p+"mlp.router.bias", E)
		if err != nil {
			return nil, err
		}
		gu, err := goExpertWeights(get, p+"mlp.experts.gate_up_proj", E, C, 2*I)
		if err != nil {
			return nil, err
		}
		dn, err := goExpertWeights(get, p+"mlp.experts.down_proj", E, I, C)
		if err != nil {
			return nil, err
		}
		gub, err := w(p+"mlp.experts.gate_up_proj_bias", E, 2*I)
		if err != nil {
			return nil, err
		}
		dnb, err := w(p+"mlp.experts.down_proj_bias", E, C)
		if err != nil {
			return nil, err
		}
		for t := range x {
			h[t] = rms(x[t], postNorm, s.eps)
		}
		logits, err := apply(router, rb, h, opt)
		if err != nil {
			return nil, err
		}
		for t := range x {
			sel := torchTopK(logits[t], s.topK)
			top := logits[t][sel[0]]
			var z float64
			for _, e := range sel {
				z += math.Exp(logits[t][e] - top)
			}
			sort.Ints(sel)
			out := make([]float64, C)
			for _, e := range sel {
				weight := math.Exp(logits[t][e]-top) / z
				act := make([]float64, I)
				for j := 0; j < I; j++ {
					gate, up := gub[e*2*I+2*j], gub[e*2*I+2*j+1]
					for c := 0; c < C; c++ {
						gate += h[t][c] * gu[(e*C+c)*2*I+2*j]
						up += h[t][c] * gu[(e*C+c)*2*I+2*j+1]
					}
					gate = math.Min(gate, s.limit)
					up = math.Max(-s.limit, math.Min(up, s.limit))
					act[j] = (up + 1) * (gate / (1 + math.Exp(-gate*s.alpha)))
				}
				for c := 0; c < C; c++ {
					y := dnb[e*C+c]
					for j := 0; j < I; j++ {
						y += act[j] * dn[(e*I+j)*C+c]
					}
					out[c] += weight * y
				}
			}
			for c := range x[t] {
				x[t][c] += out[c]
			}
		}
	}
	finalNorm, err := w("model.norm.weight", C)
	if err != nil {
		return nil, err
	}
	headName := "lm_head.weight"
	if s.tied {
		headName = "model.embed_tokens.weight"
	}
	head, err := w(headName, s.vocab, C)
	if err != nil {
		return nil, err
	}
	fin := make([][]float64, T)
	flat := make([]float64, 0, T*C)
	for t := range x {
		fin[t] = rms(x[t], finalNorm, s.eps)
		flat = append(flat, fin[t]...)
	}
	if opt.InputQuant != nil && !s.tied {
		if err := opt.InputQuant("lm_head", flat, T, C); err != nil {
			return nil, fmt.Errorf("oracle: lm_head: input quantization: %w", err)
		}
	}
	out := make([][]float64, T)
	for t := range out {
		lg := make([]float64, s.vocab)
		for vv := range lg {
			lg[vv] = dot(head[vv*C:(vv+1)*C], flat[t*C:(t+1)*C])
		}
		out[t] = logSoftmax(lg)
	}
	return out, nil
}

// goExpertWeights returns a fused expert tensor in its dense layout [E,
// in, out] (x @ W): the tensor itself, or, when the checkpoint holds
// name_blocks [E, out, in/32, 16] and name_scales [E, out, in/32] (the
// getter giving their bytes as values 0..255), their MXFP4 decode, written
// here from transformers' integrations/mxfp4.py convert_moe_packed_tensors:
// byte b of a block gives FP4_VALUES[b & 0x0F] (even column) and
// FP4_VALUES[b >> 4] (odd column), times 2^(scale − 127); the result
// [E, out, in] is transposed to [E, in, out].
func goExpertWeights(get Getter, name string, E, in, out int) ([]float64, error) {
	if v, sh, err := get(name); err == nil {
		if len(sh) != 3 || sh[0] != E || sh[1] != in || sh[2] != out {
			return nil, fmt.Errorf("oracle: %s: shape %v, want [%d %d %d]", name, sh, E, in, out)
		}
		return v, nil
	}
	blocks, bs, err := get(name + "_blocks")
	if err != nil {
		return nil, fmt.Errorf("oracle: %s (nor %s_blocks): %w", name, name, err)
	}
	scales, ss, err := get(name + "_scales")
	if err != nil {
		return nil, fmt.Errorf("oracle: %s_scales: %w", name, err)
	}
	G := in / 32
	if len(bs) != 4 || bs[0] != E || bs[1] != out || bs[2] != G || bs[3] != 16 || len(ss) != 3 || ss[0] != E || ss[1] != out || ss[2] != G {
		return nil, fmt.Errorf("oracle: %s: blocks %v, scales %v for [%d %d %d]", name, bs, ss, E, in, out)
	}
	fp4 := [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}
	w := make([]float64, E*in*out)
	for e := 0; e < E; e++ {
		for r := 0; r < out; r++ {
			for g := 0; g < G; g++ {
				exp := int(scales[(e*out+r)*G+g]) - 127
				for b := 0; b < 16; b++ {
					byt := int(blocks[((e*out+r)*G+g)*16+b])
					c := g*32 + 2*b
					w[(e*in+c)*out+r] = math.Ldexp(fp4[byt&0x0F], exp)
					w[(e*in+c+1)*out+r] = math.Ldexp(fp4[byt>>4], exp)
				}
			}
		}
	}
	return w, nil
}
