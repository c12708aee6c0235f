package arch

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// gemma3MM parses a multimodal gemma3 config.json with the given
// text_config (and top-level extras).
func gemma3MM(t *testing.T, text map[string]any, top map[string]any) (*Spec, error) {
	t.Helper()
	c := map[string]any{"model_type": "gemma3", "architectures": []string{"Gemma3ForConditionalGeneration"},
		"eos_token_id": []int{1, 106}, "image_token_index": 262144, "mm_tokens_per_image": 256,
		"vision_config": map[string]any{"model_type": "siglip_vision_model", "hidden_size": 1152}}
	if text != nil {
		c["text_config"] = text
	}
	for k, v := range top {
		c[k] = v
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(js, "config.json")
	if err != nil {
		return nil, err
	}
	return For(cfg)
}

// TestGemma3TextConfigDefaults: each key a multimodal gemma3 text_config
// may omit takes Gemma3TextConfig's constructor default, and is read when
// given (every row's given value differs from its default, so a default
// read in place of the key, or the key ignored, fails). The released
// google/gemma-3-4b-it text_config (hidden_size, intermediate_size,
// num_hidden_layers, rope_scaling, sliding_window only) resolves to the
// 4B model.
func TestGemma3TextConfigDefaults(t *testing.T) {
	full := map[string]any{"model_type": "gemma3_text", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
		"num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
		"max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 5e5, "query_pre_attn_scalar": 20,
		"sliding_window": 64, "sliding_window_pattern": 3, "rope_local_base_freq": 500.0, "tie_word_embeddings": false,
		"attn_logit_softcapping": 40.0, "hidden_activation": "gelu_pytorch_tanh"}
	rows := []struct {
		key           string
		get           func(*Spec) float64
		given, absent float64
	}{
		{"vocab_size", func(s *Spec) float64 { return float64(s.Vocab) }, 300, 262208},
		{"hidden_size", func(s *Spec) float64 { return float64(s.Hidden) }, 64, 2304},
		{"intermediate_size", func(s *Spec) float64 { return float64(s.Intermediate) }, 96, 9216},
		{"num_hidden_layers", func(s *Spec) float64 { return float64(s.Layers) }, 12, 26},
		{"num_attention_heads", func(s *Spec) float64 { return float64(s.Heads) }, 4, 8},
		{"num_key_value_heads", func(s *Spec) float64 { return float64(s.KVHeads) }, 2, 4},
		{"head_dim", func(s *Spec) float64 { return float64(s.HeadDim) }, 32, 256},
		{"max_position_embeddings", func(s *Spec) float64 { return float64(s.Config.MaxPositionEmbeddings) }, 4096, 131072},
		{"rms_norm_eps", func(s *Spec) float64 { return s.Eps }, 1e-5, 1e-6},
		{"rope_theta", func(s *Spec) float64 { return s.Config.RopeTheta }, 5e5, 1e6},
		{"query_pre_attn_scalar", func(s *Spec) float64 { return s.AttnScale }, 1 / math.Sqrt(20), 1.0 / 16},
		{"sliding_window", func(s *Spec) float64 { return float64(s.Window(0)) }, 64, 4096},
		// layer 2 is global every 3rd layer, sliding with the default pattern 6
		{"sliding_window_pattern", func(s *Spec) float64 { return float64(s.Window(2)) }, 0, 64},
		{"rope_local_base_freq", func(s *Spec) float64 { return s.LocalRopeTheta }, 500, 10000},
		{"tie_word_embeddings", func(s *Spec) float64 { return b2f(s.TiedHead) }, 0, 1},
		{"attn_logit_softcapping", func(s *Spec) float64 { return s.AttnSoftcap }, 40, 0},
		{"hidden_activation", func(s *Spec) float64 { return b2f(s.GeluTanh) }, 1, 1},
	}
	for _, r := range rows {
		text := map[string]any{}
		for k, v := range full {
			text[k] = v
		}
		top := map[string]any{"tie_word_embeddings": false} // agreeing with text_config
		s, err := gemma3MM(t, text, top)
		if err != nil {
			t.Fatalf("%s given: %v", r.key, err)
		}
		if got := r.get(s); got != r.given {
			t.Errorf("%s given: %v, want %v", r.key, got, r.given)
		}
		delete(text, r.key)
		if r.key == "sliding_window" {
			delete(text, "sliding_window_pattern") // the 6th layer is global, layer 0 slides
		}
		if r.key == "tie_word_embeddings" {
			top = nil // both absent: True
		}
		if s, err = gemma3MM(t, text, top); err != nil {
			t.Fatalf("%s absent: %v", r.key, err)
		}
		if got := r.get(s); got != r.absent {
			t.Errorf("%s absent: %v, want Gemma3TextConfig's %v", r.key, got, r.absent)
		}
	}

	// google/gemma-3-4b-it's text_config as released.
	s, err := gemma3MM(t, map[string]any{"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
		"num_hidden_layers": 34, "rope_scaling": map[string]any{"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Vocab != 262208 || s.Heads != 8 || s.KVHeads != 4 || s.HeadDim != 256 || !s.TiedHead:
		t.Errorf("4B: vocab %d, heads %d/%d, head_dim %d, tied %v", s.Vocab, s.Heads, s.KVHeads, s.HeadDim, s.TiedHead)
	case s.Window(0) != 1024 || s.Window(5) != 0 || s.Window(6) != 1024 || !s.LocalRope(0) || s.LocalRope(5):
		t.Errorf("4B: windows %d %d %d", s.Window(0), s.Window(5), s.Window(6))
	case s.Config.RopeScaling == nil || s.Config.RopeScaling.Factor != 8 || s.Config.EOSTokenID != 1:
		t.Errorf("4B: rope %+v, eos %d", s.Config.RopeScaling, s.Config.EOSTokenID)
	case s.Prefix != "model.language_model." || s.EmbedTensor() != "model.language_model.embed_tokens.weight" || s.Layer(3).Q != "model.language_model.layers.3.self_attn.q_proj":
		t.Errorf("4B: names %q %q", s.Prefix, s.Layer(3).Q)
	case len(s.Ignored) != 4:
		t.Errorf("4B: ignored prefixes %+v", s.Ignored)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestGemma3Refusals: what the multimodal reading refuses, naming the key.
func TestGemma3Refusals(t *testing.T) {
	text := map[string]any{"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "vocab_size": 300, "num_attention_heads": 4}
	with := func(k string, v any) map[string]any {
		out := map[string]any{k: v}
		for a, b := range text {
			out[a] = b
		}
		return out
	}
	for _, c := range []struct {
		name      string
		text, top map[string]any
		key       string
	}{
		// Gemma3Config(text_config=None) builds the default text model.
		{"no text_config", nil, text, "text_config"},
		// Gemma3ForConditionalGeneration.forward applies no final cap.
		{"final cap", with("final_logit_softcapping", 30.0), nil, "final_logit_softcapping"},
		// tie_weights reads text_config's key: a disagreeing top level is ambiguous.
		{"tie disagrees", text, map[string]any{"tie_word_embeddings": false}, "tie_word_embeddings"},
		// text_config untied, the wrapper's key absent (True): ambiguous too.
		{"tie only in text_config", with("tie_word_embeddings", false), nil, "tie_word_embeddings"},
		{"bidirectional", with("use_bidirectional_attention", true), nil, "use_bidirectional_attention"},
	} {
		_, err := gemma3MM(t, c.text, c.top)
		if !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want a config error naming %s", c.name, err, c.key)
		}
	}
	// A top-level tie_word_embeddings that agrees is accepted.
	if _, err := gemma3MM(t, text, map[string]any{"tie_word_embeddings": true}); err != nil {
		t.Errorf("agreeing tie_word_embeddings: %v", err)
	}
	if s, err := gemma3MM(t, with("tie_word_embeddings", false), map[string]any{"tie_word_embeddings": false}); err != nil || s.TiedHead {
		t.Errorf("untied in both: %v, tied %v", err, s != nil && s.TiedHead)
	}
}
