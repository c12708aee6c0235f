package gguf_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// gptOssFixture writes `qppl fixture --arch gpt_oss --init random`.
func gptOssFixture(t *testing.T, edit func(*fixtures.Options)) string {
	t.Helper()
	o, err := fixtures.Defaults("gpt_oss")
	if err != nil {
		t.Fatal(err)
	}
	o.Init = fixtures.InitRandom
	if edit != nil {
		edit(&o)
	}
	dir := filepath.Join(t.TempDir(), "gpt_oss")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGptOssF32EqualsSafetensors: the F32 GGUF conversion of the gpt_oss
// fixture (sinks, biased router, experts split into ffn_gate_exps /
// ffn_up_exps from gate_up_proj's interleaved columns, YaRN, alternating
// sliding window 16 shorter than the windows) gives the safetensors
// model's per-token NLL in the reference to 1e-12 (the conversion moves
// float32 values without arithmetic: exact).
func TestGptOssF32EqualsSafetensors(t *testing.T) {
	dir := gptOssFixture(t, nil)
	ws := testWindows(512)
	want := safetensorsNLL(t, dir, ws)
	path := convert(t, dir, gguf.F32)
	f := openRaw(t, path)
	if v, _ := f.Get("general.architecture"); mustStr(v) != "gpt-oss" {
		t.Fatalf("general.architecture %v", v)
	}
	for _, n := range []string{"blk.0.attn_sinks.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.bias", "blk.1.post_attention_norm.weight", "blk.0.ffn_gate_inp.bias"} {
		if _, ok := f.Tensor(n); !ok {
			t.Fatalf("tensor %s missing", n)
		}
	}
	got := ggufNLL(t, path, gguf.Options{}, ws)
	d := maxAbsDiff(got, want)
	t.Logf("PPL safetensors %.15g, GGUF %.15g, max |ΔNLL| %.3g", ppl(want), ppl(got), d)
	if !(d <= 1e-12) || !(math.Abs(ppl(got)-ppl(want)) <= 1e-9*ppl(want)) {
		t.Fatalf("GGUF NLL differs from safetensors by up to %g", d)
	}
}

// TestLlamaCppGptOss: libllama loads qppl's F32 gpt-oss file and its
// per-token NLL on the same windows (64 tokens: sliding windows of 16 and
// full layers act) is compared with qppl's reference. llama.cpp rounds
// YaRN's correction range (ggml_rope_yarn_corr_dims floor/ceil) where
// gpt_oss's truncate false does not, and computes in float32 (with top-4
// routing over near ties of a random fixture). Measured: max |ΔNLL|
// 0.024, PPL rel 1.2e-3; read with truncate true, 0.014 / 2.2e-4. The
// gap is bounded by 0.05 / 5e-3, and the comparison is shown to see the
// sinks: with every blk.*.attn_sinks.weight zeroed, llama.cpp's NLL moves
// by more than the bound.
func TestLlamaCppGptOss(t *testing.T) {
	h := llamaHelper(t)
	dir := gptOssFixture(t, nil)
	path := convert(t, dir, gguf.F32)
	ws := demoWindows(t, dir, 3, 64)
	want := flatten(nllsOf(t, path, gguf.Options{}, ws))
	got, err := h.NLL(path, llamaWindows(ws), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := maxAbsDiff(flatten(got), want)
	pq, pl := ppl(want), ppl(flatten(got))
	t.Logf("gpt-oss F32: qppl PPL %.9g, llama.cpp %.9g (rel %.2g), max |ΔNLL| %.3g", pq, pl, math.Abs(pl-pq)/pq, d)
	if !(d < 0.05) || !(math.Abs(pl-pq)/pq < 5e-3) {
		t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", d)
	}
	noSinks := rewrite(t, path, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if strings.HasSuffix(ts[i].Name, ".attn_sinks.weight") {
				ts[i].Data = make([]byte, len(ts[i].Data))
			}
		}
		return kvs, ts
	})
	bad, err := h.NLL(noSinks, llamaWindows(ws), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := maxAbsDiff(flatten(bad), want)
	t.Logf("sinks zeroed: llama.cpp max |ΔNLL| %.3g", db)
	if !(db > 0.05) {
		t.Fatalf("zeroing the sinks moved llama.cpp's NLL by only %g: the comparison cannot see them", db)
	}
}

// TestGptOssHostile: a gpt-oss file without a layer's sinks tensor, without
// attention.sliding_window, or with YaRN but without
// rope.scaling.original_context_length is refused by OpenModel naming the
// file and the tensor or key (qppl exits 2 on these errors).
func TestGptOssHostile(t *testing.T) {
	dir := gptOssFixture(t, nil)
	path := convert(t, dir, gguf.F32)
	for _, c := range []struct {
		name, want string
		edit       func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
	}{
		{"no sinks", "blk.1.attn_sinks.weight", func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return kvs, slices.DeleteFunc(ts, func(w gguf.WriteTensor) bool { return w.Name == "blk.1.attn_sinks.weight" })
		}},
		{"no sliding window", "gpt-oss.attention.sliding_window", func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return slices.DeleteFunc(kvs, func(kv gguf.KV) bool { return kv.Key == "gpt-oss.attention.sliding_window" }), ts
		}},
		{"no yarn original context", "gpt-oss.rope.scaling.original_context_length", func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return slices.DeleteFunc(kvs, func(kv gguf.KV) bool { return kv.Key == "gpt-oss.rope.scaling.original_context_length" }), ts
		}},
		{"no yarn factor", "gpt-oss.rope.scaling.factor", func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return slices.DeleteFunc(kvs, func(kv gguf.KV) bool { return kv.Key == "gpt-oss.rope.scaling.factor" }), ts
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := rewrite(t, path, c.edit)
			m, err := gguf.OpenModel(bad, gguf.Options{})
			if err == nil {
				m.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v: want ErrFormat naming %s and %q", err, bad, c.want)
			}
		})
	}
}

// TestGptOssConvertRefusals: a gpt_oss model llama.cpp's gpt-oss graph
// computes differently is refused naming the config.json key, and a
// quantized file type is refused (F32 only).
func TestGptOssConvertRefusals(t *testing.T) {
	for _, c := range []struct {
		name, want string
		cfg        map[string]any
		opt        gguf.ConvertOptions
	}{
		{"swiglu_limit", "swiglu_limit", map[string]any{"swiglu_limit": 6.0}, gguf.ConvertOptions{Type: gguf.F32}},
		{"odd layers slide", "layer_types", map[string]any{"layer_types": []string{"full_attention", "sliding_attention"}}, gguf.ConvertOptions{Type: gguf.F32}},
		{"truncate", "truncate", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": true, "original_max_position_embeddings": 4096}}, gguf.ConvertOptions{Type: gguf.F32}},
		{"Q8_0", "F32", nil, gguf.ConvertOptions{FileType: "Q8_0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := gptOssFixture(t, func(o *fixtures.Options) {
				if c.cfg != nil {
					o.Config = c.cfg
				}
			})
			err := gguf.ConvertFile(dir, filepath.Join(t.TempDir(), "m.gguf"), c.opt)
			if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v: want ErrUnsupported naming %q", err, c.want)
			}
		})
	}
}
