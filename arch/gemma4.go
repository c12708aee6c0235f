package arch

import (
	"fmt"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/detmath"
)

// gemma4Text declares Gemma4ForCausalLM, the Gemma 4 text decoder
// (model_type gemma4_text), read from huggingface/transformers
// src/transformers/models/gemma4/configuration_gemma4.py at commit
// 351f643ab9f5 (Gemma4TextConfig and its __post_init__),
// modeling_gemma4.py at commit c308a309e651 (Gemma4RMSNorm, Gemma4TextMLP,
// Gemma4TextRotaryEmbedding, Gemma4TextAttention, Gemma4TextDecoderLayer,
// Gemma4TextScaledWordEmbedding, Gemma4TextModel.forward,
// get_per_layer_inputs, project_per_layer_inputs, Gemma4ForCausalLM.forward)
// and src/transformers/modeling_rope_utils.py
// (_compute_proportional_rope_parameters). What it computes (docs/gemma4.md):
//
//   - Gemma4RMSNorm: x · pow(mean(x²) + eps, -0.5) · weight — the weight
//     itself, not (1 + weight) as in Gemma 2/3 (NormOffset false); the
//     with_scale=False form (v_norm) has no weight.
//   - Gemma4TextScaledWordEmbedding: embed_tokens(ids) · sqrt(hidden), the
//     scale cast to the weight's dtype in transformers (bf16: 55.5 for
//     3072); the float64 reference multiplies by math.Sqrt(hidden), as for
//     gemma3 (Spec.EmbedScale).
//   - Gemma4TextAttention: head_dim is global_head_dim on full_attention
//     layers when set (Gemma4.HeadDim); attention_k_eq_v full layers have
//     num_global_key_value_heads key/value heads and no v_proj: the values
//     are k_proj's output before k_norm (Gemma4.KVHeads, Layer.V == "");
//     q = RoPE(q_norm(q_proj x)), k = RoPE(k_norm(k_proj x)), v =
//     v_norm(v_proj x); scaling = 1.0 (Spec.AttnScale); no score
//     soft-capping; sliding_window on sliding_attention layers.
//   - KV sharing: with num_kv_shared_layers = n and first = layers − n, the
//     layers i ≥ first (only when first > 0) have no k_proj, v_proj, k_norm
//     (their names are _keys_to_ignore_on_load_unexpected) and attend to the
//     keys/values (after norm and RoPE) of the last layer before first of
//     the same layer type (Gemma4.KVSource).
//   - Gemma4TextMLP: down(gelu_tanh(gate x) · up x), its width doubled on
//     KV-shared layers when use_double_wide_mlp (Gemma4.Intermediate).
//   - Gemma4TextDecoderLayer: x += post_attention_layernorm(attn(
//     input_layernorm x)); x += post_feedforward_layernorm(mlp(
//     pre_feedforward_layernorm x)); with per-layer inputs,
//     x += post_per_layer_input_norm(per_layer_projection(
//     gelu_tanh(per_layer_input_gate x) · ple_i)); then x ·= layer_scalar
//     (a stored [1] buffer).
//   - Per-layer embeddings (hidden_size_per_layer_input P > 0):
//     ple = (per_layer_projection_norm(reshape(per_layer_model_projection(e)
//     · hidden^-0.5, [layers, P])) + embed_tokens_per_layer(ids) · sqrt(P))
//     · 2^-0.5 with e the scaled main embedding; layer i takes ple[:, i, :].
//   - RoPE per layer type: sliding layers the default RoPE over head_dim,
//     full layers the proportional RoPE over global_head_dim (the first
//     int(partial_rotary_factor · D // 2) frequencies θ^(-2j/D), the others
//     0, all divided by factor) — Gemma4.InvFreq.
//   - Gemma4ForCausalLM: tied head by default; final_logit_softcapping
//     when set.
//
// The mixture of experts (enable_moe_block, Gemma 4 26B-A4B), read from
// modeling_gemma4.py at commit c308a309e651 (Gemma4TextRouter,
// Gemma4TextExperts, Gemma4TextDecoderLayer.__init__ and forward) and
// configuration_gemma4.py (num_experts, top_k_experts,
// moe_intermediate_size: None by default, required here):
//
//   - every layer has the block when enable_moe_block (no sparse step, no
//     dense-only list), beside the dense MLP, which stays;
//   - Gemma4TextRouter on the residual r (the attention block's output
//     added to the stream, not the pre-feed-forward norm's output):
//     z = norm(r) · scale · hidden^-0.5 (norm: Gemma4RMSNorm with_scale=False,
//     scale: router.scale [hidden]), logits = proj(z) (router.proj, no bias),
//     p = softmax(logits), the top_k_experts largest p (torch.topk),
//     renormalised to sum 1, then each multiplied by
//     router.per_expert_scale[expert];
//   - Gemma4TextExperts on pre_feedforward_layernorm_2(r): expert e is
//     down_e(gelu_tanh(gate_e x) · up_e x), hidden_activation as the dense
//     MLP's, with gate, up = (x · gate_up_proj[e]ᵀ).chunk(2) (gate rows
//     first), each expert's rows scaled by their routing weight and
//     index_add_'ed in ascending expert order;
//   - the layer: h1 = post_feedforward_layernorm_1(mlp(
//     pre_feedforward_layernorm r)), h2 = post_feedforward_layernorm_2(
//     experts(...)), x = r + post_feedforward_layernorm(h1 + h2).
//
// Experts are stored fused and 3-D in the released BF16 checkpoints
// (experts.gate_up_proj [E, 2·I, hidden], experts.down_proj [E, hidden,
// I]; Spec.FusedExperts) and per expert (experts.{e}.{gate,up,down}_proj,
// 2-D) in quantized ones: vLLM's models/gemma4.py (Gemma4Model.load_weights,
// expert_params_mapping; Gemma4ForCausalLM.load_weights._weight_iterator
// explodes the 3-D tensors) reads both. Ties in top-k: see qwen3_moe.go.
//
// Not read (refused): use_bidirectional_attention "all", RoPE types other
// than default (sliding) and proportional (full).
func gemma4Text() Family {
	return Family{
		Name: "gemma4_text", Class: "Gemma4ForCausalLM",
		Defaults: Defaults{KVHeads: 4, HeadDim: 256, MaxPos: 131072, Eps: 1e-6, Theta: 10000, Tie: true},
		Quirks:   gemma4Quirks,
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true, EmbedScale: true, SandwichNorms: true}
		},
		MoENames: MoENames{Router: "router.proj", Gate: "gate_proj", Up: "up_proj", Down: "down_proj"},
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 24,
			Layers:  4,
			Config:  gemma4FixtureConfig,
			// moe: the 26B-A4B kind (8 experts of width 16, top 2, on every
			// layer beside the dense MLP), experts stored fused as its BF16
			// release stores them.
			Variants: map[string]map[string]any{
				"moe": {"enable_moe_block": true, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 16},
			},
			FusedExperts: true,
		},
	}
}

// Gemma4 holds what a Gemma 4 text decoder adds to Spec (Spec.Gemma4).
type Gemma4 struct {
	// Full[i]: layer i is a full_attention layer (else sliding_attention).
	Full []bool
	// GlobalHeadDim, GlobalKVHeads: head size and key/value heads of the
	// full layers (see HeadDim, KVHeads).
	GlobalHeadDim, GlobalKVHeads int
	// KEqV (attention_k_eq_v): full layers have no v_proj.
	KEqV bool
	// Shared is the index of the first KV-shared layer (layers when none).
	Shared int
	// DoubleWide (use_double_wide_mlp): KV-shared layers' MLP is 2× wide.
	DoubleWide bool
	// PLE is hidden_size_per_layer_input (0: no per-layer inputs);
	// PLEVocab vocab_size_per_layer_input.
	PLE, PLEVocab int
	// SlidingTheta: the sliding layers' default RoPE base. FullTheta,
	// FullPartial, FullFactor: the full layers' proportional RoPE.
	SlidingTheta, FullTheta, FullPartial, FullFactor float64
}

// Gemma 4 tensor names beside the common ones.
const (
	Gemma4PLEEmbedName = "model.embed_tokens_per_layer.weight"
	Gemma4PLEProjName  = "model.per_layer_model_projection.weight"
	Gemma4PLENormName  = "model.per_layer_projection_norm.weight"
)

// Shares reports whether layer i reads another layer's keys and values.
func (g *Gemma4) Shares(i int) bool { return i >= g.Shared }

// KVSource returns the layer whose keys and values layer i attends to:
// i itself, or for a KV-shared layer the last non-shared layer of its type
// (Gemma4TextAttention.kv_shared_layer_index).
func (g *Gemma4) KVSource(i int) int {
	if !g.Shares(i) {
		return i
	}
	for j := g.Shared - 1; j >= 0; j-- {
		if g.Full[j] == g.Full[i] {
			return j
		}
	}
	return -1 // refused by gemma4Quirks
}

// LayerHeadDim returns layer i's head size.
func (s *Spec) LayerHeadDim(i int) int {
	if g := s.Gemma4; g != nil && g.Full[i] {
		return g.GlobalHeadDim
	}
	return s.HeadDim
}

// LayerKVHeads returns layer i's key/value head count.
func (s *Spec) LayerKVHeads(i int) int {
	if g := s.Gemma4; g != nil && g.Full[i] {
		return g.GlobalKVHeads
	}
	return s.KVHeads
}

// LayerIntermediate returns the width of layer i's dense MLP.
func (s *Spec) LayerIntermediate(i int) int {
	if g := s.Gemma4; g != nil && g.DoubleWide && g.Shares(i) {
		return 2 * s.Intermediate
	}
	return s.Intermediate
}

// InvFreq returns the RoPE inverse frequencies of layer i (head size d):
// the default RoPE of base SlidingTheta over d on sliding layers
// (Gemma4TextRotaryEmbedding.compute_default_rope_parameters), the
// proportional RoPE on full layers (_compute_proportional_rope_parameters:
// rope_angles = int(partial · d // 2) frequencies 1/θ^(2j/d), then
// d/2 − rope_angles zeros, every one divided by factor).
func (g *Gemma4) InvFreq(i, d int) []float64 {
	if !g.Full[i] {
		return RopeInvFreq(d, g.SlidingTheta, nil)
	}
	inv := make([]float64, d/2)
	angles := int(g.FullPartial * float64(d) / 2)
	for j := 0; j < angles && j < len(inv); j++ {
		inv[j] = 1 / detmath.Pow(g.FullTheta, float64(2*j)/float64(d))
	}
	for j := range inv {
		inv[j] /= g.FullFactor
	}
	return inv
}

func gemma4Quirks(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	c.HiddenAct = r.Str("hidden_activation", "gelu_pytorch_tanh")
	if c.HiddenAct != "gelu_pytorch_tanh" { // the MLP's and the per-layer gate's ACT2FN
		r.Fail("hidden_activation", "%q is not supported for gemma4_text (only gelu_pytorch_tanh)", c.HiddenAct)
	}
	c.FinalLogitSoftcap = 0
	if !r.IsNull("final_logit_softcapping") {
		c.FinalLogitSoftcap = r.Float("final_logit_softcapping", 0)
	}
	if r.Has("use_bidirectional_attention") && !r.IsNull("use_bidirectional_attention") {
		if v := r.Str("use_bidirectional_attention", ""); v == "all" {
			r.Fail("use_bidirectional_attention", "bidirectional attention (\"all\") is not a causal LM")
		}
	}
	for _, k := range []string{"head_dim", "num_key_value_heads"} {
		if r.IsNull(k) { // an int field of Gemma4TextConfig: None breaks Gemma4TextAttention
			r.Fail(k, "null is not a valid Gemma 4 %s", k)
		}
	}
	L := c.NumHiddenLayers
	if r.Bool("enable_moe_block", false) {
		gemma4MoE(r, c)
	}
	g := &Gemma4{Full: make([]bool, L), FullFactor: 1, SlidingTheta: 10000, FullTheta: 1e6, FullPartial: 0.25}
	types := readLayerTypes(r, L)
	for i := range g.Full {
		g.Full[i] = (i+1)%6 == 0 // __post_init__: sliding unless (i + 1) % 6 == 0
		if types != nil {
			g.Full[i] = types[i] == "full_attention"
		}
	}
	if L > 0 {
		g.Full[L-1] = true // __post_init__ forces the last layer to full_attention
	}
	c.SlidingWindow = r.Positive("sliding_window", 512)
	c.SlidingLayers = make([]bool, L)
	for i := range g.Full {
		c.SlidingLayers[i] = !g.Full[i]
	}
	g.GlobalHeadDim = c.HeadDim
	if !r.IsNull("global_head_dim") {
		if d := r.Int("global_head_dim", 512); d != 0 {
			g.GlobalHeadDim = d
		}
	}
	g.KEqV = r.Bool("attention_k_eq_v", false)
	g.GlobalKVHeads = c.NumKeyValueHeads
	if g.KEqV {
		if r.IsNull("num_global_key_value_heads") || !r.Has("num_global_key_value_heads") {
			r.Fail("num_global_key_value_heads", "attention_k_eq_v needs num_global_key_value_heads (Gemma4TextAttention divides by it)")
		} else {
			g.GlobalKVHeads = r.Positive("num_global_key_value_heads", 1)
		}
	}
	n := r.Int("num_kv_shared_layers", 0)
	g.Shared = L
	if first := L - n; n > 0 && first > 0 { // layer_idx >= first_kv_shared_layer_idx > 0
		g.Shared = first
	}
	g.DoubleWide = r.Bool("use_double_wide_mlp", false)
	if !r.IsNull("hidden_size_per_layer_input") {
		g.PLE = r.Int("hidden_size_per_layer_input", 256)
	}
	g.PLEVocab = r.Positive("vocab_size_per_layer_input", 262144)
	if r.Err() != nil {
		return
	}
	if g.PLE < 0 {
		r.Fail("hidden_size_per_layer_input", "%d must not be negative", g.PLE)
	}
	if g.PLE > 0 && g.PLEVocab < c.VocabSize {
		r.Fail("vocab_size_per_layer_input", "%d is smaller than vocab_size %d: per-layer embeddings would be indexed out of range", g.PLEVocab, c.VocabSize)
	}
	if g.GlobalHeadDim <= 0 || g.GlobalHeadDim%2 != 0 {
		r.Fail("global_head_dim", "%d must be positive and even", g.GlobalHeadDim)
	}
	if c.NumAttentionHeads%g.GlobalKVHeads != 0 {
		r.Fail("num_global_key_value_heads", "%d heads are not divisible by %d", c.NumAttentionHeads, g.GlobalKVHeads)
	}
	for i := g.Shared; i < L; i++ {
		if g.KVSource(i) < 0 {
			r.Fail("num_kv_shared_layers", "KV-shared layer %d has no earlier non-shared layer of its type", i)
			return
		}
	}
	gemma4Rope(r, c, g)
	c.FamilySettings = g
}

// gemma4MoE reads the mixture of experts: Gemma4TextExperts and
// Gemma4TextRouter need num_experts, top_k_experts and
// moe_intermediate_size (None by default); every layer has the block and
// the top-k weights are always renormalised.
func gemma4MoE(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	for _, k := range []string{"num_experts", "top_k_experts", "moe_intermediate_size"} {
		if !r.Has(k) || r.IsNull(k) {
			r.Fail(k, "enable_moe_block needs %s (Gemma4TextConfig's default is None)", k)
			return
		}
	}
	m := &checkpoint.MoE{
		Experts:      r.Positive("num_experts", 1),
		TopK:         r.Positive("top_k_experts", 1),
		Intermediate: r.Positive("moe_intermediate_size", 1),
		NormTopK:     true,
		Sparse:       make([]bool, c.NumHiddenLayers),
	}
	if r.Err() != nil {
		return
	}
	if m.TopK > m.Experts {
		r.Fail("top_k_experts", "%d exceeds num_experts %d", m.TopK, m.Experts)
		return
	}
	for i := range m.Sparse {
		m.Sparse[i] = true
	}
	c.MoE = m
}

// gemma4MoELayer names a Gemma 4 MoE layer's tensors in l: the dense MLP
// stays (Layer cleared it for the experts), the router's Linear is
// router.proj (MoENames), its vectors and the block's three norms.
func (s *Spec) gemma4MoELayer(l *Layer) {
	p := l.Prefix
	l.Gate, l.Up, l.Down = p+"mlp.gate_proj", p+"mlp.up_proj", p+"mlp.down_proj"
	l.RouterScale, l.PerExpertScale = p+"router.scale", p+"router.per_expert_scale"
	l.PreMoENorm = p + "pre_feedforward_layernorm_2.weight"
	l.PostMLPNorm1 = p + "post_feedforward_layernorm_1.weight"
	l.PostMoENorm = p + "post_feedforward_layernorm_2.weight"
}

// gemma4Rope reads rope_parameters: {"sliding_attention": {rope_type
// "default", rope_theta}, "full_attention": {rope_type "proportional",
// partial_rotary_factor, rope_theta, factor}}, Gemma4TextConfig's default
// when absent (θ 1e4; proportional 0.25 of θ 1e6). The proportional RoPE
// takes its head size from global_head_dim, or hidden/heads when that is
// unset (getattr(config, head_dim_key) or ...): refused when that differs
// from the full layers' head size, as transformers would fail.
func gemma4Rope(r *checkpoint.ConfigReader, c *checkpoint.Config, g *Gemma4) {
	if r.Get("rope_parameters") != nil && !r.IsNull("rope_parameters") {
		rp := r.Sub("rope_parameters")
		if r.Err() != nil {
			return
		}
		for _, typ := range []string{"sliding_attention", "full_attention"} {
			if rp.Get(typ) == nil {
				r.Fail("rope_parameters", "no %q entry", typ)
				return
			}
			sp := rp.Sub(typ)
			rt := sp.Str("rope_type", "default")
			switch {
			case typ == "sliding_attention" && rt == "default":
				g.SlidingTheta = sp.Float("rope_theta", 10000)
			case typ == "full_attention" && rt == "proportional":
				g.FullTheta = sp.Float("rope_theta", 1e6)
				g.FullPartial = sp.Float("partial_rotary_factor", 1)
				g.FullFactor = sp.Float("factor", 1)
			default:
				r.Fail("rope_parameters", "%s rope_type %q is not supported (sliding_attention: default; full_attention: proportional)", typ, rt)
				return
			}
		}
	}
	if r.Err() != nil {
		return
	}
	if !(g.SlidingTheta > 0) || !(g.FullTheta > 0) || !(g.FullFactor > 0) || !(g.FullPartial >= 0 && g.FullPartial <= 1) {
		r.Fail("rope_parameters", "rope_theta, factor must be positive and partial_rotary_factor in [0, 1] (got %v, %v, %v, %v)", g.SlidingTheta, g.FullTheta, g.FullFactor, g.FullPartial)
	}
	ropeDim := g.GlobalHeadDim
	if r.IsNull("global_head_dim") {
		ropeDim = c.HiddenSize / c.NumAttentionHeads
	}
	if ropeDim != g.GlobalHeadDim {
		r.Fail("global_head_dim", "null: the proportional RoPE would span hidden/heads = %d, not the full layers' head_dim %d", ropeDim, g.GlobalHeadDim)
	}
}

// gemma4FixtureConfig: Gemma 4 E2B's keys (PLE, KV sharing, double-wide
// MLP on the shared layers) combined with 31B's attention_k_eq_v, at a
// window (32) shorter than the test contexts. With 4 layers or more, the
// layers before the shared tail alternate sliding/full and the tail
// (half the layers) does too, ending full, so that every layer kind is
// present: sliding, full (k = v), KV-shared sliding and KV-shared full.
func gemma4FixtureConfig(s FixtureShape) map[string]any {
	n := s.Layers
	shared := 0
	if n >= 4 {
		shared = n / 2
	}
	first := n - shared
	types := make([]string, n)
	for i := range types {
		full := i%2 == 1
		if i >= first {
			full = (i-first)%2 == 1
		}
		if i == n-1 {
			full = true
		}
		types[i] = map[bool]string{false: "sliding_attention", true: "full_attention"}[full]
	}
	return map[string]any{
		"rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
		"sliding_window": 32, "layer_types": types, "final_logit_softcapping": 30.0,
		"global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
		"num_kv_shared_layers": shared, "use_double_wide_mlp": true,
		"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": s.Vocab,
		"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
		},
		"attention_bias": false, "enable_moe_block": false, "use_bidirectional_attention": nil,
	}
}

// gemma4Check validates a resolved gemma4 Spec's sizes.
func gemma4Check(s *Spec) error {
	g := s.Gemma4
	if len(g.Full) != s.Layers {
		return fmt.Errorf("%w: gemma4: %d layer types for %d layers", ErrUnsupported, len(g.Full), s.Layers)
	}
	return nil
}

// gemma4Linears is LayerLinears for Gemma 4: q, k, v (those the layer
// has), o at the layer's head size and key/value heads, gate, up, down at
// its MLP width, in a MoE layer the router and each expert's gate, up,
// down, then per_layer_input_gate and per_layer_projection.
func (s *Spec) gemma4Linears(i int) []Linear {
	l := s.Layer(i)
	d := s.LayerHeadDim(i)
	q, kv, w := s.Heads*d, s.LayerKVHeads(i)*d, s.LayerIntermediate(i)
	out := []Linear{{l.Q, q, s.Hidden, s.QKVBias, ProjQ, -1}}
	if l.K != "" {
		out = append(out, Linear{l.K, kv, s.Hidden, s.QKVBias, ProjK, -1})
	}
	if l.V != "" {
		out = append(out, Linear{l.V, kv, s.Hidden, s.QKVBias, ProjV, -1})
	}
	out = append(out, Linear{l.O, s.Hidden, q, s.OBias, ProjO, -1},
		Linear{l.Gate, w, s.Hidden, false, ProjGate, -1},
		Linear{l.Up, w, s.Hidden, false, ProjUp, -1},
		Linear{l.Down, s.Hidden, w, false, ProjDown, -1})
	if s.Sparse(i) {
		m := s.MoE
		out = append(out, Linear{l.Router, m.Experts, s.Hidden, false, ProjRouter, -1})
		for e := 0; e < m.Experts; e++ {
			g, u, dn := s.Expert(i, e)
			out = append(out,
				Linear{g, m.Intermediate, s.Hidden, false, ProjGate, e},
				Linear{u, m.Intermediate, s.Hidden, false, ProjUp, e},
				Linear{dn, s.Hidden, m.Intermediate, false, ProjDown, e})
		}
	}
	if p := s.Gemma4.PLE; p > 0 {
		out = append(out, Linear{l.PLEGate, p, s.Hidden, false, ProjPLEGate, -1},
			Linear{l.PLEProj, s.Hidden, p, false, ProjPLEProj, -1})
	}
	return out
}

// gemma4Dense is DenseTensors for Gemma 4: the embedding, the per-layer
// input tables (embed_tokens_per_layer [vocab_per_layer, layers·P],
// per_layer_model_projection [layers·P, hidden] — an nn.Linear of
// Gemma4TextModel kept dense here — and per_layer_projection_norm [P]),
// then per layer its norms, biases and layer_scalar, then the final norm.
func (s *Spec) gemma4Dense() []TensorShape {
	g := s.Gemma4
	out := []TensorShape{{EmbedName, []int{s.Vocab, s.Hidden}}}
	if g.PLE > 0 {
		out = append(out, TensorShape{Gemma4PLEEmbedName, []int{g.PLEVocab, s.Layers * g.PLE}},
			TensorShape{Gemma4PLEProjName, []int{s.Layers * g.PLE, s.Hidden}},
			TensorShape{Gemma4PLENormName, []int{g.PLE}})
	}
	for i := 0; i < s.Layers; i++ {
		l := s.Layer(i)
		d := s.LayerHeadDim(i)
		q, kv := s.Heads*d, s.LayerKVHeads(i)*d
		out = append(out, TensorShape{l.AttnNorm, []int{s.Hidden}})
		for _, b := range []TensorShape{{l.QBias, []int{q}}, {l.KBias, []int{kv}}, {l.VBias, []int{kv}}, {l.OBias, []int{s.Hidden}}} {
			if b.Name != "" {
				out = append(out, b)
			}
		}
		out = append(out, TensorShape{l.QNorm, []int{d}})
		if l.KNorm != "" {
			out = append(out, TensorShape{l.KNorm, []int{d}})
		}
		out = append(out, TensorShape{l.MLPNorm, []int{s.Hidden}}, TensorShape{l.PostAttnNorm, []int{s.Hidden}},
			TensorShape{l.PostMLPNorm, []int{s.Hidden}})
		if s.Sparse(i) {
			out = append(out, TensorShape{l.RouterScale, []int{s.Hidden}}, TensorShape{l.PerExpertScale, []int{s.MoE.Experts}},
				TensorShape{l.PreMoENorm, []int{s.Hidden}}, TensorShape{l.PostMLPNorm1, []int{s.Hidden}},
				TensorShape{l.PostMoENorm, []int{s.Hidden}})
		}
		if l.PLENorm != "" {
			out = append(out, TensorShape{l.PLENorm, []int{s.Hidden}})
		}
		out = append(out, TensorShape{l.LayerScalar, []int{1}})
	}
	return append(out, TensorShape{FinalNormName, []int{s.Hidden}})
}
