package gguf_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
)

// openRaw opens a GGUF file for its tensor infos and raw bytes.
func openRaw(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(f, st.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// quantizeFixtures are the models the quantized conversions are checked
// on: 8 llama layers of width 256 with 4 query heads per KV head and a
// tied head (so Q4_K_M's use_more_bits layers 0, 3, 6, 7, the IQ4 attn_v
// rule and the Q6_K head all occur), and qwen3 of width 64 with an untied
// head (every super-block type falls back to a 32-value one).
func quantizeFixtures(t *testing.T) map[string]string {
	m := map[string]string{
		"llama-256x8": writeFixture(t, "llama", func(o *fixtures.Options) {
			o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim, o.Layers, o.Tied = 256, 256, 8, 2, 32, 8, true
		}),
		"qwen3-64": writeFixture(t, "qwen3", func(o *fixtures.Options) { o.Tied = false }),
	}
	for name, edit := range moeQuantFixtures() {
		m[name] = writeFixture(t, strings.SplitN(name, "-", 2)[0], edit)
	}
	return m
}

// moeQuantFixtures are the MoE and fused-projection fixtures (width 256,
// 4 layers, 4 query heads per KV head): 8 experts each, which bumps
// llama.cpp's attn_v, attn_k and attn_output types, and phi3's fused
// attn_qkv / ffn_up.
func moeQuantFixtures() map[string]func(*fixtures.Options) {
	wide := func(o *fixtures.Options) {
		o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim, o.Layers, o.Tied = 256, 256, 8, 2, 32, 4, false
	}
	return map[string]func(*fixtures.Options){
		"qwen3_moe-256x4": func(o *fixtures.Options) { wide(o); o.Config["moe_intermediate_size"] = 256 },
		"mixtral-256x4":   wide,
		"phi3-256x4":      wide,
	}
}

// TestConvertQuantizedMatchesLlamaCpp: for every file type qppl writes,
// qppl's quantized conversion holds, tensor for tensor, the types and the
// bytes that llama_model_quantize writes from qppl's F32 conversion of the
// same model — llama.cpp's per-tensor type mix and ggml's quantizers both
// reproduced — on two fixtures and on ../shared's tiny-wt2-mistral.
func TestConvertQuantizedMatchesLlamaCpp(t *testing.T) {
	h := llamaHelper(t)
	models := quantizeFixtures(t)
	// A trained model too (widths 128/384: the 32-value fallbacks).
	if tiny := filepath.Join("..", "..", "shared", "models", "tiny-wt2-mistral"); dirExists(tiny) {
		models["tiny-wt2-mistral"] = tiny
	} else {
		t.Logf("%s absent: checked on the fixtures only", tiny)
	}
	for name, dir := range models {
		f32 := convert(t, dir, gguf.F32)
		for _, ft := range gguf.FileTypes() {
			if ft.Name == "F32" {
				continue
			}
			t.Run(name+"/"+ft.Name, func(t *testing.T) {
				mine := filepath.Join(t.TempDir(), "qppl.gguf")
				if err := gguf.ConvertFile(dir, mine, gguf.ConvertOptions{FileType: ft.Name}); err != nil {
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
				if v, _ := a.Get("general.file_type"); v.String() != strings.TrimSpace(mustGet(t, b, "general.file_type")) {
					t.Errorf("general.file_type %s, llama.cpp %s", v, mustGet(t, b, "general.file_type"))
				}
				same := 0
				mix := map[gguf.Type]int{}
				for _, tb := range b.Tensors {
					ta, ok := a.Tensor(tb.Name)
					if !ok {
						t.Fatalf("llama.cpp's %s is missing", tb.Name)
					}
					if ta.Type != tb.Type {
						t.Errorf("%s: type %s, llama.cpp %s", tb.Name, ta.Type, tb.Type)
						continue
					}
					ra, err := a.ReadRaw(ta.Name)
					if err != nil {
						t.Fatal(err)
					}
					rb, err := b.ReadRaw(tb.Name)
					if err != nil {
						t.Fatal(err)
					}
					if bytes.Equal(ra, rb) {
						same++
					} else {
						t.Errorf("%s (%s): bytes differ from llama.cpp's", tb.Name, tb.Type)
					}
					mix[tb.Type]++
				}
				t.Logf("%d/%d tensors byte-identical to llama_model_quantize (types %v)", same, len(b.Tensors), mix)
			})
		}
	}
}

func dirExists(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }

func mustGet(t *testing.T, f *gguf.File, key string) string {
	v, ok := f.Get(key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return v.String()
}

// TestQuantizedConversionRoundTrip (no llama.cpp needed): what the
// quantized conversion writes reads back, type for type, as the bytes
// ggml.Quantize gives for the F32 conversion's (permuted) rows; and the
// reference's NLL on the quantized file equals its NLL on an F32 file of
// the decoded weights, bit for bit.
func TestQuantizedConversionRoundTrip(t *testing.T) {
	// Two layers: Q4_K_M still puts Q6_K on layer 1's attn_v and ffn_down.
	dir := writeFixture(t, "llama", func(o *fixtures.Options) {
		o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim, o.Tied = 256, 256, 8, 2, 32, true
	})
	f32 := convert(t, dir, gguf.F32)
	src := openRaw(t, f32)
	ws := testWindows(512)
	base := ggufNLL(t, f32, gguf.Options{}, ws)
	for _, ftName := range []string{"Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS"} {
		t.Run(ftName, func(t *testing.T) {
			q := filepath.Join(t.TempDir(), ftName+".gguf")
			if err := gguf.ConvertFile(dir, q, gguf.ConvertOptions{FileType: ftName}); err != nil {
				t.Fatal(err)
			}
			g := openRaw(t, q)
			types := map[gguf.Type]int{}
			for _, ti := range g.Tensors {
				types[ti.Type]++
				raw, err := g.ReadRaw(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				sraw, err := src.ReadRaw(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				x := make([]float32, len(sraw)/4)
				if err := ggml.Dequantize(gguf.F32, sraw, x); err != nil {
					t.Fatal(err)
				}
				want, err := ggml.Quantize(ti.Type, x, int(ti.Dims[0]))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(raw, want) {
					t.Fatalf("%s (%s): the file's bytes are not the quantizer's", ti.Name, ti.Type)
				}
			}
			if types[gguf.F32] == len(g.Tensors) {
				t.Fatal("nothing was quantized")
			}
			// The decoded weights as an F32 file: the same NLL, exactly.
			deq := rewrite(t, q, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				for i := range ts {
					n := int64(1)
					for _, d := range ts[i].Dims {
						n *= d
					}
					y := make([]float32, n)
					if err := ggml.Dequantize(ts[i].Type, ts[i].Data, y); err != nil {
						t.Fatal(err)
					}
					raw, err := ggml.Quantize(gguf.F32, y, int(ts[i].Dims[0]))
					if err != nil {
						t.Fatal(err)
					}
					ts[i].Data = raw
					ts[i].Type = gguf.F32
				}
				return kvs, ts
			})
			got, want := ggufNLL(t, q, gguf.Options{}, ws), ggufNLL(t, deq, gguf.Options{}, ws)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("token %d: NLL %v on the quantized file, %v on its decoded weights", i, got[i], want[i])
				}
			}
			t.Logf("%s: %v; PPL %.6f (F32 %.6f)", ftName, types, ppl(got), ppl(base))
			if ppl(got) == ppl(base) {
				t.Fatal("quantization did not change the NLL")
			}
		})
	}
}

func TestFileTypeByName(t *testing.T) {
	for _, c := range []struct {
		name string
		id   uint32
		ok   bool
	}{{"q4_k_m", 15, true}, {"Q8_0", 7, true}, {"IQ4_XS", 30, true}, {"f16", 1, true}, {"Q2_K", 0, false}, {"IQ2_XXS", 0, false}, {"nope", 0, false}} {
		ft, err := gguf.FileTypeByName(c.name)
		if (err == nil) != c.ok || c.ok && ft.ID != c.id {
			t.Errorf("FileTypeByName(%q) = %+v, %v", c.name, ft, err)
		}
	}
}
