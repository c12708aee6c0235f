package arch

import "github.com/qppl/qppl/checkpoint"

// gemma3Text declares Gemma3ForCausalLM, the text-only Gemma 3 checkpoints
// (model_type gemma3_text); gemma3 below is the multimodal wrapper.
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
		Defaults: gemma3TextDefaults,
		Quirks:   gemma3TextQuirks,
		Layout:   gemma3Layout,
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 24,
			Config:  gemma3FixtureConfig,
		},
	}
}

// gemma3TextDefaults are Gemma3TextConfig's constructor defaults, the
// sizes included: the released multimodal configs' text_config omits
// vocab_size, num_attention_heads, num_key_value_heads, head_dim and more
// (google/gemma-3-4b-it gives hidden_size, intermediate_size,
// num_hidden_layers, rope_scaling and sliding_window only).
var gemma3TextDefaults = Defaults{KVHeads: 4, HeadDim: 256, MaxPos: 131072, Eps: 1e-6, Theta: 1e6, Tie: true,
	Vocab: 262208, Hidden: 2304, Intermediate: 9216, Layers: 26, Heads: 8}

func gemma3Layout(c *checkpoint.Config) Layout {
	return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, QKNorm: true, NormOffset: true, EmbedScale: true, SandwichNorms: true}
}

func gemma3TextQuirks(r *checkpoint.ConfigReader, c *checkpoint.Config) {
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
}

// gemma3FixtureConfig: Gemma-3-4B's keys (linear rope scaling factor 8 on
// the global layers, local base 10000) with a window (32) shorter than the
// test contexts and a pattern of 2 so that a 2-layer fixture has a sliding
// and a global layer.
func gemma3FixtureConfig(FixtureShape) map[string]any {
	return map[string]any{
		"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
		"rope_scaling":      map[string]any{"rope_type": "linear", "factor": 8.0},
		"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 20,
		"sliding_window": 32, "sliding_window_pattern": 2,
		"attn_logit_softcapping": nil, "final_logit_softcapping": nil,
		"attention_bias": false, "cache_implementation": "hybrid",
	}
}

// gemma3 declares Gemma3ForConditionalGeneration (model_type gemma3), the
// form Gemma 3 4B, 12B and 27B and their quantized versions are published
// in: the gemma3_text decoder read from text_config with Gemma3TextConfig's
// defaults (Gemma3Config.__init__: text_config = Gemma3TextConfig(**text_config);
// configuration_gemma3.py), under model.language_model. or, in the older
// saves, language_model.model. (Wrapper.Prefixes; see the comment of
// gemma3Text), the head tied (Gemma3ForConditionalGeneration._tied_weights_keys
// ["lm_head.weight"], tie_word_embeddings True by default). The SigLIP
// vision tower and the multimodal projector are ignored, reported as such.
//
// modeling_gemma3.py (transformers at f14d0cbc) Gemma3ForConditionalGeneration.forward:
// logits = lm_head(hidden_states), with no final_logit_softcapping (only
// Gemma3ForCausalLM applies the text config's): a text_config that sets
// one is refused rather than guessed (the released ones leave it None).
func gemma3() Family {
	return Family{
		Name: "gemma3", Class: "Gemma3ForConditionalGeneration",
		TextConfig: true,
		Wrapper:    &Wrapper{Prefixes: []string{"model.language_model.", "language_model.model."}, TextTie: true},
		Defaults:   gemma3TextDefaults,
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			gemma3TextQuirks(r, c)
			if c.FinalLogitSoftcap != 0 {
				r.Fail("final_logit_softcapping", "%v: Gemma3ForConditionalGeneration.forward applies no final soft-capping (Gemma3ForCausalLM does): refused as ambiguous", c.FinalLogitSoftcap)
			}
			c.IgnoredPrefixes = gemma3Ignored
		},
		Layout: gemma3Layout,
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 24,
			Config:  gemma3FixtureConfig,
			Nest:    gemma3Nest,
			Extra:   gemma3Vision,
		},
	}
}

// gemma3Ignored: Gemma3Model.vision_tower (SiglipVisionModel) and
// multi_modal_projector, under both layouts.
var gemma3Ignored = []checkpoint.IgnoredPrefix{
	{Prefix: "model.vision_tower.", What: "vision tower"},
	{Prefix: "model.multi_modal_projector.", What: "multimodal projector"},
	{Prefix: "vision_tower.", What: "vision tower"},
	{Prefix: "multi_modal_projector.", What: "multimodal projector"},
}

// gemma3Vision is a token SigLIP tower for the fixtures: real tensor names
// (SiglipVisionEmbeddings, SiglipEncoderLayer, post_layernorm,
// Gemma3MultiModalProjector), tiny shapes (vision hidden 8, patch 14).
var gemma3Vision = []TensorShape{
	{"model.vision_tower.vision_model.embeddings.patch_embedding.weight", []int{8, 3, 14, 14}},
	{"model.vision_tower.vision_model.embeddings.patch_embedding.bias", []int{8}},
	{"model.vision_tower.vision_model.embeddings.position_embedding.weight", []int{4, 8}},
	{"model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight", []int{8, 8}},
	{"model.vision_tower.vision_model.encoder.layers.0.layer_norm1.weight", []int{8}},
	{"model.vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", []int{16, 8}},
	{"model.vision_tower.vision_model.post_layernorm.weight", []int{8}},
	{"model.multi_modal_projector.mm_input_projection_weight", []int{8, 16}},
	{"model.multi_modal_projector.mm_soft_emb_norm.weight", []int{8}},
}

// gemma3Nest writes the fixture's config as google/gemma-3-4b-it's is
// laid out: model_type gemma3, the decoder's keys (tie_word_embeddings
// included) under text_config with model_type gemma3_text, a
// vision_config (siglip_vision_model) and the image token keys.
func gemma3Nest(flat map[string]any) map[string]any {
	top := map[string]any{
		"vision_config": map[string]any{"hidden_size": 8, "image_size": 28, "intermediate_size": 16, "model_type": "siglip_vision_model",
			"num_attention_heads": 2, "num_hidden_layers": 1, "patch_size": 14, "vision_use_head": false},
		"boi_token_index": 255999, "eoi_token_index": 256000, "image_token_index": 262144,
		"mm_tokens_per_image": 4, "initializer_range": 0.02,
	}
	text := map[string]any{"model_type": "gemma3_text"}
	for k, v := range flat {
		switch k {
		case "model_type", "architectures", "torch_dtype", "quantization_config", "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id":
			top[k] = v
		case "tie_word_embeddings": // the released configs leave it out (True); an untied fixture says so at both levels
			text[k] = v
			if v == false {
				top[k] = v
			}
		default:
			text[k] = v
		}
	}
	top["text_config"] = text
	return top
}
