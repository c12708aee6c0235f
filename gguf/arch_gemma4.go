package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
)

// gemma4Arch declares general.architecture "gemma4", the Gemma 4 text
// decoder (model_type gemma4_text; dense layers). Read from llama.cpp
// convert_hf_to_gguf.py Gemma4Model (a Gemma3Model subclass: set_vocab,
// set_gguf_parameters, generate_extra_tensors, modify_tensors,
// norm_shift) and src/models/gemma4.cpp (llama_model_gemma4::
// load_arch_hparams, load_arch_tensors, the graph):
//
//   - norms are stored as they are (norm_shift 0.0: Gemma4RMSNorm
//     multiplies by the weight itself); layer_scalar is
//     blk.N.layer_output_scale.weight ([1]);
//   - per-layer head sizes: attention.key_length/value_length are the full
//     layers' (global_head_dim), key_length_swa/value_length_swa the
//     sliding layers' (head_dim); rope.dimension_count(_swa) likewise;
//     attention.head_count_kv a per-layer array when the full layers have
//     num_global_key_value_heads; feed_forward_length a per-layer array
//     when use_double_wide_mlp doubles the KV-shared layers' width;
//   - attention.sliding_window_pattern a per-layer bool array (true:
//     sliding), attention.sliding_window, attention.shared_kv_layers
//     (n_layer_kv_from_start = layers − n: those layers have no attn_k,
//     attn_v, attn_k_norm), embedding_length_per_layer_input (PLE width,
//     0: none; per_layer_token_embd has the main vocabulary's rows);
//   - attention_k_eq_v: a full layer without blk.N.attn_v uses k_proj's
//     output as values (load_arch_tensors: wv TENSOR_NOT_REQUIRED);
//   - RoPE: rope.freq_base is the full layers' θ, rope.freq_base_swa the
//     sliding layers'; the proportional RoPE of the full layers is
//     rope_freqs.weight (generate_extra_tensors: global_head_dim/2
//     float32 factors, 1.0 for the int(D · partial_rotary_factor / 2)
//     rotated frequencies, then 1e30, which llama.cpp divides the
//     frequency by: an angle of ~1e-30·pos, where transformers' frequency
//     is exactly 0 — the reader maps 1e30 to 0, as transformers computes);
//   - attention scale 1 (f_attention_scale = 1.0), final soft cap when
//     final_logit_softcapping is present, the embedding scale not stored.
//
// The converter writes what Gemma4Model writes for the text decoder of a
// Gemma4ForConditionalGeneration checkpoint (which it reads under
// model.language_model.; a gemma4_text checkpoint holds the same tensors
// under model.). The mixture of experts (enable_moe_block): see
// gemma4MoE and gemma4Layer; a layer's gate and up experts are read
// split (ffn_gate_exps, ffn_up_exps, which the converter writes) or fused
// (ffn_gate_up_exps, gate rows first: TensorName.GateUp), as
// gemma4.cpp's load_arch_tensors accepts both. Refused: a router on
// some layers only, a file whose last layer slides (transformers forces it
// to full attention), rope_freqs other than 1.0… then 1e30…, any
// rope.scaling key, a PLE vocabulary other than the main one.
func gemma4Arch() Arch {
	return Arch{
		Name:       "gemma4",
		ModelTypes: []string{"gemma4_text"},
		Layer:      gemma4Layer,
		Globals:    gemma4Globals,
		OwnKeys: []string{"feed_forward_length", "attention.head_count_kv", "attention.key_length", "attention.value_length",
			"rope.dimension_count", "rope.freq_base"},
		OwnRopeFreqs: true,
		FusedGateUp:  true,
		Config:       gemma4Config,
		Convert:      gemma4Convert,
		Tensors:      gemma4Tensors,
		// llama_model_quantize keeps per_layer_model_proj in F32, gives
		// per_layer_token_embd Q8_0 and counts attn_v layers otherwise
		// (measured on the fixture): not reproduced by filetype.go.
		F32Only: "llama.cpp's per-tensor types for gemma4 (per_layer_model_proj, per_layer_token_embd, attn_v) are not reproduced by qppl",
	}
}

// gemma4Proj are the GGUF names of gemma4's linear modules (gguf-py
// constants.py PER_LAYER_INP_GATE "blk.{bid}.inp_gate", PER_LAYER_PROJ
// "blk.{bid}.proj").
var gemma4Proj = map[arch.Proj]string{
	arch.ProjQ: "attn_q", arch.ProjK: "attn_k", arch.ProjV: "attn_v", arch.ProjO: "attn_output",
	arch.ProjGate: "ffn_gate", arch.ProjUp: "ffn_up", arch.ProjDown: "ffn_down",
	arch.ProjPLEGate: "inp_gate", arch.ProjPLEProj: "proj", arch.ProjRouter: "ffn_gate_inp",
}

func gemma4Layer(s *arch.Spec, i int) []TensorName {
	l := s.Layer(i)
	blk := fmt.Sprintf("blk.%d.", i)
	var out []TensorName
	vec := func(hf, g string) {
		if hf != "" {
			out = append(out, TensorName{HF: hf, GGUF: blk + g, Expert: -1})
		}
	}
	vec(l.AttnNorm, "attn_norm.weight")
	vec(l.QNorm, "attn_q_norm.weight")
	vec(l.KNorm, "attn_k_norm.weight")
	vec(l.PostAttnNorm, "post_attention_norm.weight")
	vec(l.MLPNorm, "ffn_norm.weight")
	vec(l.PostMLPNorm, "post_ffw_norm.weight")
	vec(l.PLENorm, "post_norm.weight")
	vec(l.LayerScalar, "layer_output_scale.weight")
	// the mixture of experts (Gemma4Model.modify_tensors: router.scale →
	// ffn_gate_inp.scale, per_expert_scale → ffn_down_exps.scale; gguf-py
	// constants.py FFN_PRE_NORM_2 pre_ffw_norm_2, FFN_POST_NORM_1
	// post_ffw_norm_1, FFN_POST_NORM_2 post_ffw_norm_2), all stored as
	// they are (norm_shift 0).
	vec(l.RouterScale, "ffn_gate_inp.scale")
	vec(l.PerExpertScale, "ffn_down_exps.scale")
	vec(l.PreMoENorm, "pre_ffw_norm_2.weight")
	vec(l.PostMLPNorm1, "post_ffw_norm_1.weight")
	vec(l.PostMoENorm, "post_ffw_norm_2.weight")
	for _, lin := range s.LayerLinears(i) {
		tn := TensorName{HF: lin.Module + ".weight", Expert: lin.Expert}
		g := gemma4Proj[lin.Proj]
		if lin.Expert >= 0 {
			g = expertGGUF[lin.Proj]
		}
		if g != "" {
			tn.GGUF = blk + g + ".weight"
		}
		out = append(out, tn)
	}
	return out
}

// gemma4Globals: the embedding, the per-layer input tables
// (per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm), the
// final norm and an untied head.
func gemma4Globals(s *arch.Spec) []TensorName {
	g := globalNames(s)
	if s.Gemma4 != nil && s.Gemma4.PLE > 0 {
		ple := []TensorName{
			{HF: arch.Gemma4PLEEmbedName, GGUF: "per_layer_token_embd.weight", Expert: -1},
			{HF: arch.Gemma4PLEProjName, GGUF: "per_layer_model_proj.weight", Expert: -1},
			{HF: arch.Gemma4PLENormName, GGUF: "per_layer_proj_norm.weight", Expert: -1},
		}
		g = append(g[:1], append(ple, g[1:]...)...)
	}
	return g
}

// gemma4RopeUnrotated is generate_extra_tensors' factor for the
// frequencies the proportional RoPE leaves unrotated.
const gemma4RopeUnrotated = float32(1e30)

func gemma4Config(m *Model, cfg map[string]any) error {
	const a = "gemma4"
	path := m.Files[0].Path
	cfg["model_type"] = "gemma4_text"
	cfg["hidden_activation"] = "gelu_pytorch_tanh"
	cfg["hidden_act"] = "gelu_pytorch_tanh"
	cfg["attention_bias"] = false
	if err := m.gemma4MoE(cfg); err != nil {
		return err
	}
	for _, k := range []string{".rope.scaling.type", ".rope.scaling.factor", ".rope.scale_linear"} {
		if _, ok := m.meta(a + k); ok {
			return fmt.Errorf("%w: %s: metadata %q: Gemma 4's RoPE is the default (sliding) and proportional (full) one", ErrUnsupported, path, a+k)
		}
	}
	L := int(cfg["num_hidden_layers"].(int64))
	// layer types
	key := a + ".attention.sliding_window_pattern"
	v, ok := m.meta(key)
	if !ok {
		return fmt.Errorf("%w: %s: metadata %q is missing", ErrFormat, path, key)
	}
	if arr, isArr := v.Array(); !isArr || arr.Len != L {
		return m.metaErr(key, v, fmt.Sprintf("want a per-layer array of %d bools", L))
	}
	sliding, err := m.readSWAPattern(a, L, 0)
	if err != nil {
		return err
	}
	if sliding[L-1] {
		return m.metaErr(key, v, fmt.Sprintf("layer %d (the last) slides: Gemma 4's last layer is a full-attention layer (Gemma4TextConfig.__post_init__)", L-1))
	}
	types := make([]string, L)
	for i, sl := range sliding {
		types[i] = map[bool]string{false: "full_attention", true: "sliding_attention"}[sl]
	}
	cfg["layer_types"] = types
	w, err := m.metaInt(a+".attention.sliding_window", -1)
	if err != nil {
		return err
	}
	if w == 0 {
		return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+".attention.sliding_window")
	}
	cfg["sliding_window"] = w
	shared, err := m.metaInt(a+".attention.shared_kv_layers", 0)
	if err != nil {
		return err
	}
	cfg["num_kv_shared_layers"] = shared
	first := int64(L) - shared
	// head sizes
	hd, err := m.metaEqual(a+".attention.key_length_swa", a+".attention.value_length_swa")
	if err != nil {
		return err
	}
	ghd, err := m.metaEqual(a+".attention.key_length", a+".attention.value_length")
	if err != nil {
		return err
	}
	cfg["head_dim"], cfg["global_head_dim"] = hd, ghd
	if rd, err := m.metaInt(a+".rope.dimension_count_swa", hd); err != nil {
		return err
	} else if rd != hd {
		return fmt.Errorf("%w: %s: metadata %q = %d: partial rotary embeddings on the sliding layers (head size %d) are not supported", ErrUnsupported, path, a+".rope.dimension_count_swa", rd, hd)
	}
	if rd, err := m.metaInt(a+".rope.dimension_count", ghd); err != nil {
		return err
	} else if rd != ghd {
		return fmt.Errorf("%w: %s: metadata %q = %d, want the full layers' head size %d (the proportional RoPE spans it, rope_freqs.weight says which frequencies turn)", ErrUnsupported, path, a+".rope.dimension_count", rd, ghd)
	}
	// key/value heads: sliding layers num_key_value_heads, full layers
	// num_global_key_value_heads (attention_k_eq_v) or the same.
	heads := cfg["num_attention_heads"].(int64)
	kv, err := m.perLayer(a+".attention.head_count_kv", L, heads)
	if err != nil {
		return err
	}
	var kvS, kvF int64 = -1, -1
	for i, n := range kv {
		p := &kvF
		if sliding[i] {
			p = &kvS
		}
		if *p >= 0 && *p != n {
			return fmt.Errorf("%w: %s: metadata %q: %s layers have different key/value head counts (%d, %d)", ErrUnsupported, path, a+".attention.head_count_kv", map[bool]string{true: "sliding", false: "full"}[sliding[i]], *p, n)
		}
		*p = n
	}
	if kvS < 0 {
		kvS = kvF // no sliding layer
	}
	cfg["num_key_value_heads"] = kvS
	kEqV := false
	for i := 0; i < int(first); i++ {
		if !sliding[i] && !m.has(fmt.Sprintf("blk.%d.attn_v.weight", i)) {
			kEqV = true
		}
	}
	cfg["attention_k_eq_v"] = kEqV
	if kEqV {
		cfg["num_global_key_value_heads"] = kvF
	} else if kvF != kvS {
		return fmt.Errorf("%w: %s: metadata %q: full layers with %d key/value heads and their own attn_v (sliding layers: %d): Gemma 4 has num_global_key_value_heads only with attention_k_eq_v", ErrUnsupported, path, a+".attention.head_count_kv", kvF, kvS)
	}
	// MLP widths: intermediate_size, doubled on the KV-shared layers
	// (use_double_wide_mlp).
	ff, err := m.perLayer(a+".feed_forward_length", L, -1)
	if err != nil {
		return err
	}
	cfg["intermediate_size"] = ff[0]
	double := false
	for i, n := range ff {
		switch {
		case n == ff[0] && (i < int(first) || !double):
		case int64(i) >= first && n == 2*ff[0] && (i == int(first) || double):
			double = true
		default:
			return fmt.Errorf("%w: %s: metadata %q: layer %d has width %d (layer 0: %d): Gemma 4 doubles only the KV-shared layers' width (use_double_wide_mlp)", ErrUnsupported, path, a+".feed_forward_length", i, n, ff[0])
		}
	}
	if ff[0] == 0 {
		return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+".feed_forward_length")
	}
	cfg["use_double_wide_mlp"] = double
	// per-layer inputs
	ple, err := m.metaInt(a+".embedding_length_per_layer_input", -1)
	if err != nil {
		return err
	}
	cfg["hidden_size_per_layer_input"] = ple
	if emb, ok := m.tensors["token_embd.weight"]; ok && len(emb.Dims) == 2 {
		cfg["vocab_size_per_layer_input"] = emb.Dims[1]
	}
	if _, ok := m.meta(a + ".final_logit_softcapping"); ok {
		c, err := m.requirePositive(a + ".final_logit_softcapping")
		if err != nil {
			return err
		}
		cfg["final_logit_softcapping"] = c
	} else {
		cfg["final_logit_softcapping"] = nil
	}
	// RoPE per layer type
	full, err := m.metaFloat(a+".rope.freq_base", math.NaN())
	if err != nil {
		return err
	}
	swa, err := m.metaFloat(a+".rope.freq_base_swa", math.NaN())
	if err != nil {
		return err
	}
	partial, err := m.gemma4Partial(int(ghd))
	if err != nil {
		return err
	}
	cfg["rope_parameters"] = map[string]any{
		"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": swa},
		"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": partial, "rope_theta": full},
	}
	return nil
}

// gemma4MoE reads the mixture of experts (Gemma4Model.set_gguf_parameters:
// expert_count, expert_used_count, expert_feed_forward_length =
// moe_intermediate_size). llama.cpp gives a layer experts when it holds
// blk.N.ffn_gate_inp.weight (gemma4.cpp load_arch_tensors: has_expert);
// transformers gives every layer the block when enable_moe_block, so a
// file must have the router on every layer or on none. llama.cpp's graph
// (gemma4.cpp) computes what Gemma4TextRouter does: logits =
// ffn_gate_inp · (rms_norm(attn_out) × 1/sqrtf(n_embd) × ffn_gate_inp.scale),
// build_moe_ffn(…, LLM_FFN_GELU, norm_w = true, scale 1.0, SOFTMAX) with
// ffn_down_exps.scale multiplying expert e's output, on
// pre_ffw_norm_2(attn_out); the dense branch through post_ffw_norm_1, the
// experts through post_ffw_norm_2, their sum through post_ffw_norm
// (TestLlamaCppGemma4MoE checks the agreement).
func (m *Model) gemma4MoE(cfg map[string]any) error {
	const a = "gemma4"
	path := m.Files[0].Path
	L := int(cfg["num_hidden_layers"].(int64))
	e, k, err := m.expertCounts()
	if err != nil {
		return err
	}
	for i := 0; i < L; i++ {
		n := fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)
		if m.has(n) != (e > 0) {
			if e == 0 {
				return fmt.Errorf("%w: %s: tensor %q without metadata %q: a Gemma 4 router needs the expert counts", ErrFormat, path, n, a+".expert_count")
			}
			return fmt.Errorf("%w: %s: tensor %q is missing: Gemma 4's mixture of experts is on every layer (enable_moe_block)", ErrFormat, path, n)
		}
	}
	if e == 0 {
		for _, key := range []string{a + ".expert_used_count", a + ".expert_feed_forward_length"} {
			if _, ok := m.meta(key); ok {
				return fmt.Errorf("%w: %s: metadata %q without %q", ErrFormat, path, key, a+".expert_count")
			}
		}
		cfg["enable_moe_block"] = false
		return nil
	}
	w, err := m.metaInt(a+".expert_feed_forward_length", -1)
	if err != nil {
		return err
	}
	if w == 0 {
		return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+".expert_feed_forward_length")
	}
	cfg["enable_moe_block"] = true
	cfg["num_experts"], cfg["top_k_experts"], cfg["moe_intermediate_size"] = e, k, w
	return m.checkExpertScale()
}

// has reports whether the file holds a tensor.
func (m *Model) has(name string) bool { _, ok := m.tensors[name]; return ok }

// metaEqual reads two required keys that must be equal and positive.
func (m *Model) metaEqual(k1, k2 string) (int64, error) {
	a, err := m.metaInt(k1, -1)
	if err != nil {
		return 0, err
	}
	b, err := m.metaInt(k2, -1)
	if err != nil {
		return 0, err
	}
	if a == 0 || a != b {
		return 0, fmt.Errorf("%w: %s: metadata %q = %d and %q = %d must be equal and positive", ErrUnsupported, m.Files[0].Path, k1, a, k2, b)
	}
	return a, nil
}

// perLayer reads an integer key given once or per layer (an array of n
// non-negative integers); def < 0 makes it required.
func (m *Model) perLayer(key string, n int, def int64) ([]int64, error) {
	out := make([]int64, n)
	v, ok := m.meta(key)
	if arr, isArr := v.Array(); ok && isArr {
		if arr.Len != n {
			return nil, m.metaErr(key, v, fmt.Sprintf("want one value per layer (%d)", n))
		}
		for i := range out {
			x, ok := arr.At(i).Int()
			if !ok || x < 0 || x > math.MaxInt32 {
				return nil, m.metaErr(key, v, fmt.Sprintf("entry %d is not a non-negative integer", i))
			}
			out[i] = x
		}
		return out, nil
	}
	x, err := m.metaInt(key, def)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = x
	}
	return out, nil
}

// gemma4Partial reads rope_freqs.weight (F32 [global_head_dim/2]: r
// factors 1.0, then 1e30) and returns a partial_rotary_factor whose
// int(partial · D / 2) is r, as Gemma4.InvFreq (arch) computes it.
func (m *Model) gemma4Partial(d int) (float64, error) {
	ti, ok := m.tensors[ropeFreqsName]
	if !ok {
		return 0, fmt.Errorf("%w: %s: tensor %q (the full layers' proportional RoPE) is missing", ErrFormat, m.Files[0].Path, ropeFreqsName)
	}
	if ti.Type != F32 || len(ti.Dims) != 1 || ti.Dims[0] != int64(d/2) {
		return 0, fmt.Errorf("%w: %s: tensor %q: %s with ne %v, want F32 [%d] (global head_dim/2)", ErrFormat, ti.File, ropeFreqsName, ti.Type, ti.Dims, d/2)
	}
	raw, err := m.owner[ropeFreqsName].readAt(ti, 0, ti.Size)
	if err != nil {
		return 0, err
	}
	r := 0
	for i := 0; i < d/2; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		switch {
		case f == 1 && r == i:
			r++
		case f == gemma4RopeUnrotated:
		default:
			return 0, fmt.Errorf("%w: %s: tensor %q factor %d = %v: Gemma 4's proportional RoPE stores 1 for each rotated frequency, then %g", ErrUnsupported, ti.File, ropeFreqsName, i, f, gemma4RopeUnrotated)
		}
	}
	p := 2 * float64(r) / float64(d)
	for int(p*float64(d)/2) < r {
		p = math.Nextafter(p, 2)
	}
	for int(p*float64(d)/2) > r {
		p = math.Nextafter(p, 0)
	}
	return p, nil
}

func gemma4Convert(s *arch.Spec) ([]KV, error) {
	const a = "gemma4"
	g := s.Gemma4
	if g == nil {
		return nil, fmt.Errorf("gguf: convert: gemma4 without Gemma4 settings")
	}
	if s.QKVBias || s.OBias {
		return nil, fmt.Errorf("%w: convert: config.json attention_bias: llama.cpp's gemma4 graph has no attention biases", ErrUnsupported)
	}
	if g.FullFactor != 1 {
		return nil, fmt.Errorf("%w: convert: config.json rope_parameters.full_attention.factor %v: llama.cpp's converter writes no RoPE factor for Gemma 4", ErrUnsupported, g.FullFactor)
	}
	if g.PLE > 0 && g.PLEVocab != s.Vocab {
		return nil, fmt.Errorf("%w: convert: config.json vocab_size_per_layer_input %d ≠ vocab_size %d: llama.cpp's per_layer_token_embd has the main vocabulary's rows", ErrUnsupported, g.PLEVocab, s.Vocab)
	}
	L := s.Layers
	ff := make([]uint32, L)
	kv := make([]uint32, L)
	pattern := make([]byte, L)
	for i := range L {
		ff[i] = uint32(s.LayerIntermediate(i))
		kv[i] = uint32(s.LayerKVHeads(i))
		if !g.Full[i] {
			pattern[i] = 1
		}
	}
	kvs := []KV{
		perLayerKV(a+".feed_forward_length", ff),
		perLayerKV(a+".attention.head_count_kv", kv),
		{a + ".attention.key_length", Uint32Value(uint32(g.GlobalHeadDim))},
		{a + ".attention.value_length", Uint32Value(uint32(g.GlobalHeadDim))},
		{a + ".attention.key_length_swa", Uint32Value(uint32(s.HeadDim))},
		{a + ".attention.value_length_swa", Uint32Value(uint32(s.HeadDim))},
		{a + ".rope.dimension_count", Uint32Value(uint32(g.GlobalHeadDim))},
		{a + ".rope.dimension_count_swa", Uint32Value(uint32(s.HeadDim))},
		{a + ".rope.freq_base", Float32Value(float32(g.FullTheta))},
		{a + ".rope.freq_base_swa", Float32Value(float32(g.SlidingTheta))},
		{a + ".attention.sliding_window", Uint32Value(uint32(s.Config.SlidingWindow))},
		{a + ".attention.shared_kv_layers", Uint32Value(uint32(L - g.Shared))},
		{a + ".embedding_length_per_layer_input", Uint32Value(uint32(g.PLE))},
	}
	if s.MoE != nil {
		if err := everyLayerSparse(s, a, "enable_moe_block"); err != nil {
			return nil, err
		}
		kvs = append(kvs, expertKVs(a, s)...)
		kvs = append(kvs, KV{a + ".expert_feed_forward_length", Uint32Value(uint32(s.MoE.Intermediate))})
	}
	pv, _ := ScalarArray(TypeBool, pattern)
	kvs = append(kvs, KV{a + ".attention.sliding_window_pattern", pv})
	if c := s.Config.FinalLogitSoftcap; c > 0 {
		kvs = append(kvs, KV{a + ".final_logit_softcapping", Float32Value(float32(c))})
	}
	// Refuse θ values that are not float32 (the metadata type).
	for _, t := range []float64{g.FullTheta, g.SlidingTheta} {
		if float64(float32(t)) != t {
			return nil, fmt.Errorf("%w: convert: config.json rope_parameters rope_theta %v is not a float32", ErrUnsupported, t)
		}
	}
	return kvs, nil
}

// perLayerKV is a uint32 key, an array when the layers differ.
func perLayerKV(key string, v []uint32) KV {
	same := true
	for _, x := range v {
		same = same && x == v[0]
	}
	if same && len(v) > 0 {
		return KV{key, Uint32Value(v[0])}
	}
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], x)
	}
	a, _ := ScalarArray(TypeUint32, raw)
	return KV{key, a}
}

// gemma4Tensors writes rope_freqs.weight (generate_extra_tensors).
func gemma4Tensors(s *arch.Spec) ([]WriteTensor, error) {
	g := s.Gemma4
	d := g.GlobalHeadDim
	r := int(g.FullPartial * float64(d) / 2) // Gemma4.InvFreq's rotated count
	var raw []byte
	for i := 0; i < d/2; i++ {
		f := gemma4RopeUnrotated
		if i < r {
			f = 1
		}
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
	}
	return []WriteTensor{{Name: ropeFreqsName, Dims: []int64{int64(d / 2)}, Type: F32, Data: raw}}, nil
}
