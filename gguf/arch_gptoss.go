package gguf

import (
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
)

// gptOssArch declares general.architecture "gpt-oss": Hugging Face
// gpt_oss (arch/gpt_oss.go).
//
// llama.cpp's converter (conversion/gpt_oss.py GptOssModel,
// convert_hf_to_gguf.py): self_attn.sinks is written as
// blk.N.attn_sinks.weight [heads]; a dense experts.gate_up_proj [E, hidden,
// 2·I] is transposed to [E, 2·I, hidden] and split by its interleaved rows
// (gate = rows ::2, up = rows 1::2) into ffn_gate_exps and ffn_up_exps (ne
// [hidden, I, E]), gate_up_proj_bias [E, 2·I] likewise into
// ffn_gate_exps.bias and ffn_up_exps.bias (ne [I, E]); down_proj [E, I,
// hidden] is transposed into ffn_down_exps (ne [I, hidden, E]),
// down_proj_bias is ffn_down_exps.bias (ne [hidden, E]); the router is
// ffn_gate_inp (weight and bias), post_attention_layernorm is
// post_attention_norm (gguf-py MODEL_TENSOR.ATTN_POST_NORM); metadata
// adds attention.sliding_window and expert_feed_forward_length =
// intermediate_size to the common keys (TextModel: rope.scaling.type yarn,
// rope.scaling.factor, rope.scaling.original_context_length).
//
// llama.cpp src/models/openai-moe.cpp (LLM_ARCH_OPENAI_MOE): every tensor
// above is required; the layers alternate sliding (even index, window
// n_swa = attention.sliding_window, LLAMA_SWA_TYPE_STANDARD: set_swa_pattern(2))
// and full attention; the sinks enter build_attn; the MoE is
// build_moe_ffn(…, LLM_FFN_SWIGLU_OAI_MOE, …,
// LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT): softmax over the top-k
// logits, SwiGLU with alpha 1.702 and limit 7.0 built in. So the
// converter refuses another swiglu_alpha / swiglu_limit or another
// sliding pattern, and the reader sets them.
//
// RoPE: GptOssConfig's YaRN (truncate False: the correction range is not
// rounded). llama.cpp's ggml_rope_yarn_corr_dims rounds it (floor/ceil),
// so llama.cpp computes a slightly different rotation from the same file
// (the gap TestLlamaCppGptOss would report); qppl reads a gpt-oss file as
// transformers computes the model: truncate false, and refuses to write
// truncate true.
func gptOssArch() Arch {
	return Arch{
		Name:              "gpt-oss",
		ModelTypes:        []string{"gpt_oss"},
		KeyLengthRequired: true,
		OwnKeys:           []string{"rope.scaling.type"},
		F32Only:           "qppl does not reproduce llama.cpp's type mix for gpt-oss's experts and biases",
		Layer:             gptOssLayer,
		Parts:             gptOssParts,
		Config:            gptOssConfig,
		Convert:           gptOssConvert,
	}
}

// gptOss swiglu constants of llama.cpp's LLM_FFN_SWIGLU_OAI_MOE.
const gptOssAlpha, gptOssLimit = 1.702, 7.0

// gptOssPart names: expert e's gate and up rows of gate_up_proj, its down
// weight, and the gate and up halves of gate_up_proj_bias.
func gptOssPartNames(s *arch.Spec, i, e int) (gate, up, down string) {
	gu, _, dn, _ := s.GptOssExperts(i)
	return fmt.Sprintf("%s.gate[%d].weight", gu, e), fmt.Sprintf("%s.up[%d].weight", gu, e), fmt.Sprintf("%s[%d].weight", dn, e)
}

func gptOssBiasNames(s *arch.Spec, i int) (gate, up string) {
	_, gub, _, _ := s.GptOssExperts(i)
	return gub + ".gate", gub + ".up"
}

// gptOssParts: gate_up_proj, down_proj and gate_up_proj_bias are held by
// the per-expert slices and the bias halves.
func gptOssParts(s *arch.Spec) map[string][]arch.TensorShape {
	out := map[string][]arch.TensorShape{}
	E, I, C := s.MoE.Experts, s.MoE.Intermediate, s.Hidden
	for i := 0; i < s.Layers; i++ {
		gu, gub, dn, _ := s.GptOssExperts(i)
		var g, u, d []arch.TensorShape
		for e := 0; e < E; e++ {
			gn, un, dname := gptOssPartNames(s, i, e)
			g = append(g, arch.TensorShape{Name: gn, Shape: []int{I, C}})
			u = append(u, arch.TensorShape{Name: un, Shape: []int{I, C}})
			d = append(d, arch.TensorShape{Name: dname, Shape: []int{C, I}})
		}
		out[gu] = append(g, u...)
		out[dn] = d
		bg, bu := gptOssBiasNames(s, i)
		out[gub] = []arch.TensorShape{{Name: bg, Shape: []int{E, I}}, {Name: bu, Shape: []int{E, I}}}
	}
	return out
}

// gptOssLayer is layer i's table.
func gptOssLayer(s *arch.Spec, i int) []TensorName {
	l := s.Layer(i)
	blk := fmt.Sprintf("blk.%d.", i)
	var out []TensorName
	vec := func(hf, g string) { out = append(out, TensorName{HF: hf, GGUF: blk + g, Expert: -1}) }
	vec(l.AttnNorm, "attn_norm.weight")
	vec(l.QBias, "attn_q.bias")
	vec(l.KBias, "attn_k.bias")
	vec(l.VBias, "attn_v.bias")
	vec(l.OBias, "attn_output.bias")
	vec(l.Sinks, "attn_sinks.weight")
	vec(l.MLPNorm, "post_attention_norm.weight")
	vec(l.RouterBias, "ffn_gate_inp.bias")
	for _, lin := range s.LayerLinears(i) {
		out = append(out, TensorName{HF: lin.Module + ".weight", GGUF: blk + projGGUF[lin.Proj] + ".weight", Expert: -1})
	}
	gu, gub, dn, db := s.GptOssExperts(i)
	E, I, C := s.MoE.Experts, s.MoE.Intermediate, s.Hidden
	// gate_up_proj [E, C, 2I]: expert e's gate row j is column 2j
	// (transposed, rows ::2), up row j column 2j+1.
	half := func(e, h int) func([]float64, []int) ([]float64, []int) {
		return func(f []float64, _ []int) ([]float64, []int) {
			v := make([]float64, I*C)
			for j := 0; j < I; j++ {
				for c := 0; c < C; c++ {
					v[j*C+c] = f[(e*C+c)*2*I+2*j+h]
				}
			}
			return v, []int{I, C}
		}
	}
	for h, g := range []string{"ffn_gate_exps", "ffn_up_exps"} {
		for e := 0; e < E; e++ {
			gn, un, _ := gptOssPartNames(s, i, e)
			hf := []string{gn, un}[h]
			out = append(out, TensorName{HF: hf, GGUF: blk + g + ".weight", Expert: e, Fused: gu, Part: half(e, h)})
		}
	}
	for e := 0; e < E; e++ {
		_, _, dname := gptOssPartNames(s, i, e)
		// down_proj [E, I, C]: expert e transposed to [C, I].
		out = append(out, TensorName{HF: dname, GGUF: blk + "ffn_down_exps.weight", Expert: e, Fused: dn,
			Part: func(f []float64, _ []int) ([]float64, []int) {
				v := make([]float64, C*I)
				for j := 0; j < I; j++ {
					for c := 0; c < C; c++ {
						v[c*I+j] = f[(e*I+j)*C+c]
					}
				}
				return v, []int{C, I}
			}})
	}
	bg, bu := gptOssBiasNames(s, i)
	for h, n := range []string{bg, bu} {
		out = append(out, TensorName{HF: n, GGUF: blk + []string{"ffn_gate_exps.bias", "ffn_up_exps.bias"}[h], Expert: -1, Fused: gub,
			Part: func(f []float64, _ []int) ([]float64, []int) {
				v := make([]float64, E*I)
				for e := 0; e < E; e++ {
					for j := 0; j < I; j++ {
						v[e*I+j] = f[e*2*I+2*j+h]
					}
				}
				return v, []int{E, I}
			}})
	}
	out = append(out, TensorName{HF: db, GGUF: blk + "ffn_down_exps.bias", Expert: -1})
	return out
}

// gptOssConfig reads the experts, the sliding window and YaRN.
func gptOssConfig(m *Model, cfg map[string]any) error {
	a, path := m.Arch, m.Files[0].Path
	cfg["model_type"] = "gpt_oss"
	cfg["attention_bias"] = true // openai-moe.cpp: q/k/v/o biases required
	cfg["swiglu_alpha"], cfg["swiglu_limit"] = gptOssAlpha, gptOssLimit
	e, k, err := m.expertCounts()
	if err != nil {
		return err
	}
	if e == 0 {
		return fmt.Errorf("%w: %s: metadata %q is missing or 0 (llama.cpp: gpt-oss needs experts)", ErrFormat, path, a+".expert_count")
	}
	ff, _ := cfg["intermediate_size"].(int64)
	w, err := m.metaInt(a+".expert_feed_forward_length", -1)
	if err != nil {
		return err
	}
	if w != ff {
		return fmt.Errorf("%w: %s: metadata %q = %d differs from %q = %d (gpt_oss's experts are intermediate_size wide)", ErrUnsupported, path, a+".expert_feed_forward_length", w, a+".feed_forward_length", ff)
	}
	cfg["num_local_experts"], cfg["num_experts_per_tok"] = e, k
	if err := m.checkExpertScale(); err != nil {
		return err
	}
	sw, err := m.metaInt(a+".attention.sliding_window", -1)
	if err != nil {
		return err
	}
	if sw <= 0 {
		return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+".attention.sliding_window")
	}
	layers := cfg["num_hidden_layers"].(int64)
	types := make([]string, layers)
	for i := range types {
		types[i] = "full_attention"
		if i%2 == 0 { // set_swa_pattern(2): even layers slide
			types[i] = "sliding_attention"
		}
	}
	cfg["sliding_window"], cfg["layer_types"] = sw, types
	typ := "none"
	if v, ok := m.meta(a + ".rope.scaling.type"); ok {
		s, ok := v.Str()
		if !ok {
			return m.metaErr(a+".rope.scaling.type", v, "want a string")
		}
		typ = s
	}
	switch typ {
	case "none":
		cfg["rope_scaling"] = map[string]any{"rope_type": "default"}
	case "yarn":
		rs := map[string]any{"rope_type": "yarn", "truncate": false}
		for _, k := range []struct {
			key, hf string
			def     float64
		}{{"rope.scaling.factor", "factor", math.NaN()}, {"rope.scaling.yarn_beta_fast", "beta_fast", 32}, {"rope.scaling.yarn_beta_slow", "beta_slow", 1}} {
			f, err := m.metaFloat(a+"."+k.key, k.def)
			if err != nil {
				return err
			}
			if !(f > 0) {
				return fmt.Errorf("%w: %s: metadata %q is %v: YaRN needs it positive", ErrFormat, path, a+"."+k.key, f)
			}
			rs[k.hf] = f
		}
		o, err := m.metaInt(a+".rope.scaling.original_context_length", -1)
		if err != nil {
			return err
		}
		if o <= 0 {
			return fmt.Errorf("%w: %s: metadata %q is 0: YaRN needs it", ErrFormat, path, a+".rope.scaling.original_context_length")
		}
		rs["original_max_position_embeddings"] = o
		for _, k := range []string{"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_log_multiplier", "rope.scaling.attn_factor"} {
			if _, ok := m.meta(a + "." + k); ok {
				return fmt.Errorf("%w: %s: metadata %q: transformers' gpt_oss YaRN has no such parameter", ErrUnsupported, path, a+"."+k)
			}
		}
		cfg["rope_scaling"] = rs
	default:
		return fmt.Errorf("%w: %s: metadata %q = %q (supported: none, yarn)", ErrUnsupported, path, a+".rope.scaling.type", typ)
	}
	return nil
}

// gptOssConvert refuses what llama.cpp's gpt-oss graph computes otherwise
// and writes the experts, the sliding window and YaRN.
func gptOssConvert(s *arch.Spec) ([]KV, error) {
	g := s.GptOss
	if g == nil || s.MoE == nil {
		return nil, fmt.Errorf("%w: convert: gpt_oss without experts", ErrUnsupported)
	}
	if g.Alpha != gptOssAlpha || g.Limit != gptOssLimit {
		return nil, fmt.Errorf("%w: convert: config.json swiglu_alpha %v / swiglu_limit %v: llama.cpp's gpt-oss graph (LLM_FFN_SWIGLU_OAI_MOE) computes %v / %v", ErrUnsupported, g.Alpha, g.Limit, gptOssAlpha, gptOssLimit)
	}
	if s.MoE.Intermediate != s.Intermediate {
		return nil, fmt.Errorf("%w: convert: experts %d wide, intermediate_size %d", ErrUnsupported, s.MoE.Intermediate, s.Intermediate)
	}
	w := s.SlidingWindow
	for i := 0; i < s.Layers; i++ {
		if want := i%2 == 0; (s.Window(i) > 0) != want || (want && s.Window(i) != w) {
			return nil, fmt.Errorf("%w: convert: config.json layer_types: layer %d; llama.cpp's gpt-oss graph slides every even layer (window sliding_window) and no odd one", ErrUnsupported, i)
		}
	}
	if w <= 0 {
		return nil, fmt.Errorf("%w: convert: config.json sliding_window %d: llama.cpp's gpt-oss graph needs a window", ErrUnsupported, w)
	}
	u32 := func(k string, v int) KV { return KV{"gpt-oss." + k, Uint32Value(uint32(v))} }
	kvs := append(expertKVs("gpt-oss", s), u32("expert_feed_forward_length", s.MoE.Intermediate), u32("attention.sliding_window", w))
	if rs := s.Config.RopeScaling; rs != nil && rs.Type != "default" {
		if rs.Type != "yarn" {
			return nil, fmt.Errorf("%w: convert: rope_scaling %q: gpt-oss files are read with YaRN or none", ErrUnsupported, rs.Type)
		}
		if rs.Truncate || rs.AttentionFactor != 0 {
			return nil, fmt.Errorf("%w: convert: rope_scaling truncate %v / attention_factor %v: qppl reads gpt-oss files with GptOssConfig's truncate false and the derived attention factor", ErrUnsupported, rs.Truncate, rs.AttentionFactor)
		}
		f32 := func(k string, v float64) KV { return KV{"gpt-oss." + k, Float32Value(float32(v))} }
		for _, v := range []float64{rs.Factor, rs.BetaFast, rs.BetaSlow} {
			if float64(float32(v)) != v {
				return nil, fmt.Errorf("%w: convert: rope_scaling value %v is not a float32", ErrUnsupported, v)
			}
		}
		kvs = append(kvs, KV{"gpt-oss.rope.scaling.type", StringValue("yarn")}, f32("rope.scaling.factor", rs.Factor),
			u32("rope.scaling.original_context_length", rs.OriginalMaxPositionEmbeddings),
			f32("rope.scaling.yarn_beta_fast", rs.BetaFast), f32("rope.scaling.yarn_beta_slow", rs.BetaSlow))
	}
	return kvs, nil
}
