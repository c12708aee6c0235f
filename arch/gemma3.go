package arch

import "github.com/qppl/qppl/checkpoint"

// gemma3Text declares Gemma3ForCausalLM, the text-only Gemma 3 checkpoints
// (model_type gemma3_text; the multimodal "gemma3" wraps it in
// text_config and is not read here yet).
//
// The multimodal checkpoints (model_type "gemma3", architectures
// Gemma3ForConditionalGeneration; modeling_gemma3.py) hold this decoder
// under one of two prefixes: as published (google/gemma-3-*-it),
// language_model.model.{embed_tokens,layers.N.*,norm}, with
// vision_tower.vision_model.* and multi_modal_projector.{mm_input_projection_weight,
// mm_soft_emb_norm.weight} beside it and a tied head (or
// language_model.lm_head.weight); as saved by transformers ≥ 4.52,
// model.language_model.*, model.vision_tower.*, model.multi_modal_projector.*
// and lm_head.weight (Gemma3ForConditionalGeneration._checkpoint_conversion_mapping:
// ^language_model.model → model.language_model, ^vision_tower →
// model.vision_tower, ^multi_modal_projector → model.multi_modal_projector,
// ^language_model.lm_head → lm_head; Gemma3Model's own mapping
// language_model.model → language_model). Gemma3Model.forward feeds the
// text decoder the same embeddings when no pixel_values are given (the image
// token id is replaced by 0 first when it is ≥ vocab), so the text model's NLL is
// the multimodal model's on text.
//
// transformers: models/gemma3/configuration_gemma3.py (Gemma3TextConfig:
// num_key_value_heads 4, head_dim 256, hidden_activation
// "gelu_pytorch_tanh", max_position_embeddings 131072, rms_norm_eps 1e-6,
// rope_theta 1e6, tie_word_embeddings True, attention_bias False,
// query_pre_attn_scalar 256, sliding_window 4096, final_logit_softcapping
// None, attn_logit_softcapping None, rope_scaling None,
// rope_local_base_freq 10000; layer_types defaults to "sliding_attention"
// if (i + 1) % sliding_window_pattern (6) else "full_attention", so every
// sixth layer is global; use_bidirectional_attention, which qppl refuses)
// and models/gemma3/modeling_gemma3.py:
//
//   - everything of gemma2.go (Gemma3RMSNorm (1 + weight), GeGLU with the
//     tanh gelu, the four norms of Gemma3DecoderLayer, scaling =
//     query_pre_attn_scalar**-0.5, optional soft caps), except
//   - Gemma3TextScaledWordEmbedding: embed_tokens(ids) · embed_scale with
//     embed_scale = hidden_size**0.5 cast to the embedding weight's dtype
//     (bf16 in the releases); the float64 reference multiplies by
//     math.Sqrt(hidden) (Spec.EmbedScale);
//   - Gemma3Attention: q_norm and k_norm, Gemma3RMSNorm(head_dim), on q and
//     k per head before RoPE (Spec.QKNorm);
//   - Gemma3TextModel: rotary_emb uses rope_theta and rope_scaling (linear
//     factor 8 in the 4B–27B releases), rotary_emb_local rope_local_base_freq
//     with the default RoPE; Gemma3DecoderLayer takes the local one when
//     its attention is sliding (Spec.LayerInvFreq).
func gemma3Text() Family {
	return Family{
		Name: "gemma3_text", Class: "Gemma3ForCausalLM",
		Defaults: Defaults{KVHeads: 4, HeadDim: 256, MaxPos: 131072, Eps: 1e-6, Theta: 1e6, Tie: true},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.HiddenAct = r.Str("hidden_activation", "gelu_pytorch_tanh")
			c.QueryPreAttnScalar = r.Float("query_pre_attn_scalar", 256)
			c.AttnLogitSoftcap = r.Float("attn_logit_softcapping", 0)
			c.FinalLogitSoftcap = r.Float("final_logit_softcapping", 0)
			c.RopeLocalTheta = r.Float("rope_local_base_freq", 10000)
			if r.Bool("use_bidirectional_attention", false) {
				r.Fail("use_bidirectional_attention", "bidirectional attention (an embedding model) is not a causal LM")
			}
			if r.Get("rope_parameters") != nil {
				r.Fail("rope_parameters", "per-layer-type rope_parameters are not supported; use rope_theta, rope_scaling and rope_local_base_freq")
			}
			pattern := r.Positive("sliding_window_pattern", 6)
			gemmaWindows(r, c, func(i int) bool { return (i+1)%pattern != 0 })
		},
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true, NormOffset: true, EmbedScale: true, SandwichNorms: true}
		},
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 24,
			// Gemma-3-4B's keys (linear rope scaling factor 8 on the global
			// layers, local base 10000) with a window (32) shorter than the
			// test contexts and a pattern of 2 so that a 2-layer fixture
			// has a sliding and a global layer.
			Config: func(FixtureShape) map[string]any {
				return map[string]any{
					"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
					"rope_scaling":      map[string]any{"rope_type": "linear", "factor": 8.0},
					"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 20,
					"sliding_window": 32, "sliding_window_pattern": 2,
					"attn_logit_softcapping": nil, "final_logit_softcapping": nil,
					"attention_bias": false, "cache_implementation": "hybrid",
				}
			},
		},
	}
}
