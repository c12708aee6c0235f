package reference

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
)

// TestGemma4TextOnlyEqualsMultimodal: the multimodal gemma4 checkpoint
// gives bit for bit the log-probabilities of the gemma4_text checkpoint of
// the same decoder (Gemma4ForCausalLM) at a context longer than the
// window, and equals the oracle's own multimodal reading to 1e-9.
func TestGemma4TextOnlyEqualsMultimodal(t *testing.T) {
	dir, o := writeMultimodal(t, "gemma4")
	flat := textOnlyLayout(t, dir, "Gemma4ForCausalLM", "torch_dtype", "bos_token_id", "eos_token_id", "quantization_config")
	toks := randomTokens(70, o.Vocab, 9)
	b1, m1 := openBackend(t, dir)
	b2, m2 := openBackend(t, flat)
	if m1.Config.TextPrefix != "model.language_model." || m2.Config.TextPrefix != "" || m2.Config.ModelType != "gemma4_text" {
		t.Fatalf("prefixes %q, %q (%s)", m1.Config.TextPrefix, m2.Config.TextPrefix, m2.Config.ModelType)
	}
	a := allLogProbs(t, b1, toks)
	sameBits(t, "multimodal vs text-only", a, allLogProbs(t, b2, toks))
	want, err := oracle.LogProbs(m1.Config, m1.ReadFloat64, toks, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(a, want); d > 1e-9 {
		t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
	}
}

// TestGemma4TowersIgnored: the vision and audio towers and their
// embedders are ignored on purpose and counted; a tensor outside them that
// the forward pass does not read still stops the run, named; a window
// holding a multimodal placeholder id (which Gemma4Model.forward embeds as
// the pad token) is refused, naming it.
func TestGemma4TowersIgnored(t *testing.T) {
	dir, _ := writeMultimodal(t, "gemma4")
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := m.IgnoredTensors(m.Config.IgnoredPrefixes)
	want := []checkpoint.Ignored{{Prefix: "model.vision_tower.", What: "vision tower", Tensors: 2}, {Prefix: "model.embed_vision.", What: "vision embedder", Tensors: 1},
		{Prefix: "model.audio_tower.", What: "audio tower", Tensors: 3}, {Prefix: "model.embed_audio.", What: "audio embedder", Tensors: 1}}
	if len(g) != len(want) {
		t.Fatalf("ignored %+v, want %+v", g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("ignored[%d] %+v, want %+v", i, g[i], want[i])
		}
	}
	if _, err := New(m, Options{}); err != nil {
		t.Errorf("multimodal checkpoint refused: %v", err)
	}
	m.Close()
	keep := func(w checkpoint.WriteTensor) *checkpoint.WriteTensor { return &w }
	strayRefused(t, dir, []string{
		"model.language_model.layers.0.router.proj.weight", // a MoE layer's router in a dense config
		"model.video_tower.patch.weight",                   // a tower Gemma4Model does not have
		"model.layers.0.self_attn.q_proj.weight",           // a text-only name beside the prefixed ones
	}, []string{"vision_tower", "audio_tower"})
	// image_token_id inside the fixture's vocabulary: a window holding it
	// is refused, one without it is scored.
	placed := rewrite(t, dir, keep, nil, func(c map[string]any) map[string]any { c["image_token_id"] = 7; return c })
	b, _ := openBackend(t, placed)
	toks := randomTokens(40, 300, 4)
	for i := range toks {
		if toks[i] == 7 {
			toks[i] = 8
		}
	}
	if _, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{}); err != nil {
		t.Fatalf("window without placeholders: %v", err)
	}
	toks[20] = 7
	_, err = b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
	if !errors.Is(err, arch.ErrUnsupported) || !strings.Contains(err.Error(), "token 7 at position 20") {
		t.Errorf("window with image_token_id: %v, want a refusal naming token 7 at position 20", err)
	}
}

// TestGemma4QuantizedMultimodal: W4A16 and W8A8 quantizations of the
// multimodal gemma4 fixture whose compressed-tensors ignore list names the
// towers and embedders (re: patterns, as llm-compressor's multimodal
// recipes write them) equal the oracle to 1e-9, the towers reported
// ignored.
func TestGemma4QuantizedMultimodal(t *testing.T) {
	dir, o := writeMultimodal(t, "gemma4")
	toks := randomTokens(70, o.Vocab, 5)
	for _, scheme := range []string{"W4A16-G32", "W8A8"} {
		q := filepath.Join(t.TempDir(), scheme)
		if err := quantizer.Quantize(dir, q, scheme, quantizer.Options{Seed: 3}); err != nil {
			t.Fatal(err)
		}
		cur := rewrite(t, q, func(w checkpoint.WriteTensor) *checkpoint.WriteTensor { return &w }, nil, func(c map[string]any) map[string]any {
			qc := c["quantization_config"].(map[string]any)
			qc["ignore"] = append(qc["ignore"].([]any), "re:.*vision_tower.*", "re:.*audio_tower.*", "re:.*embed_vision.*", "re:.*embed_audio.*")
			return c
		})
		b, m := openBackend(t, cur)
		if g := m.IgnoredTensors(m.Config.IgnoredPrefixes); len(g) != 4 {
			t.Errorf("%s: ignored %+v", scheme, g)
		}
		got := allLogProbs(t, b, toks)
		get, opt := quantOracle(t, m)
		want, err := oracle.LogProbs(m.Config, get, toks, opt)
		if err != nil {
			t.Fatal(err)
		}
		if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
			t.Errorf("%s: max |reference - oracle| = %g at pos %d id %d", scheme, d, p, v)
		}
	}
}
