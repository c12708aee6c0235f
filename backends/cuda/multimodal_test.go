package cuda

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/checkpoint"
)

// renameModel copies the checkpoint in src to a new directory, its
// tensors renamed (or dropped: "") by name and config.json through cfg.
func renameModel(t *testing.T, src string, name func(string) string, cfg func(map[string]any) map[string]any) string {
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
		if nn := name(n); nn != "" {
			ts = append(ts, checkpoint.WriteTensor{Name: nn, DType: ti.DType, Shape: ti.Shape, Data: raw})
		}
	}
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

// TestMultimodalEqualsTextOnlyEmu: on the emulator (fp32 and bf16), the
// multimodal gemma3 and gemma4 suite models (Gemma3/Gemma4ForConditionalGeneration:
// text_config, model.language_model., towers that New must accept as
// ignored) score every token bit for bit as their text-only checkpoints
// (gemma3_text, gemma4_text), and gemma3 as its older language_model.model.
// layout too. A family cuda.Supports refuses is skipped.
func TestMultimodalEqualsTextOnlyEmu(t *testing.T) {
	for _, c := range []struct{ arch, text, class string }{
		{"gemma3", "gemma3_text", "Gemma3ForCausalLM"},
		{"gemma4", "gemma4_text", "Gemma4ForCausalLM"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := backendtest.WriteModel(dir, c.arch, 1); err != nil {
				t.Fatal(err)
			}
			cfg, err := arch.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := arch.For(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := Supports(spec); err != nil {
				t.Skip(err)
			}
			textOnly := renameModel(t, dir, func(n string) string {
				if !strings.HasPrefix(n, "model.language_model.") {
					return ""
				}
				return "model." + strings.TrimPrefix(n, "model.language_model.")
			}, func(m map[string]any) map[string]any {
				text := m["text_config"].(map[string]any)
				text["architectures"] = []string{c.class}
				for _, k := range []string{"torch_dtype", "bos_token_id", "eos_token_id"} {
					if v, ok := m[k]; ok {
						text[k] = v
					}
				}
				return text
			})
			// A tensor outside the towers that nothing reads stops New, named.
			stray := "model.language_model.layers.0.mlp.gate_up_proj.weight"
			bad := renameModel(t, dir, func(n string) string { return n }, func(m map[string]any) map[string]any { return m })
			addTensor(t, bad, stray)
			if _, err := New(openModel(t, bad), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 96}); !errors.Is(err, checkpoint.ErrUnused) ||
				!strings.Contains(err.Error(), stray) || strings.Contains(err.Error(), "tower") {
				t.Errorf("stray %s: New: %v, want an unused-tensor refusal naming only it", stray, err)
			}
			dirs := []string{dir, textOnly}
			if c.arch == "gemma3" {
				dirs = append(dirs, renameModel(t, dir, func(n string) string {
					for _, r := range [][2]string{{"model.language_model.", "language_model.model."}, {"model.vision_tower.", "vision_tower."}, {"model.multi_modal_projector.", "multi_modal_projector."}} {
						if strings.HasPrefix(n, r[0]) {
							return r[1] + strings.TrimPrefix(n, r[0])
						}
					}
					return n
				}, func(m map[string]any) map[string]any { return m }))
			}
			toks := testTokens(90, backendtest.Vocab, 7) // longer than the fixtures' 32-token window
			for _, prec := range []string{"fp32", "bf16"} {
				var nll [][]float64
				for _, d := range dirs {
					m := openModel(t, d)
					if m.Config.ModelType != map[bool]string{true: c.arch, false: c.text}[d != textOnly] {
						t.Fatalf("%s read as %s", d, m.Config.ModelType)
					}
					b, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: prec, MaxTokens: 96})
					if err != nil {
						t.Fatalf("%s: %v", d, err)
					}
					s, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{TopK: 1})
					b.Close()
					if err != nil {
						t.Fatal(err)
					}
					nll = append(nll, s.NLL)
				}
				for k := 1; k < len(nll); k++ {
					what := []string{"", "text-only", "language_model.model. layout"}[k]
					for i := range nll[0] {
						if math.Float64bits(nll[0][i]) != math.Float64bits(nll[k][i]) {
							t.Fatalf("%s: token %d: multimodal NLL %v, %s %v", prec, i, nll[0][i], what, nll[k][i])
						}
					}
				}
			}
		})
	}
}

// addTensor rewrites the checkpoint in dir with one more F32 [2] tensor.
func addTensor(t *testing.T, dir, name string) {
	t.Helper()
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close() // the tensors' bytes are the model's until it is closed
	var ts []checkpoint.WriteTensor
	for _, n := range m.Names() {
		ti, _ := m.Tensor(n)
		raw, err := m.ReadRaw(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, checkpoint.WriteTensor{Name: n, DType: ti.DType, Shape: ti.Shape, Data: raw})
	}
	ts = append(ts, checkpoint.WriteTensor{Name: name, DType: checkpoint.F32, Shape: []int{2}, Data: make([]byte, 8)})
	if err := checkpoint.WriteFile(filepath.Join(dir, checkpoint.SafetensorsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
}
