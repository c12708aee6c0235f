package gguf_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	archpkg "github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// gemmaArchs are the gemma model_types and their GGUF architectures.
var gemmaArchs = []struct{ modelType, ggufArch string }{
	{"gemma2", "gemma2"}, {"gemma3_text", "gemma3"}, {"gemma4_text", "gemma4"},
}

// gemmaFixture writes `qppl fixture --arch modelType` (random weights:
// the bigram initialisation gives gemma2 a uniform model) with, for
// gemma2 and gemma3, query_pre_attn_scalar = head_dim: llama.cpp derives
// the attention scale from head_dim (TestGemmaConvertRefusals), so the
// fixture's own 20 ≠ 24 cannot be written as GGUF.
func gemmaFixture(t *testing.T, modelType string, edit func(*fixtures.Options)) string {
	t.Helper()
	o, err := fixtures.Defaults(modelType)
	if err != nil {
		t.Fatal(err)
	}
	o.Init = fixtures.InitRandom
	if modelType != "gemma4_text" {
		o.Config = map[string]any{"query_pre_attn_scalar": o.HeadDim}
	}
	if edit != nil {
		edit(&o)
	}
	if _, ok := o.Config["query_pre_attn_scalar"]; ok {
		o.Config["query_pre_attn_scalar"] = o.HeadDim // after a head_dim edit
	}
	dir := filepath.Join(t.TempDir(), modelType)
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGemmaF32EqualsSafetensors: the F32 GGUF conversion of the gemma2,
// gemma3_text and gemma4_text fixtures (F32 and BF16 weights) gives the
// safetensors model's per-token NLL in the reference to 1e-12 and its
// PPL to 1e-9 (measured: identical). The norm gains of gemma2/gemma3 are
// stored as llama.cpp stores them, fl32(1 + w); for F32 weights that
// rounds, and the qppl.residual.* keys restore w exactly: without them the
// F32 files differ (the test would fail), while BF16 weights need none
// (1 + w is a float32).
func TestGemmaF32EqualsSafetensors(t *testing.T) {
	for _, g := range gemmaArchs {
		for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16} {
			t.Run(g.modelType+"/"+string(dt), func(t *testing.T) {
				dir := gemmaFixture(t, g.modelType, func(o *fixtures.Options) { o.DType = dt })
				ws := testWindows(512)
				want := safetensorsNLL(t, dir, ws)
				path := convert(t, dir, gguf.F32)
				f := openRaw(t, path)
				if v, _ := f.Get("general.architecture"); v.Type != gguf.TypeString || mustStr(v) != g.ggufArch {
					t.Fatalf("general.architecture %v, want %s", v, g.ggufArch)
				}
				residuals := 0
				for _, kv := range f.KVs {
					if strings.HasPrefix(kv.Key, gguf.ResidualPrefix) {
						residuals++
					}
				}
				got := ggufNLL(t, path, gguf.Options{}, ws)
				d := maxAbsDiff(got, want)
				t.Logf("PPL safetensors %.15g, GGUF %.15g, max |ΔNLL| %.3g, %d residual keys", ppl(want), ppl(got), d, residuals)
				if !(d <= 1e-12) || !(math.Abs(ppl(got)-ppl(want)) <= 1e-9*ppl(want)) {
					t.Fatalf("GGUF NLL differs from safetensors by up to %g", d)
				}
				wantResiduals := dt == checkpoint.F32 && g.ggufArch != "gemma4"
				if (residuals > 0) != wantResiduals {
					t.Fatalf("%d residual keys (want some: %v)", residuals, wantResiduals)
				}
				if residuals > 0 {
					// Mutation: the file as llama.cpp's converter writes
					// it (no residuals) computes the float32 gains.
					bare := rewrite(t, path, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
						var out []gguf.KV
						for _, kv := range k {
							if !strings.HasPrefix(kv.Key, gguf.ResidualPrefix) {
								out = append(out, kv)
							}
						}
						return out, ts
					})
					db := maxAbsDiff(ggufNLL(t, bare, gguf.Options{}, ws), want)
					t.Logf("without residuals (llama.cpp's gains fl32(1 + w)): max |ΔNLL| %.3g", db)
					if !(db > 1e-9) {
						t.Fatalf("dropping the residuals changed nothing (%g): the test cannot see them", db)
					}
				}
			})
		}
	}
}

// TestGemmaNormStoredAsLlamaCpp: the norm tensors of a gemma2/gemma3 file
// hold fl32(1 + w) (convert_hf_to_gguf.py Gemma2Model.modify_tensors
// "data_torch + 1", in float32), gemma4's hold w (norm_shift 0), and the
// layer scalar is blk.N.layer_output_scale.weight.
func TestGemmaNormStoredAsLlamaCpp(t *testing.T) {
	for _, g := range gemmaArchs {
		t.Run(g.modelType, func(t *testing.T) {
			dir := gemmaFixture(t, g.modelType, nil)
			f := openRaw(t, convert(t, dir, gguf.F32))
			ck, err := archpkg.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			for _, c := range []struct{ hf, gguf string }{
				{"model.norm.weight", "output_norm.weight"},
				{"model.layers.1.input_layernorm.weight", "blk.1.attn_norm.weight"},
				{"model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
				{"model.layers.1.pre_feedforward_layernorm.weight", "blk.1.ffn_norm.weight"},
				{"model.layers.1.post_feedforward_layernorm.weight", "blk.1.post_ffw_norm.weight"},
			} {
				w, _, err := ck.ReadFloat64(c.hf)
				if err != nil {
					t.Fatal(err)
				}
				v := readF32(t, f, c.gguf)
				for i := range w {
					want := float32(w[i])
					if g.ggufArch != "gemma4" {
						want = float32(1) + float32(w[i])
					}
					if v[i] != want {
						t.Fatalf("%s[%d] = %v, want %v (w = %v)", c.gguf, i, v[i], want, w[i])
					}
				}
			}
			if g.ggufArch == "gemma4" {
				w, _, _ := ck.ReadFloat64("model.layers.2.layer_scalar")
				if v := readF32(t, f, "blk.2.layer_output_scale.weight"); len(v) != 1 || float64(v[0]) != w[0] {
					t.Fatalf("layer_output_scale %v, want %v", v, w)
				}
			}
		})
	}
}

// TestGemmaConvertRefusals: models llama.cpp's gemma graphs would compute
// differently are not converted; the error names the config key.
func TestGemmaConvertRefusals(t *testing.T) {
	cases := []struct {
		modelType string
		edit      func(*fixtures.Options)
		want      string
	}{
		// the fixture's own query_pre_attn_scalar 20 ≠ head_dim 24
		{"gemma2", func(o *fixtures.Options) { o.Config = nil }, "query_pre_attn_scalar"},
		{"gemma3_text", func(o *fixtures.Options) { o.Config = nil }, "query_pre_attn_scalar"},
		{"gemma2", func(o *fixtures.Options) { o.Tied = false }, "tie_word_embeddings"},
		{"gemma2", func(o *fixtures.Options) { o.Config["final_logit_softcapping"] = nil }, "final_logit_softcapping"},
		{"gemma3_text", func(o *fixtures.Options) { o.Config["attn_logit_softcapping"] = 50.0 }, "attn_logit_softcapping"},
		{"gemma4_text", func(o *fixtures.Options) { o.Config = map[string]any{"vocab_size_per_layer_input": 600} }, "vocab_size_per_layer_input"},
	}
	for _, c := range cases {
		t.Run(c.modelType+"/"+c.want, func(t *testing.T) {
			dir := gemmaFixture(t, c.modelType, c.edit)
			err := gguf.ConvertFile(dir, filepath.Join(t.TempDir(), "x.gguf"), gguf.ConvertOptions{Type: gguf.F32})
			if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("got %v, want an unsupported error naming %s and %q", err, dir, c.want)
			}
		})
	}
}

// TestGemmaHostile: gemma files whose metadata is missing, lying or
// describes something else are refused when opened, naming the file and
// the key or tensor (exit 2 from the CLI).
func TestGemmaHostile(t *testing.T) {
	paths := map[string]string{}
	for _, g := range gemmaArchs {
		paths[g.ggufArch] = convert(t, gemmaFixture(t, g.modelType, nil), gguf.F32)
	}
	type edit = func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
	drop := func(key string) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) { return dropKV(k, key), ts }
	}
	set := func(key string, v gguf.Value) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) { return setKV(k, key, v), ts }
	}
	bools := func(b ...byte) gguf.Value {
		v, err := gguf.ScalarArray(gguf.TypeBool, b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	withTensor := func(name string, dims []int64, f32 ...float32) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			raw := make([]byte, 4*len(f32))
			for i, v := range f32 {
				putF32(raw[4*i:], v)
			}
			for i := range ts {
				if ts[i].Name == name {
					ts[i].Data = raw
					return k, ts
				}
			}
			return k, append(ts, gguf.WriteTensor{Name: name, Dims: dims, Type: gguf.F32, Data: raw})
		}
	}
	ropeFreqs := func(f ...float32) edit { return withTensor("rope_freqs.weight", []int64{16}, f...) }
	ones := func(n int, then ...float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return append(out, then...)
	}
	cases := []struct {
		arch, name string
		edit       edit
		unsup      bool
		want       string
	}{
		{"gemma2", "no attention soft cap", drop("gemma2.attn_logit_softcapping"), false, "gemma2.attn_logit_softcapping"},
		{"gemma2", "no final soft cap", drop("gemma2.final_logit_softcapping"), false, "gemma2.final_logit_softcapping"},
		{"gemma2", "zero soft cap", set("gemma2.attn_logit_softcapping", gguf.Float32Value(0)), false, "gemma2.attn_logit_softcapping"},
		{"gemma2", "pattern too short", set("gemma2.attention.sliding_window_pattern", bools(1)), false, "gemma2.attention.sliding_window_pattern"},
		{"gemma2", "pattern of strings", set("gemma2.attention.sliding_window_pattern", gguf.StringArray([]string{"a", "b"})), false, "gemma2.attention.sliding_window_pattern"},
		{"gemma2", "pattern a string", set("gemma2.attention.sliding_window_pattern", gguf.StringValue("2")), false, "gemma2.attention.sliding_window_pattern"},
		{"gemma2", "second RoPE base", set("gemma2.rope.freq_base_swa", gguf.Float32Value(5)), true, "gemma2.rope.freq_base_swa"},
		{"gemma2", "untied head", withTensor("output.weight", []int64{64, 512}, make([]float32, 64*512)...), true, "output.weight"},
		{"gemma2", "residual too short", set(gguf.ResidualPrefix+"blk.0.attn_norm.weight", gguf.Float32Array([]float32{0})), false, gguf.ResidualPrefix + "blk.0.attn_norm.weight"},
		{"gemma2", "residual that changes the gain", set(gguf.ResidualPrefix+"output_norm.weight", gguf.Float32Array(make64(0.01))), false, gguf.ResidualPrefix + "output_norm.weight"},
		{"gemma2", "residual of a plain tensor", set(gguf.ResidualPrefix+"blk.0.attn_q.weight", gguf.Float32Array([]float32{0})), false, gguf.ResidualPrefix + "blk.0.attn_q.weight"},
		{"gemma3", "attention soft cap", set("gemma3.attn_logit_softcapping", gguf.Float32Value(50)), true, "gemma3.attn_logit_softcapping"},
		{"gemma3", "negative final cap", set("gemma3.final_logit_softcapping", gguf.Float32Value(-30)), false, "gemma3.final_logit_softcapping"},
		{"gemma3", "pattern of ints", set("gemma3.attention.sliding_window_pattern", gguf.Int32Array([]int32{1, 7})), false, "gemma3.attention.sliding_window_pattern"},
		{"gemma4", "no pattern", drop("gemma4.attention.sliding_window_pattern"), false, "gemma4.attention.sliding_window_pattern"},
		{"gemma4", "pattern a period", set("gemma4.attention.sliding_window_pattern", gguf.Uint32Value(2)), false, "gemma4.attention.sliding_window_pattern"},
		{"gemma4", "last layer slides", set("gemma4.attention.sliding_window_pattern", bools(1, 0, 1, 1)), false, "gemma4.attention.sliding_window_pattern"},
		{"gemma4", "no window", drop("gemma4.attention.sliding_window"), false, "gemma4.attention.sliding_window"},
		{"gemma4", "no sliding head size", drop("gemma4.attention.key_length_swa"), false, "gemma4.attention.key_length_swa"},
		{"gemma4", "no PLE width", drop("gemma4.embedding_length_per_layer_input"), false, "gemma4.embedding_length_per_layer_input"},
		{"gemma4", "no sliding RoPE base", drop("gemma4.rope.freq_base_swa"), false, "gemma4.rope.freq_base_swa"},
		{"gemma4", "rope scaling", set("gemma4.rope.scaling.type", gguf.StringValue("linear")), true, "gemma4.rope.scaling.type"},
		{"gemma4", "kv heads per layer differ", set("gemma4.attention.head_count_kv", gguf.Int32Array([]int32{2, 1, 1, 1})), true, "gemma4.attention.head_count_kv"},
		{"gemma4", "width pattern", set("gemma4.feed_forward_length", gguf.Int32Array([]int32{128, 256, 256, 256})), true, "gemma4.feed_forward_length"},
		{"gemma4", "rope_freqs not proportional", ropeFreqs(ones(15, 0.5)...), true, "rope_freqs.weight"},
		{"gemma4", "rope_freqs interleaved", ropeFreqs(append(ones(3, 1e30), ones(12)...)...), true, "rope_freqs.weight"},
		{"gemma4", "experts without router", set("gemma4.expert_count", gguf.Uint32Value(4)), false, "gemma4.expert_used_count"},
		{"gemma4", "router without expert_count", withTensor("blk.0.ffn_gate_inp.weight", []int64{64, 4}, make([]float32, 256)...), false, "gemma4.expert_count"},
	}
	for _, c := range cases {
		t.Run(c.arch+"/"+c.name, func(t *testing.T) {
			p := rewrite(t, paths[c.arch], c.edit)
			_, err := gguf.OpenModel(p, gguf.Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, gguf.ErrFormat) && !errors.Is(err, gguf.ErrUnsupported) || c.unsup && !errors.Is(err, gguf.ErrUnsupported) {
				t.Fatalf("error %v is neither gguf.ErrFormat nor ErrUnsupported (unsupported wanted: %v)", err, c.unsup)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want the file and %q", err, c.want)
			}
		})
	}
}

func make64(v float32) []float32 {
	out := make([]float32, 64)
	for i := range out {
		out[i] = v
	}
	return out
}

// readF32 reads an F32 tensor of a raw file.
func readF32(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	raw, err := f.ReadRaw(name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
	}
	return out
}

func mustStr(v gguf.Value) string { s, _ := v.Str(); return s }

// TestGemma4VariantsGGUF: reference.TestGemma4Variants' configurations
// that llama.cpp's gemma4 can express (v_proj on the full layers, no
// per-layer inputs, no or complete KV sharing, single-width MLPs, default
// layer types, no soft cap, equal head sizes, another proportional RoPE)
// convert to F32 GGUF files whose reference NLL is the safetensors one to
// 1e-12 — the scalar and per-layer forms of head_count_kv and
// feed_forward_length, an absent PLE and the rope_freqs pattern all read
// back; those it cannot (attention biases, a RoPE factor) are refused.
func TestGemma4VariantsGGUF(t *testing.T) {
	for _, c := range []struct {
		name   string
		config map[string]any
		refuse string
	}{
		{"v_proj on full layers", map[string]any{"attention_k_eq_v": false}, ""},
		{"no per-layer inputs", map[string]any{"hidden_size_per_layer_input": nil}, ""},
		{"no KV sharing", map[string]any{"num_kv_shared_layers": 0}, ""},
		{"KV sharing of every layer is none", map[string]any{"num_kv_shared_layers": 4}, ""},
		{"single-width MLP", map[string]any{"use_double_wide_mlp": false}, ""},
		{"default layer types, window 8", map[string]any{"layer_types": nil, "sliding_window": 8, "num_kv_shared_layers": 0}, ""},
		{"no final soft cap", map[string]any{"final_logit_softcapping": nil}, ""},
		{"global head_dim = head_dim", map[string]any{"global_head_dim": 24}, ""},
		{"proportional RoPE: 3/8 rotated", map[string]any{"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 500.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.375, "rope_theta": 10000.0},
		}}, ""},
		{"attention biases", map[string]any{"attention_bias": true}, "attention_bias"},
		{"RoPE factor", map[string]any{"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6, "factor": 2.0},
		}}, "factor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := gemmaFixture(t, "gemma4_text", func(o *fixtures.Options) { o.Config = c.config })
			if c.refuse != "" {
				err := gguf.ConvertFile(dir, filepath.Join(t.TempDir(), "x.gguf"), gguf.ConvertOptions{Type: gguf.F32})
				if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), c.refuse) {
					t.Fatalf("got %v, want a refusal naming %q", err, c.refuse)
				}
				return
			}
			ws := testWindows(512)
			want := safetensorsNLL(t, dir, ws)
			got := ggufNLL(t, convert(t, dir, gguf.F32), gguf.Options{}, ws)
			if d := maxAbsDiff(got, want); !(d <= 1e-12) {
				t.Fatalf("GGUF NLL differs from safetensors by up to %g", d)
			}
		})
	}
}
