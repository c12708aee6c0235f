package gguf_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
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
// fixture, F32 and BF16 weights (sinks, biased router, experts split into ffn_gate_exps /
// ffn_up_exps from gate_up_proj's interleaved columns, YaRN, alternating
// sliding window 16 shorter than the windows) gives the safetensors
// model's per-token NLL in the reference to 1e-12 (the conversion moves
// float32 values without arithmetic: exact).
func TestGptOssF32EqualsSafetensors(t *testing.T) {
	for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16} {
		t.Run(string(dt), func(t *testing.T) {
			dir := gptOssFixture(t, func(o *fixtures.Options) { o.DType = dt })
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
		})
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
	a := llamaAgreeF32(t, h, "gpt-oss F32", gptOssFixture(t, nil), 3)
	if !(a.maxDiff < 0.05) || !(a.relPPL < 5e-3) {
		t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", a.maxDiff)
	}
	noSinks := rewrite(t, a.path, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if strings.HasSuffix(ts[i].Name, ".attn_sinks.weight") {
				ts[i].Data = make([]byte, len(ts[i].Data))
			}
		}
		return kvs, ts
	})
	db := maxAbsDiff(llamaNLL(t, h, noSinks, a.ws), a.qppl)
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

// gptOssOracleNLL is the oracle's float64 forward of a gpt-oss GGUF file:
// the weights as oracleGetter reads them (every Linear through
// Model.Linear, the file's own decoders), but the fused experts assembled
// here, independently of Model.GptOssExperts, from the per-expert slices
// of ffn_gate_exps / ffn_up_exps / ffn_down_exps into transformers'
// [E, in, out] layout (gate_up's columns interleaved).
func gptOssOracleNLL(t *testing.T, path string, ws []backends.Window) []float64 {
	t.Helper()
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Spec
	E, I, C := s.MoE.Experts, s.MoE.Intermediate, s.Hidden
	fused := map[string]int{} // 0 gate_up, 1 down
	for i := 0; i < s.Layers; i++ {
		gu, _, dn, _ := s.GptOssExperts(i)
		fused[gu], fused[dn] = 0, 1
	}
	deq := func(module string) []float64 {
		l, err := m.Linear(module)
		if err != nil {
			t.Fatal(err)
		}
		out, in := l.Shape()
		w := make([]float64, out*in)
		if err := l.Dequantize(w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	base := oracleGetter(m)
	get := func(name string) ([]float64, []int, error) {
		if kind, ok := fused[name]; ok {
			if kind == 1 { // down [E, I, C] from expert e's [C, I]
				v := make([]float64, E*I*C)
				for e := 0; e < E; e++ {
					w := deq(fmt.Sprintf("%s[%d]", name, e))
					for c := 0; c < C; c++ {
						for j := 0; j < I; j++ {
							v[(e*I+j)*C+c] = w[c*I+j]
						}
					}
				}
				return v, []int{E, I, C}, nil
			}
			v := make([]float64, E*C*2*I)
			for e := 0; e < E; e++ {
				for h, part := range []string{"gate", "up"} {
					w := deq(fmt.Sprintf("%s.%s[%d]", name, part, e))
					for j := 0; j < I; j++ {
						for c := 0; c < C; c++ {
							v[(e*C+c)*2*I+2*j+h] = w[j*C+c]
						}
					}
				}
			}
			return v, []int{E, C, 2 * I}, nil
		}
		return base(name)
	}
	return oracleWindowNLL(t, m.Config, get, ws, oracle.Options{})
}

// TestLlamaCppGptOssQuantized: llama_model_quantize makes Q8_0, Q4_0 and
// MXFP4_MOE files from qppl's F32 gpt-oss conversion; for each, package
// gguf opens it, and qppl's reference NLL with its own decoders equals
// the oracle's float64 forward of the weights as libggml dequantizes them
// (experts assembled independently, gptOssOracleNLL) to 1e-9 per token;
// llama.cpp's own NLL on the quantized file is logged beside it.
func TestLlamaCppGptOssQuantized(t *testing.T) {
	h := llamaHelper(t)
	dir := gptOssFixture(t, nil)
	f32 := convert(t, dir, gguf.F32)
	ws := demoWindows(t, dir, 1, 48)
	if d := maxAbsDiff(ggufNLL(t, f32, gguf.Options{}, ws), gptOssOracleNLL(t, f32, ws)); !(d <= 1e-9) {
		t.Fatalf("F32: reference and oracle differ by %g", d)
	}
	for _, ft := range []llamacpp.FileType{{Name: "Q8_0", FType: 7}, {Name: "Q4_0", FType: 2}, {Name: "MXFP4_MOE", FType: 38}} {
		t.Run(ft.Name, func(t *testing.T) {
			q := llamaQuantize(t, h, f32, ft.Name, ft.FType)
			m, err := gguf.OpenModel(q, gguf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			types := map[string]string{}
			for _, n := range []string{"blk.0.attn_q.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight"} {
				ti, _ := m.TensorByGGUFName(n)
				types[n] = ti.Type.String()
			}
			m.Close()
			want := gptOssOracleNLL(t, ggmlDequantized(t, h, q), ws)
			got := ggufNLL(t, q, gguf.Options{}, ws)
			l := llamaNLL(t, h, q, ws)
			t.Logf("%s %v: qppl PPL %.6f (oracle on ggml-dequantized weights: max |Δ| %.2g), llama.cpp %.6f (rel %.2g), max |ΔNLL| %.3g",
				ft.Name, types, ppl(got), maxAbsDiff(got, want), ppl(l), math.Abs(ppl(l)-ppl(got))/ppl(got), maxAbsDiff(got, l))
			if d := maxAbsDiff(got, want); !(d <= 1e-9) {
				t.Fatalf("reference NLL differs from the oracle on ggml-dequantized weights by %g", d)
			}
		})
	}
}

// TestGptOssInspect: qppl inspect of the F32 gpt-oss file accounts the
// decoder layers as quant.Inspect of the safetensors model does (the fused
// experts one module per tensor: same weights and bytes), and its layer
// bytes are the stored 2-D/3-D weight tensors of the blocks (biases
// excluded, as norms and biases are).
func TestGptOssInspect(t *testing.T) {
	dir := gptOssFixture(t, nil)
	path := convert(t, dir, gguf.F32)
	cm, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	want, err := quant.Inspect(cm)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, n := range m.TensorNames() {
		ti, _ := m.TensorByGGUFName(n)
		if strings.HasPrefix(n, "blk.") && strings.HasSuffix(n, ".weight") && len(ti.Dims) >= 2 {
			stored += ti.Size
		}
	}
	t.Logf("GGUF %d bytes / %d weights, safetensors %d / %d, stored %d", r.LayerBytes, r.LayerWeights, want.LayerBytes, want.LayerWeights, stored)
	if r.LayerWeights != want.LayerWeights || r.LayerBytes != want.LayerBytes || stored != r.LayerBytes {
		t.Fatalf("GGUF layers %d bytes / %d weights, safetensors %d / %d, stored %d", r.LayerBytes, r.LayerWeights, want.LayerBytes, want.LayerWeights, stored)
	}
}
