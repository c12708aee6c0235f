package arch

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// qwen35 declares Qwen3.5 (model_type qwen3_5, Qwen3_5ForConditionalGeneration,
// whose text decoder is read from text_config and stored under
// model.language_model.; and its text-only form qwen3_5_text,
// Qwen3_5ForCausalLM, stored under model.). Read from transformers
// models/qwen3_5/configuration_qwen3_5.py and modeling_qwen3_5.py
// (generated from modular_qwen3_5.py):
//
//   - Qwen3_5TextConfig: num_key_value_heads 4, head_dim 256,
//     max_position_embeddings 32768, rms_norm_eps 1e-6, tie_word_embeddings
//     False, attention_bias False, linear_conv_kernel_dim 4,
//     linear_key_head_dim 128, linear_value_head_dim 128,
//     linear_num_key_heads 16, linear_num_value_heads 32; __post_init__:
//     partial_rotary_factor defaults to 0.25; layer_types None →
//     "linear_attention" if (i+1) % full_attention_interval else
//     "full_attention", full_attention_interval defaulting to 4.
//     Qwen3_5Config (the wrapper) has its own tie_word_embeddings (False).
//   - Qwen3_5DecoderLayer: x += token_mixer(input_layernorm(x)); x +=
//     mlp(post_attention_layernorm(x)); the mixer is Qwen3_5GatedDeltaNet
//     (linear_attn.*) or Qwen3_5Attention (self_attn.*) by layer_types.
//   - Qwen3_5RMSNorm (input/post_attention_layernorm, q_norm, k_norm,
//     model.norm): x·rsqrt(mean(x²)+eps)·(1 + weight), weight initialised to
//     zeros (NormOffset).
//   - Qwen3_5Attention: q_proj has 2·heads·head_dim outputs viewed as
//     [heads, 2·head_dim] and chunked: per head the query, then the gate
//     (AttnOutputGate); q_norm/k_norm per head; RoPE; softmax attention
//     scaled by head_dim**-0.5; attn_output · sigmoid(gate); o_proj.
//   - Qwen3_5TextRotaryEmbedding.compute_default_rope_parameters: dim =
//     int(head_dim · partial_rotary_factor), inv_freq = 1/base^(2i/dim);
//     apply_rotary_pos_emb rotates q[..., :dim] with rotate_half over that
//     slice and passes q[..., dim:] unchanged (RotaryDim). The multimodal
//     RoPE (mrope_section, interleaved) uses three position ids that are
//     equal for text tokens, so for text it is this RoPE.
//   - Qwen3_5GatedDeltaNet.forward: mixed_qkv = in_proj_qkv(x) (channels q
//     [nk·dk], k [nk·dk], v [nv·dv]); causal_conv1d_fn: depthwise
//     conv1d.weight [channels, 1, K] over the past K-1 positions and the
//     current one (left zero padding K-1), no bias, then silu (hidden_act);
//     z = in_proj_z(x) [nv·dv]; beta = sigmoid(in_proj_b(x)); g =
//     -exp(A_log) · softplus(in_proj_a(x) + dt_bias); value head j reads
//     query/key head j / (nv/nk) (repeat_interleave); the gated delta rule
//     (torch_recurrent_gated_delta_rule, use_qk_l2norm_in_kernel=True): q,
//     k ← x·rsqrt(Σx² + 1e-6) (l2norm, eps 1e-6), q ← q/sqrt(dk); per token
//     S ← S·exp(g); S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq with S [dk][dv] from
//     zero; then Qwen3_5RMSNormGated (linear_attn.norm, weight initialised to
//     ones, no offset): weight·x·rsqrt(mean(x²)+eps)·silu(z) per value
//     head; out_proj.
//   - Qwen3_5ForCausalLM._keys_to_ignore_on_load_unexpected: ^mtp.* and
//     ^model.visual.* (the vision tower and multi-token-prediction heads
//     are not part of the text model: IgnoredPrefixes).
func qwen35() Family {
	return Family{
		Name: "qwen3_5", Class: "Qwen3_5ForConditionalGeneration", Aliases: []string{"qwen3_5_text"},
		TextConfig: true,
		Defaults:   Defaults{KVHeads: 4, HeadDim: 256, MaxPos: 32768, Eps: 1e-6, Theta: 10000},
		Quirks:     qwen35Quirks(false),
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true, NormOffset: true, AttnOutputGate: true}
		},
		Fixture: Fixture{
			HeadDim: 32, // heads·head_dim ≠ hidden
			Config:  qwen35FixtureConfig(false),
			Nest:    qwen35Nest("qwen3_5_text"),
			Extra:   qwen35Vision,
		},
	}
}

// qwen35MoE declares Qwen3.5-MoE (qwen3_5_moe, Qwen3_5MoeForConditionalGeneration;
// text-only qwen3_5_moe_text, Qwen3_5MoeForCausalLM): qwen3_5's layers with
// every MLP a sparse MoE block. transformers
// models/qwen3_5_moe/configuration_qwen3_5_moe.py (Qwen3_5MoeTextConfig:
// num_key_value_heads 2, head_dim 256, moe_intermediate_size 512,
// shared_expert_intermediate_size 512, num_experts_per_tok 8, num_experts
// 256; no intermediate_size, decoder_sparse_step, norm_topk_prob or
// mlp_only_layers) and modeling_qwen3_5_moe.py:
//
//   - Qwen3_5MoeDecoderLayer: mlp = Qwen3_5MoeSparseMoeBlock on every layer;
//   - Qwen3_5MoeTopKRouter (mlp.gate.weight [experts, hidden]): softmax of
//     the logits in float32, torch.topk, then always divided by their sum;
//   - Qwen3_5MoeSparseMoeBlock.forward: Σ_topk w_e·expert_e(x) +
//     sigmoid(shared_expert_gate(x)) · shared_expert(x), shared_expert a
//     SiLU MLP of width shared_expert_intermediate_size, shared_expert_gate
//     a Linear [1, hidden] without bias.
//
// Experts: transformers holds them fused (Qwen3_5MoeExperts:
// mlp.experts.gate_up_proj [E, 2·I, hidden], gate rows first,
// mlp.experts.down_proj [E, hidden, I]), as the BF16 release stores them;
// quantized checkpoints (llm-compressor, one Linear per expert) store
// mlp.experts.{e}.{gate,up,down}_proj. qppl reads both (Spec.FusedExperts,
// quant/fused.go). Ties in top-k: see qwen3_moe.go.
func qwen35MoE() Family {
	return Family{
		Name: "qwen3_5_moe", Class: "Qwen3_5MoeForConditionalGeneration", Aliases: []string{"qwen3_5_moe_text"},
		TextConfig: true,
		Defaults:   Defaults{KVHeads: 2, HeadDim: 256, MaxPos: 32768, Eps: 1e-6, Theta: 10000, NoIntermediate: true},
		Quirks:     qwen35Quirks(true),
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true, NormOffset: true, AttnOutputGate: true}
		},
		MoENames: MoENames{Block: "mlp", Router: "gate", Gate: "gate_proj", Up: "up_proj", Down: "down_proj"},
		Fixture: Fixture{
			HeadDim: 32,
			Config:  qwen35FixtureConfig(true),
			Nest:    qwen35Nest("qwen3_5_moe_text"),
			Extra:   qwen35Vision,
		},
	}
}

// qwen35Vision is a token vision tower for the fixtures: real tensor names
// of Qwen3_5VisionModel (patch_embed, blocks.{i}, merger), tiny shapes.
var qwen35Vision = []TensorShape{
	{"model.visual.patch_embed.proj.weight", []int{8, 3, 2, 2, 2}},
	{"model.visual.patch_embed.proj.bias", []int{8}},
	{"model.visual.blocks.0.attn.qkv.weight", []int{24, 8}},
	{"model.visual.blocks.0.norm1.weight", []int{8}},
	{"model.visual.merger.linear_fc2.weight", []int{16, 32}},
}

func qwen35Quirks(moe bool) func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	return func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
		la := &checkpoint.LinearAttention{
			KeyHeads:   r.Positive("linear_num_key_heads", 16),
			ValueHeads: r.Positive("linear_num_value_heads", 32),
			KeyDim:     r.Positive("linear_key_head_dim", 128),
			ValueDim:   r.Positive("linear_value_head_dim", 128),
			ConvKernel: r.Positive("linear_conv_kernel_dim", 4),
		}
		interval := r.Positive("full_attention_interval", 4)
		types := r.Get("layer_types")
		// partial_rotary_factor: rope_parameters' (transformers v5), else
		// the legacy top-level key, else 0.25 (Qwen3_5TextConfig.__post_init__).
		c.PartialRotaryFactor = r.Float("partial_rotary_factor", 0.25)
		for _, key := range []string{"rope_parameters", "rope_scaling"} {
			if sp := r.Sub(key); sp != nil && sp.Has("partial_rotary_factor") {
				c.PartialRotaryFactor = sp.Float("partial_rotary_factor", c.PartialRotaryFactor)
				break
			}
		}
		c.AttnOutputGate = true
		c.IgnoredPrefixes = []checkpoint.IgnoredPrefix{{Prefix: "model.visual.", What: "vision tower"}, {Prefix: "mtp.", What: "multi-token prediction"}}
		if r.Err() != nil {
			return
		}
		if !(c.PartialRotaryFactor > 0 && c.PartialRotaryFactor <= 1) {
			r.Fail("partial_rotary_factor", "%v must be in (0, 1]", c.PartialRotaryFactor)
			return
		}
		if la.ValueHeads%la.KeyHeads != 0 {
			r.Fail("linear_num_value_heads", "%d is not a multiple of linear_num_key_heads %d", la.ValueHeads, la.KeyHeads)
			return
		}
		la.Layers = make([]bool, c.NumHiddenLayers)
		if types != nil {
			var names []string
			if err := jsonStrings(types, &names); err != nil || len(names) != c.NumHiddenLayers {
				r.Fail("layer_types", "want %d strings \"linear_attention\" or \"full_attention\"", c.NumHiddenLayers)
				return
			}
			for i, n := range names {
				switch n { // remap_legacy_layer_types: mamba → linear_attention, attention → full_attention
				case "linear_attention", "mamba":
					la.Layers[i] = true
				case "full_attention", "attention":
				default:
					r.Fail("layer_types", "layer %d: %q is neither \"linear_attention\" nor \"full_attention\"", i, n)
					return
				}
			}
		} else {
			for i := range la.Layers {
				la.Layers[i] = (i+1)%interval != 0
			}
		}
		c.LinearAttention = la
		if !moe {
			return
		}
		m := &checkpoint.MoE{
			Experts:            r.Positive("num_experts", 256),
			TopK:               r.Positive("num_experts_per_tok", 8),
			Intermediate:       r.Positive("moe_intermediate_size", 512),
			SharedIntermediate: r.Positive("shared_expert_intermediate_size", 512),
			NormTopK:           true, // Qwen3_5MoeTopKRouter always renormalises
		}
		if r.Err() != nil {
			return
		}
		if m.TopK > m.Experts {
			r.Fail("num_experts_per_tok", "%d exceeds num_experts %d", m.TopK, m.Experts)
			return
		}
		m.Sparse = make([]bool, c.NumHiddenLayers)
		for i := range m.Sparse {
			m.Sparse[i] = true
		}
		if c.IntermediateSize == 0 { // no dense MLP: the width only sizes buffers
			c.IntermediateSize = m.Intermediate
		}
		c.MoE = m
	}
}

// qwen35FixtureConfig: two layers, linear then full attention
// (full_attention_interval 2, layer_types written as the released configs
// do), 4 key heads and 8 value heads of 16 (grouped value heads), conv
// kernel 4, partial rotary 0.25 in rope_parameters with the mrope keys.
func qwen35FixtureConfig(moe bool) func(s FixtureShape) map[string]any {
	return func(s FixtureShape) map[string]any {
		types := make([]string, s.Layers)
		for i := range types {
			types[i] = "linear_attention"
			if (i+1)%2 == 0 {
				types[i] = "full_attention"
			}
		}
		c := map[string]any{
			"rms_norm_eps": 1e-6, "attention_bias": false, "full_attention_interval": 2, "layer_types": types,
			"linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
			"linear_num_key_heads": 2, "linear_num_value_heads": 4,
			"rope_parameters": map[string]any{
				"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
				"mrope_interleaved": true, "mrope_section": []int{11, 11, 10},
			},
			"attn_output_gate": true,
		}
		if moe {
			c["num_experts"], c["num_experts_per_tok"] = 8, 2
			c["moe_intermediate_size"], c["shared_expert_intermediate_size"] = 32, 64
			c["router_aux_loss_coef"], c["output_router_logits"] = 0.001, false
		}
		return c
	}
}

// qwen35Nest moves the text decoder's keys under text_config (with
// model_type textType), as the released multimodal configs are written;
// model_type, architectures, tie_word_embeddings, torch_dtype and the
// quantization settings stay at the top, with a vision_config.
func qwen35Nest(textType string) func(flat map[string]any) map[string]any {
	return func(flat map[string]any) map[string]any {
		top := map[string]any{
			"vision_config":  map[string]any{"depth": 1, "hidden_size": 8, "model_type": textType[:len(textType)-len("_text")], "out_hidden_size": 16},
			"image_token_id": 248056, "video_token_id": 248057,
		}
		text := map[string]any{"model_type": textType}
		for k, v := range flat {
			switch k {
			case "model_type", "architectures", "tie_word_embeddings", "torch_dtype", "quantization_config", "transformers_version":
				top[k] = v
			default:
				text[k] = v
			}
		}
		top["text_config"] = text
		return top
	}
}

func jsonStrings(v json.RawMessage, dst *[]string) error { return json.Unmarshal(v, dst) }

// FixtureInit returns the distribution fixtures draw a tensor from when it
// is not a Linear weight, bias or RMSNorm gain (ok false otherwise): the
// Gated DeltaNet's conv1d weight N(0, 0.5²) and A_log N(-1, 0.5²) (decays
// exp(g) of about 0.5–0.8 per token, so the recurrence carries state over
// many tokens); a MoE router 4× the usual scale.
func (s *Spec) FixtureInit(name string) (mean, sd float64, ok bool) {
	if s.GptOss != nil {
		return s.gptOssInit(name)
	}
	if s.LinearAttn == nil {
		return 0, 0, false
	}
	switch {
	case strings.HasSuffix(name, ".linear_attn.conv1d.weight"):
		return 0, 0.5, true
	case strings.HasSuffix(name, ".linear_attn.A_log"):
		return -1, 0.5, true
	case strings.HasSuffix(name, ".linear_attn.norm.weight"), strings.HasSuffix(name, ".linear_attn.dt_bias"):
		// Qwen3_5RMSNormGated multiplies by its weight (no offset, initialised
		// to ones), and dt_bias is initialised to ones: gains near 1, not
		// the (1 + w) norms' w near 0.
		return 1, 0.1, true
	case strings.HasSuffix(name, ".mlp.gate.weight"):
		// A router with decisive logits (4× a Linear's N(0, 1/hidden)):
		// near-ties between the k-th and next expert would let the bf16
		// rounding of a GPU run flip an expert choice (a different model,
		// not an inaccuracy; see issue 14's verify note on mixtral).
		return 0, 4 / math.Sqrt(float64(s.Hidden)), true
	}
	return 0, 0, false
}
