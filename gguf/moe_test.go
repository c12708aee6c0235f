package gguf_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// TestMoEHostile: GGUF files of the MoE and phi3 architectures that lie
// about their experts, or hold what qppl does not compute, are refused
// when opened, naming the file and the field (metadata key or tensor),
// with ErrFormat (a malformed file) or ErrUnsupported (valid, not
// evaluable) — what the CLI turns into exit 2 (TestEvalGGUFMoERefusals).
func TestMoEHostile(t *testing.T) {
	qwen := convert(t, writeFixture(t, "qwen3_moe", nil), gguf.F32)
	mixtral := convert(t, writeFixture(t, "mixtral", nil), gguf.F32)
	phi3 := convert(t, writeFixture(t, "phi3", nil), gguf.F32)
	// shrink drops the last expert of a stacked tensor: ne [in, out, E-1].
	shrink := func(name string) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == name {
					d := ts[i].Dims
					ts[i].Dims = []int64{d[0], d[1], d[2] - 1}
					ts[i].Data = ts[i].Data[:len(ts[i].Data)/int(d[2])*int(d[2]-1)]
				}
			}
			return kvs, ts
		}
	}
	flat := func(name string) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == name {
					d := ts[i].Dims
					ts[i].Dims = []int64{d[0], d[1] * d[2]} // 2-D: the experts' rows end to end
				}
			}
			return kvs, ts
		}
	}
	kv := func(key string, v gguf.Value) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(kvs, key, v), ts
		}
	}
	for _, c := range []struct {
		name, src string
		edit      func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
		unsup     bool
		want      []string
	}{
		{"qwen3moe expert tensor with one expert less", qwen, shrink("blk.0.ffn_up_exps.weight"), false, []string{`tensor "blk.0.ffn_up_exps.weight" has ne`, "8 experts"}},
		{"mixtral expert tensor flattened to 2-D", mixtral, flat("blk.1.ffn_down_exps.weight"), false, []string{`tensor "blk.1.ffn_down_exps.weight" has ne`}},
		{"qwen3moe expert_used_count > expert_count", qwen, kv("qwen3moe.expert_used_count", gguf.Uint32Value(9)), false, []string{`"qwen3moe.expert_used_count" = 9`, `"qwen3moe.expert_count" = 8`}},
		{"mixtral expert_used_count > expert_count", mixtral, kv("llama.expert_used_count", gguf.Uint32Value(12)), false, []string{`"llama.expert_used_count" = 12`}},
		{"qwen3moe expert_used_count 0", qwen, kv("qwen3moe.expert_used_count", gguf.Uint32Value(0)), false, []string{`"qwen3moe.expert_used_count" = 0`}},
		{"qwen3moe without experts", qwen, kv("qwen3moe.expert_count", gguf.Uint32Value(0)), false, []string{`"qwen3moe.expert_count"`}},
		{"qwen3moe expert count other than the tensors'", qwen, kv("qwen3moe.expert_count", gguf.Uint32Value(16)), false, []string{`tensor "blk.0.ffn_gate_inp.weight" has ne`}},
		{"scaled routing weights", qwen, kv("qwen3moe.expert_weights_scale", gguf.Float32Value(2.5)), true, []string{`"qwen3moe.expert_weights_scale" = 2.5`}},
		{"granite shared expert", mixtral, kv("llama.expert_shared_feed_forward_length", gguf.Uint32Value(64)), true, []string{`"llama.expert_shared_feed_forward_length" = 64`}},
		{"phi3 longrope factors", phi3, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return kvs, append(ts, gguf.WriteTensor{Name: "rope_factors_long.weight", Dims: []int64{8}, Type: gguf.F32, Data: make([]byte, 32)})
		}, true, []string{`tensor "rope_factors_long.weight"`, "longrope"}},
		{"phi3 longrope attention factor", phi3, kv("phi3.rope.scaling.attn_factor", gguf.Float32Value(1.2)), true, []string{`"phi3.rope.scaling.attn_factor"`}},
		{"phi3 separate attn_q", phi3, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == "blk.0.attn_qkv.weight" {
					ts[i].Name = "blk.0.attn_q.weight"
				}
			}
			return kvs, ts
		}, false, []string{`"blk.0.attn_qkv.weight"`, "missing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rewrite(t, c.src, c.edit)
			m, err := gguf.OpenModel(p, gguf.Options{})
			if err == nil {
				m.Close()
				t.Fatal("opened")
			}
			want := gguf.ErrFormat
			if c.unsup {
				want = gguf.ErrUnsupported
			}
			if !errors.Is(err, want) {
				t.Errorf("error %v does not wrap %v", err, want)
			}
			for _, w := range append(c.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// TestConvertMoERefusals: models llama.cpp's graphs would compute
// differently are refused by the converter naming the config.json key.
func TestConvertMoERefusals(t *testing.T) {
	for _, c := range []struct {
		name, arch string
		cfg        map[string]any
		want       string
	}{
		{"qwen3_moe norm_topk_prob false", "qwen3_moe", map[string]any{"norm_topk_prob": false}, "norm_topk_prob"},
		{"qwen3_moe dense layer", "qwen3_moe", map[string]any{"mlp_only_layers": []int{1}}, "mlp_only_layers"},
		{"qwen3_moe sparse step", "qwen3_moe", map[string]any{"decoder_sparse_step": 2}, "decoder_sparse_step"},
		{"phi3 sliding window", "phi3", map[string]any{"sliding_window": 32}, "sliding_window"},
		{"mixtral sliding window", "mixtral", map[string]any{"sliding_window": 32}, "sliding_window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFixture(t, c.arch, func(o *fixtures.Options) {
				for k, v := range c.cfg {
					o.Config[k] = v
				}
			})
			err := gguf.ConvertFile(dir, filepath.Join(t.TempDir(), "x.gguf"), gguf.ConvertOptions{Type: gguf.F32})
			if !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %v: want ErrUnsupported naming %s and %q", err, dir, c.want)
			}
		})
	}
}

// TestInspectMoE: qppl inspect's accounting of a MoE GGUF counts every
// expert as compare_q does (quant.Inspect of the safetensors model lists
// each expert's gate/up/down as a module): one module per expert and
// projection, its bits the bytes of its slice of the stacked tensor, and
// the decoder layers' bytes the sum over every layer tensor (stacked
// experts and the F32 router included), so the decoder bpw of a file
// whose Linears are all one type is that type's, the router excepted.
func TestInspectMoE(t *testing.T) {
	dir := writeFixture(t, "qwen3_moe", func(o *fixtures.Options) {
		o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 256, 256, 4, 2, 64
		o.Config["moe_intermediate_size"] = 256
	})
	q := filepath.Join(t.TempDir(), "q8.gguf")
	if err := gguf.ConvertFile(dir, q, gguf.ConvertOptions{FileType: "Q8_0"}); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.OpenModel(q, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	experts := 0
	var layerBytes int64
	for _, mi := range r.Modules {
		if strings.Contains(mi.Module, ".experts.") {
			experts++
			if mi.Format != "gguf-q8_0" || mi.BPW != 8.5 {
				t.Errorf("%s: %s %.4f bpw, want gguf-q8_0 8.5", mi.Module, mi.Format, mi.BPW)
			}
		}
		if mi.Layer >= 0 {
			layerBytes += mi.Bytes
		}
	}
	if want := m.Spec.Layers * m.Spec.MoE.Experts * 3; experts != want {
		t.Errorf("%d expert modules, want %d", experts, want)
	}
	var stored int64
	for _, n := range m.TensorNames() {
		ti, _ := m.TensorByGGUFName(n)
		if strings.HasPrefix(n, "blk.") && len(ti.Dims) >= 2 {
			stored += ti.Size
		}
	}
	if layerBytes != r.LayerBytes || stored != r.LayerBytes {
		t.Errorf("layer bytes: modules %d, report %d, stored 2-D/3-D layer tensors %d", layerBytes, r.LayerBytes, stored)
	}
	t.Logf("qwen3_moe Q8_0: decoder %.4f bpw (%d expert modules), head %.4f", r.BPWLayer, experts, r.BPWHead)
}

// TestPhi3SlidingWindow: phi3.attention.sliding_window is read as
// transformers' sliding_window (the original model's attention; llama.cpp
// disables Phi-3's window): a GGUF file whose key says 16 scores, on
// 48-token windows, exactly the safetensors model with sliding_window 16,
// and differs from the same file without the window.
func TestPhi3SlidingWindow(t *testing.T) {
	full := writeFixture(t, "phi3", nil)
	windowed := writeFixture(t, "phi3", func(o *fixtures.Options) { o.Config["sliding_window"] = 16 })
	f32 := convert(t, full, gguf.F32)
	g := rewrite(t, f32, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return setKV(kvs, "phi3.attention.sliding_window", gguf.Uint32Value(16)), ts
	})
	ws := testWindows(512)
	want, got, plain := safetensorsNLL(t, windowed, ws), ggufNLL(t, g, gguf.Options{}, ws), ggufNLL(t, f32, gguf.Options{}, ws)
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("GGUF with sliding_window 16 vs safetensors: max |ΔNLL| %g", d)
	}
	if d := maxAbsDiff(got, plain); !(d > 1e-3) {
		t.Errorf("the window moves the NLL by only %g", d)
	}
}
