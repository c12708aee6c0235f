package reference

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// gemma3Legacy rewrites a multimodal gemma3 checkpoint with the names of
// the checkpoints saved before transformers 4.52 (google/gemma-3-*-it):
// language_model.model.*, vision_tower.*, multi_modal_projector.*.
func gemma3Legacy(t *testing.T, dir string, cfg func(map[string]any) map[string]any) string {
	t.Helper()
	if cfg == nil {
		cfg = func(c map[string]any) map[string]any { return c }
	}
	return rewrite(t, dir, func(w checkpoint.WriteTensor) *checkpoint.WriteTensor {
		for _, r := range [][2]string{{"model.language_model.", "language_model.model."}, {"model.vision_tower.", "vision_tower."}, {"model.multi_modal_projector.", "multi_modal_projector."}} {
			if strings.HasPrefix(w.Name, r[0]) {
				w.Name = r[1] + strings.TrimPrefix(w.Name, r[0])
				break
			}
		}
		return &w
	}, nil, cfg)
}

func sameBits(t *testing.T, what string, a, b [][]float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d positions", what, len(a), len(b))
	}
	for p := range a {
		for v := range a[p] {
			if math.Float64bits(a[p][v]) != math.Float64bits(b[p][v]) {
				t.Fatalf("%s: position %d id %d: %v vs %v", what, p, v, a[p][v], b[p][v])
			}
		}
	}
}

// TestGemma3TextOnlyEqualsMultimodal: the multimodal gemma3 checkpoint, in
// both of its layouts, gives bit for bit the log-probabilities of the
// gemma3_text checkpoint of the same decoder (Gemma3Model.forward without
// pixel_values feeds the text model its own embeddings), at a context
// longer than the sliding window (32).
func TestGemma3TextOnlyEqualsMultimodal(t *testing.T) {
	dir, o := writeMultimodal(t, "gemma3")
	flat := textOnlyLayout(t, dir, "Gemma3ForCausalLM", "torch_dtype", "bos_token_id", "eos_token_id", "quantization_config")
	legacy := gemma3Legacy(t, dir, nil)
	toks := randomTokens(70, o.Vocab, 9)
	b1, m1 := openBackend(t, dir)
	b2, m2 := openBackend(t, flat)
	b3, m3 := openBackend(t, legacy)
	if m1.Config.TextPrefix != "model.language_model." || m2.Config.TextPrefix != "" || m2.Config.ModelType != "gemma3_text" || m3.Config.TextPrefix != "language_model.model." {
		t.Fatalf("prefixes %q, %q (%s), %q", m1.Config.TextPrefix, m2.Config.TextPrefix, m2.Config.ModelType, m3.Config.TextPrefix)
	}
	a := allLogProbs(t, b1, toks)
	sameBits(t, "multimodal vs text-only", a, allLogProbs(t, b2, toks))
	sameBits(t, "multimodal vs language_model.model. layout", a, allLogProbs(t, b3, toks))
	// and against the independent oracle (the multimodal reading of its own)
	want, err := oracle.LogProbs(m1.Config, m1.ReadFloat64, toks, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(a, want); d > 1e-9 {
		t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
	}
}

// TestGemma3TowersIgnored: the vision tower and the multimodal projector
// are ignored on purpose and counted, in both layouts; a tensor outside
// them that the forward pass does not read still stops the run, named.
func TestGemma3TowersIgnored(t *testing.T) {
	dir, _ := writeMultimodal(t, "gemma3")
	for _, c := range []struct {
		dir, vision, proj string
	}{
		{dir, "model.vision_tower.", "model.multi_modal_projector."},
		{gemma3Legacy(t, dir, nil), "vision_tower.", "multi_modal_projector."},
	} {
		m, err := arch.OpenDir(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		g := m.IgnoredTensors(m.Config.IgnoredPrefixes)
		if len(g) != 2 || g[0].Prefix != c.vision || g[0].What != "vision tower" || g[0].Tensors != 7 ||
			g[1].Prefix != c.proj || g[1].What != "multimodal projector" || g[1].Tensors != 2 {
			t.Errorf("%s: ignored %+v, want 7 vision tower and 2 projector tensors", c.vision, g)
		}
		if _, err := New(m, Options{}); err != nil {
			t.Errorf("%s: multimodal checkpoint refused: %v", c.vision, err)
		}
		m.Close()
	}
	strayRefused(t, dir, []string{
		"model.language_model.layers.0.self_attn.qkv_proj.weight", // a decoder tensor of another architecture
		"model.audio_tower.conv.weight",                           // a tower gemma3 does not have
		"language_model.lm_head.weight",                           // an old-layout head beside the tied embedding
	}, []string{"vision_tower"})
	// An untied head in the older layout is refused before any work (its
	// language_model.lm_head is not read).
	untied := gemma3Legacy(t, dir, func(c map[string]any) map[string]any {
		c["text_config"].(map[string]any)["tie_word_embeddings"] = false
		c["tie_word_embeddings"] = false
		return c
	})
	if _, err := arch.OpenDir(untied); !errors.Is(err, checkpoint.ErrConfig) || !strings.Contains(err.Error(), "tie_word_embeddings") {
		t.Errorf("untied older layout: %v, want a config refusal naming tie_word_embeddings", err)
	}
}

// TestGemma3QuantizedMultimodal: quantizations of the multimodal fixture
// whose configs name the towers as their tools write them — compressed-
// tensors W4A16 and W8A8 with re: patterns in ignore (llm-compressor's
// Gemma 3 recipe), AutoAWQ with modules_to_not_convert, AutoFP8 with
// ignored_layers, GPTQ with none (the towers
// simply stay unquantized) — in the current and the older layout, equal
// the oracle to 1e-9 and report the towers as ignored; the older layout
// equals the current one bit for bit.
func TestGemma3QuantizedMultimodal(t *testing.T) {
	dir, o := writeMultimodal(t, "gemma3")
	toks := randomTokens(70, o.Vocab, 5)
	for _, sc := range []struct {
		scheme, key string
		towers      []any
		group       int
	}{
		{"W4A16-G32", "ignore", []any{"re:.*vision_tower.*", "re:.*multi_modal_projector.*"}, 0},
		{"W8A8", "ignore", []any{"re:.*vision_tower.*", "re:.*multi_modal_projector.*"}, 0},
		{"AWQ", "modules_to_not_convert", []any{"vision_tower", "multi_modal_projector"}, 32},
		{"AUTOFP8", "ignored_layers", []any{"model.vision_tower", "model.multi_modal_projector"}, 0},
		{"GPTQ", "", nil, 32},
	} {
		scheme := sc.scheme
		q := filepath.Join(t.TempDir(), scheme)
		if err := quantizer.Quantize(dir, q, scheme, quantizer.Options{Seed: 3, GroupSize: sc.group}); err != nil {
			t.Fatal(err)
		}
		withIgnore := func(c map[string]any) map[string]any {
			if sc.key != "" {
				qc := c["quantization_config"].(map[string]any)
				old, _ := qc[sc.key].([]any)
				qc[sc.key] = append(old, sc.towers...)
			}
			return c
		}
		keep := func(w checkpoint.WriteTensor) *checkpoint.WriteTensor { return &w }
		cur := rewrite(t, q, keep, nil, withIgnore)
		old := gemma3Legacy(t, q, withIgnore)
		b1, m1 := openBackend(t, cur)
		b2, m2 := openBackend(t, old)
		if g := m1.IgnoredTensors(m1.Config.IgnoredPrefixes); len(g) != 2 || g[0].Tensors != 7 {
			t.Errorf("%s: ignored %+v", scheme, g)
		}
		if m2.Config.TextPrefix != "language_model.model." {
			t.Errorf("%s: older layout read under %q", scheme, m2.Config.TextPrefix)
		}
		// bits per weight are counted in both layouts (quant.Inspect: the
		// decoder layers under either prefix, the tied head's embedding)
		r1, err1 := quant.Inspect(m1)
		r2, err2 := quant.Inspect(m2)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if r1.LayerWeights == 0 || r1.LayerWeights != r2.LayerWeights || r1.LayerBytes != r2.LayerBytes ||
			r1.Head != "model.language_model.embed_tokens" || r2.Head != "language_model.model.embed_tokens" || !r1.HeadTied || !r2.HeadTied {
			t.Errorf("%s: inspect: layers %d/%d weights, heads %q %q", scheme, r1.LayerWeights, r2.LayerWeights, r1.Head, r2.Head)
		}
		a := allLogProbs(t, b1, toks)
		sameBits(t, scheme+": current vs older layout", a, allLogProbs(t, b2, toks))
		get, opt := quantOracle(t, m1)
		want, err := oracle.LogProbs(m1.Config, get, toks, opt)
		if err != nil {
			t.Fatal(err)
		}
		if d, p, v := maxAbsDiff(a, want); d > 1e-9 {
			t.Errorf("%s: max |reference - oracle| = %g at pos %d id %d", scheme, d, p, v)
		}
	}
}
