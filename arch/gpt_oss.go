package arch

import (
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// gptOss declares GptOssForCausalLM (openai/gpt-oss-20b, -120b).
//
// transformers: models/gpt_oss/configuration_gpt_oss.py (GptOssConfig:
// num_local_experts 128 (attribute_map num_experts), num_experts_per_tok
// 4, head_dim 64, num_key_value_heads 8, sliding_window 128,
// tie_word_embeddings False, max_position_embeddings 131072, rms_norm_eps
// 1e-5, rope_theta 150000 (default_theta), attention_bias True,
// swiglu_alpha 1.702, swiglu_limit 7.0; __post_init__: layer_types
// "sliding_attention" for even i, "full_attention" for odd i; rope
// parameters, when absent, yarn factor 32, beta_fast 32, beta_slow 1,
// truncate False, original_max_position_embeddings 4096) and
// models/gpt_oss/modeling_gpt_oss.py:
//
//   - GptOssRMSNorm: weight · x/sqrt(mean(x²) + eps), no offset;
//   - GptOssAttention: q/k/v/o_proj with bias (attention_bias), RoPE
//     (_apply_rotary_emb: the two halves of each head, cos/sin of
//     inv_freq·pos times the rope's attention_scaling; yarn, see
//     yarnInvFreq), scaling head_dim^-0.5, self.sliding_window =
//     config.sliding_window on "sliding_attention" layers only, and
//     self.sinks [heads]: eager_attention_forward appends the head's sink
//     logit as one more column of the scaled, masked scores, takes the
//     softmax over the row and drops that column (the sink only enlarges
//     the denominator);
//   - GptOssTopKRouter: logits = F.linear(h, weight, bias) [experts];
//     torch.topk(logits, k) first, then softmax over the k selected
//     logits (the order differs from qwen3_moe's softmax-then-topk);
//   - GptOssExperts: gate_up_proj [E, hidden, 2·I] and gate_up_proj_bias
//     [E, 2·I], down_proj [E, I, hidden] and down_proj_bias [E, hidden]
//     (stored as x @ W, i.e. transposed against nn.Linear); gate_up =
//     h @ gate_up_proj[e] + bias; gate = gate_up[..., ::2], up =
//     gate_up[..., 1::2] (interleaved columns); gate.clamp(max=limit),
//     up.clamp(-limit, limit); glu = gate·sigmoid(gate·alpha); out =
//     ((up + 1)·glu) @ down_proj[e] + down_proj_bias[e]; the layer output
//     is Σ_e routing_weight_e · out_e (every layer is a MoE layer);
//   - GptOssDecoderLayer: x + attn(input_layernorm(x)), then
//     x + mlp(post_attention_layernorm(x)).
//
// The published checkpoints store the experts as MXFP4
// (quantization_config quant_method "mxfp4"): *_blocks / *_scales, decoded
// by quant.OpenGptOssExperts (integrations/mxfp4.py
// convert_moe_packed_tensors); the other Linears are listed in
// modules_to_not_convert and stay BF16.
func gptOss() Family {
	return Family{
		Name: "gpt_oss", Class: "GptOssForCausalLM",
		Defaults: Defaults{KVHeads: 8, HeadDim: 64, MaxPos: 131072, Eps: 1e-5, Theta: 150000, AttnBias: true},
		Quirks:   gptOssQuirks,
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias}
		},
		MoENames: MoENames{Block: "mlp", Router: "router"},
		Fixture: Fixture{
			HeadDim: 32, // heads·head_dim ≠ hidden, as gpt-oss (64·64 ≠ 2880)
			// 8 experts, top 4 (gpt-oss-20b: 32, top 4); layers alternate
			// sliding (window 16, shorter than the tests' windows) and
			// full; gpt-oss-20b's YaRN rope_scaling and keys.
			Config: func(s FixtureShape) map[string]any {
				types := make([]string, s.Layers)
				for i := range types {
					types[i] = "full_attention"
					if (i+1)%2 != 0 {
						types[i] = "sliding_attention"
					}
				}
				return map[string]any{
					"rms_norm_eps": 1e-5, "rope_theta": 150000.0, "sliding_window": 16, "layer_types": types,
					"num_local_experts": 8, "num_experts_per_tok": 4, "experts_per_token": 4,
					"swiglu_limit": 7.0, "attention_bias": true, "initial_context_length": 4096,
					"router_aux_loss_coef": 0.9, "output_router_logits": false,
					"rope_scaling": map[string]any{
						"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
						"truncate": false, "original_max_position_embeddings": 4096,
					},
				}
			},
		},
	}
}

// GptOss holds gpt-oss's expert activation constants (GptOssConfig's
// swiglu_alpha and swiglu_limit; GptOssExperts.alpha, .limit).
type GptOss struct {
	Alpha, Limit float64
}

func gptOssQuirks(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	g := &GptOss{Alpha: r.Float("swiglu_alpha", 1.702), Limit: r.Float("swiglu_limit", 7.0)}
	if r.Err() == nil && (!(g.Alpha > 0) || !(g.Limit > 0) || math.IsInf(g.Limit, 0) || math.IsInf(g.Alpha, 0)) {
		r.Fail("swiglu_limit", "swiglu_alpha %v and swiglu_limit %v must be positive and finite", g.Alpha, g.Limit)
		return
	}
	experts := r.Positive("num_experts", 128) // attribute_map: num_experts → num_local_experts
	if r.Has("num_local_experts") {
		experts = r.Positive("num_local_experts", 128)
	}
	m := &checkpoint.MoE{
		Experts:      experts,
		TopK:         r.Positive("num_experts_per_tok", 4),
		Intermediate: c.IntermediateSize,
		Sparse:       make([]bool, c.NumHiddenLayers),
	}
	for i := range m.Sparse {
		m.Sparse[i] = true
	}
	if r.Err() == nil && m.TopK > m.Experts {
		r.Fail("num_experts_per_tok", "%d exceeds num_local_experts %d", m.TopK, m.Experts)
		return
	}
	// GptOssAttention: sliding_window on "sliding_attention" layers; a null
	// sliding_window is no window anywhere.
	w := r.Int("sliding_window", 128)
	types := readLayerTypes(r, c.NumHiddenLayers)
	if r.Err() != nil {
		return
	}
	if w < 0 {
		r.Fail("sliding_window", "must not be negative, got %d", w)
		return
	}
	sl := make([]bool, c.NumHiddenLayers)
	for i := range sl {
		if types != nil {
			sl[i] = types[i] == "sliding_attention"
		} else {
			sl[i] = (i+1)%2 != 0
		}
	}
	c.SlidingWindow, c.SlidingLayers = w, sl
	if r.Get("rope_scaling") == nil && r.Get("rope_parameters") == nil {
		// GptOssConfig.__post_init__'s default rope parameters.
		c.RopeScaling = &checkpoint.RopeScaling{Type: "yarn", Factor: 32, BetaFast: 32, BetaSlow: 1,
			OriginalMaxPositionEmbeddings: 4096}
	}
	c.MoE = m
	c.FamilySettings = g
}

// GptOssExperts returns the fused expert tensors of layer i as a dense
// checkpoint stores them: mlp.experts.gate_up_proj [E, hidden, 2·I],
// gate_up_proj_bias [E, 2·I], down_proj [E, I, hidden], down_proj_bias
// [E, hidden]. An MXFP4 checkpoint stores gate_up_proj and down_proj as
// *_blocks and *_scales (quant.OpenGptOssExperts).
func (s *Spec) GptOssExperts(i int) (gateUp, gateUpBias, down, downBias string) {
	p := s.Layer(i).Prefix + "mlp.experts."
	return p + "gate_up_proj", p + "gate_up_proj_bias", p + "down_proj", p + "down_proj_bias"
}

// gptOssDense is DenseTensors' gpt-oss part of layer i: the attention
// sinks, the router bias and the expert biases.
func (s *Spec) gptOssDense(i int) []TensorShape {
	l := s.Layer(i)
	E, I := s.MoE.Experts, s.MoE.Intermediate
	_, gub, _, db := s.GptOssExperts(i)
	return []TensorShape{{l.Sinks, []int{s.Heads}}, {l.RouterBias, []int{E}},
		{gub, []int{E, 2 * I}}, {db, []int{E, s.Hidden}}}
}

// gptOssInit is FixtureInit for gpt-oss: sinks N(0, 1); a decisive router
// (4× a Linear's scale, as qwen3_5's); gate_up_proj N(0, 16/hidden), so
// that some gate and up values pass the clamp at ±7; down_proj N(0, 1/I);
// the expert biases 0.1·N(0, 1).
func (s *Spec) gptOssInit(name string) (mean, sd float64, ok bool) {
	switch {
	case strings.HasSuffix(name, ".self_attn.sinks"):
		return 0, 1, true
	case strings.HasSuffix(name, ".mlp.router.weight"):
		return 0, 4 / math.Sqrt(float64(s.Hidden)), true
	case strings.HasSuffix(name, ".mlp.experts.gate_up_proj"):
		return 0, 4 / math.Sqrt(float64(s.Hidden)), true
	case strings.HasSuffix(name, ".mlp.experts.down_proj"):
		return 0, 1 / math.Sqrt(float64(s.MoE.Intermediate)), true
	case strings.HasSuffix(name, "_proj_bias"):
		return 0, 0.1, true
	}
	return 0, 0, false
}
