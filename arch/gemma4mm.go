package arch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// gemma4 declares Gemma4ForConditionalGeneration (model_type gemma4), the
// form the Gemma 4 checkpoints are published in: the gemma4_text decoder
// (gemma4.go) read from text_config with Gemma4TextConfig's defaults
// (Gemma4Config.__post_init__: text_config = Gemma4TextConfig(**text_config);
// configuration_gemma4.py at 351f643ab9f5), stored under
// model.language_model. (Gemma4Model.language_model; no older layout: no
// _checkpoint_conversion_mapping), the head tied to
// model.language_model.embed_tokens (Gemma4ForConditionalGeneration._tied_weights_keys;
// Gemma4Config.tie_word_embeddings True). modeling_gemma4.py at c308a309e651:
//
//   - Gemma4Model.__init__: vision_tower, embed_vision (a
//     Gemma4MultimodalEmbedder: embedding_projection), audio_tower and
//     embed_audio beside language_model: ignored, reported as such;
//   - Gemma4Model.forward without pixel values or audio features: the ids
//     equal to image_token_id, video_token_id or audio_token_id are
//     replaced by text_config.pad_token_id before the embedding, and the
//     per-layer inputs take the unscaled pad embedding row at those
//     positions; every other id reaches Gemma4TextModel as in
//     Gemma4ForCausalLM. qppl does not compute that substitution: a window
//     holding one of these ids is refused (Spec.CheckTokens);
//   - the masks are the causal and sliding ones (create_causal_mask_mapping
//     without mm_token_type_ids adds no bidirectional block, whatever
//     use_bidirectional_attention "vision" says);
//   - Gemma4ForConditionalGeneration.forward: lm_head, then
//     text_config.final_logit_softcapping as Gemma4ForCausalLM.
func gemma4() Family {
	text := gemma4Text()
	d := text.Defaults
	// Gemma4TextConfig's sizes, for a text_config that omits them.
	d.Vocab, d.Hidden, d.Intermediate, d.Layers, d.Heads = 262144, 2304, 9216, 30, 8
	f := text.Fixture
	f.Nest, f.Extra = gemma4Nest, gemma4Towers
	return Family{
		Name: "gemma4", Class: "Gemma4ForConditionalGeneration",
		TextConfig: true,
		Wrapper:    &Wrapper{Prefixes: []string{"model.language_model."}, TextTie: true, Top: gemma4Top},
		Defaults:   d,
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			text.Quirks(r, c)
			c.IgnoredPrefixes = gemma4Ignored
		},
		Layout:   text.Layout,
		MoENames: text.MoENames,
		Fixture:  f,
	}
}

// gemma4Ignored: Gemma4Model's towers and their embedders.
var gemma4Ignored = []checkpoint.IgnoredPrefix{
	{Prefix: "model.vision_tower.", What: "vision tower"},
	{Prefix: "model.embed_vision.", What: "vision embedder"},
	{Prefix: "model.audio_tower.", What: "audio tower"},
	{Prefix: "model.embed_audio.", What: "audio embedder"},
}

// gemma4Top reads Gemma4Config's placeholder token ids (image 258880,
// video 258884, audio 258881 by default) into Gemma4.Placeholders.
func gemma4Top(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	g, ok := c.FamilySettings.(*Gemma4)
	if !ok {
		return
	}
	g.Placeholders = nil
	for _, k := range []struct {
		key string
		def int
	}{{"image_token_id", 258880}, {"video_token_id", 258884}, {"audio_token_id", 258881}} {
		if r.IsNull(k.key) {
			continue
		}
		g.Placeholders = append(g.Placeholders, r.Int(k.key, k.def))
	}
}

// gemma4Towers are token towers for the fixtures: names of Gemma4Model's
// vision_tower (Gemma4VisionModel: encoder.layers.{i}.self_attn / mlp),
// embed_vision / embed_audio (Gemma4MultimodalEmbedder.embedding_projection)
// and audio_tower (Gemma4AudioModel: layers.{i}, output_proj), tiny shapes.
var gemma4Towers = []TensorShape{
	{"model.vision_tower.encoder.layers.0.self_attn.q_proj.weight", []int{8, 8}},
	{"model.vision_tower.encoder.layers.0.mlp.gate_proj.weight", []int{16, 8}},
	{"model.embed_vision.embedding_projection.weight", []int{16, 8}},
	{"model.audio_tower.layers.0.norm_out.weight", []int{8}},
	{"model.audio_tower.output_proj.weight", []int{12, 8}},
	{"model.audio_tower.output_proj.bias", []int{12}},
	{"model.embed_audio.embedding_projection.weight", []int{16, 12}},
}

// gemma4Nest writes the fixture's config as the released Gemma 4 configs
// are laid out: model_type gemma4, tie_word_embeddings and the
// multimodal token ids at the top, the decoder's keys (tie_word_embeddings
// too) under text_config (model_type gemma4_text), vision_config and
// audio_config.
func gemma4Nest(flat map[string]any) map[string]any {
	top := map[string]any{
		"vision_config": map[string]any{"model_type": "gemma4_vision", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
			"num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 4, "patch_size": 16, "pooling_kernel_size": 3},
		"audio_config": map[string]any{"model_type": "gemma4_audio", "hidden_size": 8, "num_hidden_layers": 1, "output_proj_dims": 12},
		"boi_token_id": 255999, "eoi_token_id": 258882, "image_token_id": 258880, "video_token_id": 258884,
		"boa_token_id": 256000, "eoa_token_index": 258883, "audio_token_id": 258881, "initializer_range": 0.02,
	}
	text := map[string]any{"model_type": "gemma4_text"}
	for k, v := range flat {
		switch k {
		case "model_type", "architectures", "torch_dtype", "dtype", "quantization_config", "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id":
			top[k] = v
		case "tie_word_embeddings": // Gemma4Config has its own; both say the same
			top[k], text[k] = v, v
		default:
			text[k] = v
		}
	}
	top["text_config"] = text
	return top
}

// Gemma4Tensor returns a Gemma 4 model-level tensor name (Gemma4PLEEmbedName,
// Gemma4PLEProjName, Gemma4PLENormName: "model.…") under the text
// decoder's prefix (model.language_model.… in a multimodal checkpoint).
func (s *Spec) Gemma4Tensor(name string) string {
	return s.prefix() + strings.TrimPrefix(name, "model.")
}

// CheckTokens refuses a window holding a multimodal placeholder token id
// (Gemma4.Placeholders): Gemma4Model.forward embeds those as
// text_config.pad_token_id, which qppl does not compute.
func (s *Spec) CheckTokens(toks []int32) error {
	if s.Gemma4 == nil || len(s.Gemma4.Placeholders) == 0 {
		return nil
	}
	for p, t := range toks {
		if slices.Contains(s.Gemma4.Placeholders, int(t)) {
			return fmt.Errorf("%w: %s: token %d at position %d is a multimodal placeholder (image_token_id, video_token_id or audio_token_id), which Gemma4Model.forward replaces by the pad token; not computed", ErrUnsupported, s.Name, t, p)
		}
	}
	return nil
}
