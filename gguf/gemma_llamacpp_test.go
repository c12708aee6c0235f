package gguf_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// gemmaMisdescribed rewrites a gemma file so that it describes another
// model (one detail of the mapping wrong): llama.cpp's NLL on it must move
// far from qppl's on the right file, or the agreement on the right file
// would prove nothing.
var gemmaMisdescribed = map[string]struct {
	what string
	edit func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
}{
	"gemma2": {"no sliding_window key (llama.cpp's default 4096 > the windows)", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return dropKV(k, "gemma2.attention.sliding_window"), ts
	}},
	"gemma3": {"the sliding layers' RoPE base 1e6", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return setKV(k, "gemma3.rope.freq_base_swa", gguf.Float32Value(1e6)), ts
	}},
	"gemma4": {"every full-layer frequency rotated", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Name == "rope_freqs.weight" {
				for j := 0; j+4 <= len(ts[i].Data); j += 4 {
					putF32(ts[i].Data[j:], 1)
				}
			}
		}
		return k, ts
	}},
}

// TestLlamaCppGemmaF32: libllama loads qppl's F32 conversion of the
// gemma2, gemma3_text and gemma4_text fixtures and its own per-token NLL
// agrees with qppl's float64 reference to float32 precision (logged); the
// same file with one detail of the mapping described wrongly
// (gemmaMisdescribed) moves llama.cpp's NLL at least 10× further.
func TestLlamaCppGemmaF32(t *testing.T) {
	h := llamaHelper(t)
	for _, g := range gemmaArchs {
		t.Run(g.modelType, func(t *testing.T) {
			a := llamaAgreeF32(t, h, g.ggufArch+" F32", gemmaFixture(t, g.modelType, nil), 3)
			if !(a.maxDiff < 0.02) || !(a.relPPL < 1e-3) {
				t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", a.maxDiff)
			}
			mis := gemmaMisdescribed[g.ggufArch]
			bad := llamaNLL(t, h, rewrite(t, a.path, mis.edit), a.ws)
			db := maxAbsDiff(bad, a.qppl)
			t.Logf("%s with %s: llama.cpp max |ΔNLL| %.3g (PPL %.9g)", g.ggufArch, mis.what, db, ppl(bad))
			if !(db > 10*a.maxDiff) {
				t.Fatalf("a wrong %s moves llama.cpp only to %g (right file: %g)", mis.what, db, a.maxDiff)
			}
		})
	}
}

// gemmaQuantTypes are the llama.cpp file types TestLlamaCppGemmaQuantized
// produces (legacy, K, IQ4 and BF16 tensors).
var gemmaQuantTypes = []string{"Q8_0", "Q4_0", "Q5_1", "Q4_K_M", "Q6_K", "IQ4_XS", "BF16"}

// TestLlamaCppGemmaQuantized: for each gemma family, llama_model_quantize
// quantizes qppl's F32 conversion (fixture with hidden 256 so that the K
// and IQ types are really used) to several file types; per type, qppl's
// reference NLL with its own decoders equals (1e-9 per token) both its NLL
// on the file with every tensor dequantized by ggml's to_float and the
// independent oracle's float64 forward of those ggml-dequantized weights;
// llama.cpp's own NLL on the quantized file is logged beside it (it
// quantizes activations internally).
func TestLlamaCppGemmaQuantized(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: quantizes with llama.cpp")
	}
	h := llamaHelper(t)
	for _, g := range gemmaArchs {
		t.Run(g.modelType, func(t *testing.T) {
			dir := gemmaFixture(t, g.modelType, func(o *fixtures.Options) {
				o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 256, 512, 4, 2, 64
			})
			f32 := convert(t, dir, gguf.F32)
			ws := demoWindows(t, dir, 2, 64)
			base := ggufNLL(t, f32, gguf.Options{}, ws)
			t.Logf("%s F32: PPL %.6f", g.ggufArch, ppl(base))
			for _, name := range gemmaQuantTypes {
				t.Run(name, func(t *testing.T) {
					s := scoreQuantized(t, h, f32, name, ws)
					s.checkDecoders(t, 1e-9)
					if !(s.relPPL() < 0.05) {
						t.Errorf("llama.cpp PPL %v vs qppl %v", ppl(s.llama), ppl(s.got))
					}
				})
			}
		})
	}
}

// TestConvertQuantizedGemmaMatchesLlamaCpp: qppl's quantized conversion of
// the gemma2 and gemma3 fixtures (hidden 256) holds, tensor for tensor, the
// types and bytes llama_model_quantize writes from qppl's F32 conversion,
// for every file type qppl writes; gemma4 files are written as F32 only
// (llama.cpp's gemma4 type mix is not reproduced: Arch.F32Only), other
// types are refused.
func TestConvertQuantizedGemmaMatchesLlamaCpp(t *testing.T) {
	h := llamaHelper(t)
	for _, g := range gemmaArchs {
		dir := gemmaFixture(t, g.modelType, func(o *fixtures.Options) {
			o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 256, 512, 4, 2, 64
		})
		f32 := convert(t, dir, gguf.F32)
		for _, ft := range gguf.FileTypes() {
			if ft.Name == "F32" {
				continue
			}
			t.Run(g.modelType+"/"+ft.Name, func(t *testing.T) {
				mine := filepath.Join(t.TempDir(), "qppl.gguf")
				err := gguf.ConvertFile(dir, mine, gguf.ConvertOptions{FileType: ft.Name})
				if g.ggufArch == "gemma4" {
					if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), ft.Name) {
						t.Fatalf("gemma4 to %s: %v, want a refusal", ft.Name, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				theirs := filepath.Join(t.TempDir(), "llama.gguf")
				if err := h.Quantize(f32, theirs, int(ft.ID)); err != nil {
					t.Fatal(err)
				}
				a, b := openRaw(t, mine), openRaw(t, theirs)
				if len(a.Tensors) != len(b.Tensors) {
					t.Fatalf("%d tensors, llama.cpp %d", len(a.Tensors), len(b.Tensors))
				}
				same := 0
				for _, tb := range b.Tensors {
					ta, ok := a.Tensor(tb.Name)
					if !ok {
						t.Fatalf("llama.cpp's %s is missing", tb.Name)
					}
					if ta.Type != tb.Type {
						t.Errorf("%s: type %s, llama.cpp %s", tb.Name, ta.Type, tb.Type)
						continue
					}
					ra, _ := a.ReadRaw(ta.Name)
					rb, _ := b.ReadRaw(tb.Name)
					if string(ra) == string(rb) {
						same++
					} else {
						t.Errorf("%s (%s): bytes differ from llama.cpp's", tb.Name, tb.Type)
					}
				}
				t.Logf("%d/%d tensors byte-identical to llama_model_quantize", same, len(b.Tensors))
			})
		}
	}
}

// TestLlamaCppGemma3FinalCap: a gemma3 file with
// gemma3.final_logit_softcapping (cap 5, which the fixture's logits reach)
// is soft-capped by llama.cpp as by qppl (and transformers).
func TestLlamaCppGemma3FinalCap(t *testing.T) {
	h := llamaHelper(t)
	dir := gemmaFixture(t, "gemma3_text", func(o *fixtures.Options) { o.Config["final_logit_softcapping"] = 5.0 })
	a := llamaAgreeF32(t, h, "gemma3, final cap 5", dir, 2)
	if !(a.maxDiff < 0.02) || !(a.relPPL < 1e-3) {
		t.Fatalf("llama.cpp differs by up to %g", a.maxDiff)
	}
}

// TestLlamaCppGemma4Variant: the other forms of gemma4's metadata —
// full layers with their own attn_v and kv heads (a scalar head_count_kv),
// no per-layer inputs (embedding_length_per_layer_input 0), single-width
// MLPs (a scalar feed_forward_length), 3/8 of the full layers' frequencies
// rotated — are read by llama.cpp as by qppl.
func TestLlamaCppGemma4Variant(t *testing.T) {
	h := llamaHelper(t)
	dir := gemmaFixture(t, "gemma4_text", func(o *fixtures.Options) {
		o.Config = map[string]any{"attention_k_eq_v": false, "hidden_size_per_layer_input": nil, "use_double_wide_mlp": false,
			"rope_parameters": map[string]any{
				"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 500.0},
				"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.375, "rope_theta": 10000.0},
			}}
	})
	a := llamaAgreeF32(t, h, "gemma4 variant", dir, 2)
	if !(a.maxDiff < 0.02) || !(a.relPPL < 1e-3) {
		t.Fatalf("llama.cpp differs by up to %g", a.maxDiff)
	}
}
