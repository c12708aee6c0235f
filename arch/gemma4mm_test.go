package arch

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// TestGemma4MultimodalConfig: the multimodal gemma4 wrapper reads its
// text_config with Gemma4TextConfig's defaults (sizes included: table
// rows, each given value different from the default), stores the decoder
// under model.language_model., reads the placeholder ids at the top level
// (Gemma4Config defaults, null: none) and refuses a missing text_config or
// a tie_word_embeddings the two levels disagree on.
func TestGemma4MultimodalConfig(t *testing.T) {
	parse := func(text, top map[string]any) (*Spec, error) {
		c := map[string]any{"model_type": "gemma4", "architectures": []string{"Gemma4ForConditionalGeneration"}}
		if text != nil {
			c["text_config"] = text
		}
		for k, v := range top {
			c[k] = v
		}
		js, _ := json.Marshal(c)
		cfg, err := ParseConfig(js, "config.json")
		if err != nil {
			return nil, err
		}
		return For(cfg)
	}
	full := map[string]any{"model_type": "gemma4_text", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
		"num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
		"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 300}
	rows := []struct {
		key           string
		get           func(*Spec) int
		given, absent int
	}{
		{"vocab_size", func(s *Spec) int { return s.Vocab }, 300, 262144},
		{"hidden_size", func(s *Spec) int { return s.Hidden }, 64, 2304},
		{"intermediate_size", func(s *Spec) int { return s.Intermediate }, 96, 9216},
		{"num_hidden_layers", func(s *Spec) int { return s.Layers }, 6, 30},
		{"num_attention_heads", func(s *Spec) int { return s.Heads }, 4, 8},
		{"num_key_value_heads", func(s *Spec) int { return s.KVHeads }, 2, 4},
		{"head_dim", func(s *Spec) int { return s.HeadDim }, 16, 256},
		{"global_head_dim", func(s *Spec) int { return s.Gemma4.GlobalHeadDim }, 32, 512},
		{"hidden_size_per_layer_input", func(s *Spec) int { return s.Gemma4.PLE }, 8, 256},
	}
	for _, r := range rows {
		text := map[string]any{}
		for k, v := range full {
			text[k] = v
		}
		s, err := parse(text, nil)
		if err != nil {
			t.Fatalf("%s given: %v", r.key, err)
		}
		if got := r.get(s); got != r.given {
			t.Errorf("%s given: %d, want %d", r.key, got, r.given)
		}
		delete(text, r.key)
		if r.key == "vocab_size" || r.key == "hidden_size_per_layer_input" {
			delete(text, "vocab_size_per_layer_input") // 262144 ≥ any vocab
		}
		if s, err = parse(text, nil); err != nil {
			t.Fatalf("%s absent: %v", r.key, err)
		}
		if got := r.get(s); got != r.absent {
			t.Errorf("%s absent: %d, want Gemma4TextConfig's %d", r.key, got, r.absent)
		}
	}
	s, err := parse(full, map[string]any{"video_token_id": nil, "audio_token_id": 17})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Prefix != "model.language_model." || s.Gemma4Tensor(Gemma4PLEEmbedName) != "model.language_model.embed_tokens_per_layer.weight" || s.FinalNormTensor() != "model.language_model.norm.weight":
		t.Errorf("names under %q: %s", s.Prefix, s.Gemma4Tensor(Gemma4PLEEmbedName))
	case !slices.Equal(s.Gemma4.Placeholders, []int{258880, 17}) || !s.TiedHead || len(s.Ignored) != 4:
		t.Errorf("placeholders %v, tied %v, ignored %v", s.Gemma4.Placeholders, s.TiedHead, s.Ignored)
	case s.CheckTokens([]int32{1, 2, 16}) != nil || !errors.Is(s.CheckTokens([]int32{1, 17}), ErrUnsupported):
		t.Errorf("CheckTokens: %v / %v", s.CheckTokens([]int32{1, 2, 16}), s.CheckTokens([]int32{1, 17}))
	}
	flat := map[string]any{}
	for k, v := range full {
		if k != "model_type" {
			flat[k] = v // the decoder's keys at the top level
		}
	}
	for _, c := range []struct {
		name      string
		text, top map[string]any
	}{
		{"no text_config", nil, flat},
		{"tie disagrees", full, map[string]any{"tie_word_embeddings": false}},
	} {
		if _, err := parse(c.text, c.top); !errors.Is(err, checkpoint.ErrConfig) {
			t.Errorf("%s: %v, want a config error", c.name, err)
		} else if want := map[string]string{"no text_config": "text_config", "tie disagrees": "tie_word_embeddings"}[c.name]; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it named %s", c.name, err, want)
		}
	}
}
