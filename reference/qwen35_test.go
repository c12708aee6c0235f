package reference

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// rewrite copies the model in src to a new directory with its tensors
// passed through edit (nil drops one) plus extra, and config.json through
// cfg.
func rewrite(t *testing.T, src string, edit func(checkpoint.WriteTensor) *checkpoint.WriteTensor, extra []checkpoint.WriteTensor, cfg func(map[string]any) map[string]any) string {
	t.Helper()
	m, err := checkpoint.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var ts []checkpoint.WriteTensor
	for _, n := range m.Names() {
		ti, _ := m.Tensor(n)
		raw, err := m.ReadRaw(n)
		if err != nil {
			t.Fatal(err)
		}
		if w := edit(checkpoint.WriteTensor{Name: n, DType: ti.DType, Shape: ti.Shape, Data: raw}); w != nil {
			ts = append(ts, *w)
		}
	}
	ts = append(ts, extra...)
	dst := t.TempDir()
	if err := checkpoint.WriteFile(filepath.Join(dst, checkpoint.SafetensorsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(src, checkpoint.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(js, &c); err != nil {
		t.Fatal(err)
	}
	if js, err = json.Marshal(cfg(c)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, checkpoint.ConfigFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestQwen35TextOnlyEqualsMultimodal: the text-only checkpoint of the same
// weights (qwen3_5_text / Qwen3_5ForCausalLM: flat config, model. prefix,
// no vision tower) gives bit-identical log-probabilities to the multimodal
// one (text_config, model.language_model.), for the dense and MoE families.
func TestQwen35TextOnlyEqualsMultimodal(t *testing.T) {
	for _, name := range []string{"qwen3_5", "qwen3_5_moe"} {
		t.Run(name, func(t *testing.T) {
			dir, o := writeMultimodal(t, name)
			causalLM := map[string]string{"qwen3_5": "Qwen3_5ForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM"}[name]
			flat := textOnlyLayout(t, dir, causalLM, "tie_word_embeddings") // model_type qwen3_5_text / qwen3_5_moe_text
			toks := randomTokens(70, o.Vocab, 9)
			b1, m1 := openBackend(t, dir)
			b2, m2 := openBackend(t, flat)
			if m1.Config.TextPrefix != "model.language_model." || m2.Config.TextPrefix != "" || !strings.HasSuffix(m2.Config.ModelType, "_text") {
				t.Fatalf("prefixes %q, %q, model_type %q", m1.Config.TextPrefix, m2.Config.TextPrefix, m2.Config.ModelType)
			}
			a, b := allLogProbs(t, b1, toks), allLogProbs(t, b2, toks)
			for p := range a {
				for v := range a[p] {
					if math.Float64bits(a[p][v]) != math.Float64bits(b[p][v]) {
						t.Fatalf("position %d id %d: multimodal %v, text-only %v", p, v, a[p][v], b[p][v])
					}
				}
			}
		})
	}
}

// TestQwen35VisionTowerIgnored: the vision tower of a multimodal
// checkpoint is ignored on purpose (not an unused-tensor refusal), while a
// tensor of the text model that the forward pass does not read is still
// refused, by name.
func TestQwen35VisionTowerIgnored(t *testing.T) {
	dir, _ := writeMultimodal(t, "qwen3_5")
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if g := m.IgnoredTensors(m.Config.IgnoredPrefixes); len(g) != 1 || g[0].What != "vision tower" || g[0].Tensors != 5 || g[0].Prefix != "model.visual." {
		t.Errorf("ignored %+v, want the 5 vision tensors", g)
	}
	if _, err := New(m, Options{}); err != nil {
		t.Fatalf("multimodal checkpoint refused: %v", err)
	}
	strayRefused(t, dir, []string{"model.language_model.layers.0.linear_attn.in_proj_qkvz.weight"}, // qwen3_next's fused name
		[]string{"model.visual"})
}
