package reference

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
)

// Helpers shared by the tests of multimodal checkpoints
// (gemma3mm_test.go, gemma4mm_test.go, qwen35_test.go).

// writeMultimodal writes the random multimodal fixture of family, with
// vocabulary 300, its decoder under model.language_model. and its config
// under text_config: gemma3 is Gemma3ForConditionalGeneration (a SigLIP
// vision tower and the multimodal projector), gemma4 is
// Gemma4ForConditionalGeneration (vision and audio towers with their
// embedders; the decoder of the gemma4_text fixture: PLE, KV sharing,
// k = v, four layer kinds), qwen3_5 and qwen3_5_moe are
// Qwen3_5(Moe)ForConditionalGeneration (a vision tower).
func writeMultimodal(t *testing.T, family string) (string, fixtures.Options) {
	t.Helper()
	o, err := fixtures.Defaults(family)
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init = 300, fixtures.InitRandom
	dir := filepath.Join(t.TempDir(), family)
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir, o
}

// textOnlyLayout rewrites a multimodal checkpoint as the text-only one of
// the same decoder: the towers (every model.* tensor outside
// model.language_model.) dropped, the decoder's names moved to model.*,
// the other tensors (an untied lm_head) kept, and text_config as
// config.json, with architectures [causalLM] and the top level's keys
// named (where present) copied into it.
func textOnlyLayout(t *testing.T, dir, causalLM string, keys ...string) string {
	t.Helper()
	return rewrite(t, dir, func(w checkpoint.WriteTensor) *checkpoint.WriteTensor {
		switch {
		case strings.HasPrefix(w.Name, "model.language_model."):
			w.Name = strings.Replace(w.Name, "model.language_model.", "model.", 1)
		case strings.HasPrefix(w.Name, "model."):
			return nil
		}
		return &w
	}, nil, func(c map[string]any) map[string]any {
		text := c["text_config"].(map[string]any)
		text["architectures"] = []string{causalLM}
		for _, k := range keys {
			if v, ok := c[k]; ok {
				text[k] = v
			}
		}
		return text // model_type <family>_text
	})
}

// strayRefused adds each stray tensor (F32 [2]) in turn to the checkpoint
// at dir and checks that New refuses it as unused (checkpoint.ErrUnused),
// naming it and none of the ignored towers.
func strayRefused(t *testing.T, dir string, strays, towers []string) {
	t.Helper()
	keep := func(w checkpoint.WriteTensor) *checkpoint.WriteTensor { return &w }
	same := func(c map[string]any) map[string]any { return c }
	for _, stray := range strays {
		bad := rewrite(t, dir, keep, []checkpoint.WriteTensor{{Name: stray, DType: checkpoint.F32, Shape: []int{2}, Data: make([]byte, 8)}}, same)
		m, err := arch.OpenDir(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(m, Options{})
		m.Close()
		named := err != nil && strings.Contains(err.Error(), stray)
		for _, tower := range towers {
			if err != nil && strings.Contains(err.Error(), tower) {
				named = false
			}
		}
		if !errors.Is(err, checkpoint.ErrUnused) || !named {
			t.Errorf("%s: New: %v, want an unused-tensor refusal naming only it", stray, err)
		}
	}
}
