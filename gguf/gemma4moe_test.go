package gguf_test

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/ggufgen"
)

// gemma4MoEFixture is `qppl fixture --arch gemma4_text --variant moe`
// (8 experts of width 16, top 2, on every layer beside the dense MLP),
// random weights, stored as edit says.
func gemma4MoEFixture(t *testing.T, edit func(*fixtures.Options)) string {
	t.Helper()
	return gemmaFixture(t, "gemma4_text", func(o *fixtures.Options) {
		o.Variant = "moe"
		if edit != nil {
			edit(o)
		}
	})
}

// TestGemma4MoEF32EqualsSafetensors: the Gemma 4 mixture of experts
// converts to an F32 GGUF file with llama.cpp's names (Gemma4Model:
// ffn_gate_inp.weight/.scale, ffn_down_exps.scale, pre_ffw_norm_2,
// post_ffw_norm_1, post_ffw_norm_2, stacked ffn_{gate,up,down}_exps,
// expert_count/used_count/feed_forward_length) whose reference NLL is the
// safetensors one to 1e-12, for F32 and BF16 weights and fused or
// per-expert checkpoints. Mutation: the router scale or the per-expert
// scale read from another layer moves the NLL.
func TestGemma4MoEF32EqualsSafetensors(t *testing.T) {
	for _, c := range []struct {
		name    string
		dt      checkpoint.DType
		experts string
	}{
		{"f32 fused", checkpoint.F32, fixtures.ExpertsFused},
		{"bf16 fused", checkpoint.BF16, fixtures.ExpertsFused},
		{"f32 per expert", checkpoint.F32, fixtures.ExpertsPerExpert},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := gemma4MoEFixture(t, func(o *fixtures.Options) { o.DType, o.Experts = c.dt, c.experts })
			ws := testWindows(512)
			want := safetensorsNLL(t, dir, ws)
			path := convert(t, dir, gguf.F32)
			f := openRaw(t, path)
			for k, v := range map[string]uint32{"gemma4.expert_count": 8, "gemma4.expert_used_count": 2, "gemma4.expert_feed_forward_length": 16} {
				if got, ok := f.Get(k); !ok || got.Type != gguf.TypeUint32 {
					t.Fatalf("metadata %s: %v", k, got)
				} else if x, _ := got.Int(); x != int64(v) {
					t.Fatalf("metadata %s = %d, want %d", k, x, v)
				}
			}
			for _, n := range []string{"ffn_gate_inp.weight", "ffn_gate_inp.scale", "ffn_down_exps.scale", "pre_ffw_norm_2.weight",
				"post_ffw_norm_1.weight", "post_ffw_norm_2.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
				"ffn_gate.weight", "ffn_norm.weight", "post_ffw_norm.weight"} {
				if _, err := f.ReadRaw("blk.3." + n); err != nil {
					t.Fatalf("blk.3.%s: %v", n, err)
				}
			}
			got := ggufNLL(t, path, gguf.Options{}, ws)
			d := maxAbsDiff(got, want)
			t.Logf("PPL safetensors %.15g, GGUF %.15g, max |ΔNLL| %.3g", ppl(want), ppl(got), d)
			if !(d <= 1e-12) || !(math.Abs(ppl(got)-ppl(want)) <= 1e-9*ppl(want)) {
				t.Fatalf("GGUF NLL differs from safetensors by up to %g", d)
			}
			if c.name != "f32 fused" {
				return
			}
			for _, n := range []string{"ffn_gate_inp.scale", "ffn_down_exps.scale"} {
				swapped := rewrite(t, path, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
					var a, b int
					for i := range ts {
						switch ts[i].Name {
						case "blk.0." + n:
							a = i
						case "blk.1." + n:
							b = i
						}
					}
					ts[a].Data, ts[b].Data = ts[b].Data, ts[a].Data
					return k, ts
				})
				dm := maxAbsDiff(ggufNLL(t, swapped, gguf.Options{}, ws), want)
				t.Logf("%s of layers 0 and 1 swapped: max |ΔNLL| %.3g", n, dm)
				if !(dm > 1e-6) {
					t.Fatalf("swapping %s changed nothing (%g): the test cannot see it", n, dm)
				}
			}
		})
	}
}

// TestGemma4MoEHostile: a Gemma 4 MoE file without a router scale or
// per-expert scale, with a router on some layers only, without the expert
// width or with scaled routing weights is refused naming the file and the
// tensor or key.
func TestGemma4MoEHostile(t *testing.T) {
	path := convert(t, gemma4MoEFixture(t, nil), gguf.F32)
	type edit = func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
	dropT := func(name string) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			var out []gguf.WriteTensor
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return k, out
		}
	}
	for _, c := range []struct {
		name  string
		edit  edit
		want  string
		unsup bool
	}{
		{"no router scale", dropT("blk.2.ffn_gate_inp.scale"), "blk.2.ffn_gate_inp.scale", false},
		{"no per-expert scale", dropT("blk.1.ffn_down_exps.scale"), "blk.1.ffn_down_exps.scale", false},
		{"no pre_ffw_norm_2", dropT("blk.0.pre_ffw_norm_2.weight"), "blk.0.pre_ffw_norm_2.weight", false},
		{"router on some layers", dropT("blk.3.ffn_gate_inp.weight"), "blk.3.ffn_gate_inp.weight", false},
		{"no expert width", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return dropKV(k, "gemma4.expert_feed_forward_length"), ts
		}, "gemma4.expert_feed_forward_length", false},
		{"scaled routing weights", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "gemma4.expert_weights_scale", gguf.Float32Value(2)), ts
		}, "gemma4.expert_weights_scale", true},
		{"fused gate/up experts of the wrong width", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == "blk.0.ffn_gate_exps.weight" {
					ts[i].Name = "blk.0.ffn_gate_up_exps.weight"
				}
			}
			return dropT("blk.0.ffn_up_exps.weight")(k, ts)
		}, "blk.0.ffn_gate_up_exps.weight", false},
		{"top-k above experts", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "gemma4.expert_used_count", gguf.Uint32Value(9)), ts
		}, "gemma4.expert_used_count", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rewrite(t, path, c.edit)
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

// TestLlamaCppGemma4MoE: llama.cpp loads qppl's F32 conversion of the
// Gemma 4 MoE fixture (gemma4.cpp: the router on the weightless RMS norm
// of the attention output × 1/sqrt(n_embd) × ffn_gate_inp.scale, softmax,
// top-k renormalised, × ffn_down_exps.scale, GELU experts on
// pre_ffw_norm_2) and its per-token NLL on the same windows agrees with
// qppl's; the same file with the per-expert scales swapped between two
// layers moves llama.cpp ≥ 10× further.
func TestLlamaCppGemma4MoE(t *testing.T) {
	h := llamaHelper(t)
	r := llamaAgreeF32(t, h, "gemma4 MoE F32", gemma4MoEFixture(t, nil), 3)
	if !(r.maxDiff < 0.02) || !(r.relPPL < 1e-3) {
		t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", r.maxDiff)
	}
	swapped := rewrite(t, r.path, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		var a, b int
		for i := range ts {
			switch ts[i].Name {
			case "blk.0.ffn_down_exps.scale":
				a = i
			case "blk.1.ffn_down_exps.scale":
				b = i
			}
		}
		ts[a].Data, ts[b].Data = ts[b].Data, ts[a].Data
		return k, ts
	})
	db := maxAbsDiff(llamaNLL(t, h, swapped, r.ws), r.qppl)
	t.Logf("per-expert scales of layers 0 and 1 swapped: llama.cpp max |ΔNLL| %.3g", db)
	if !(db > 10*r.maxDiff) {
		t.Fatalf("swapped per-expert scales move llama.cpp only to %g (right file: %g)", db, r.maxDiff)
	}
}

// TestLlamaCppGemma4MoEQuantized: llama_model_quantize'd files of the
// Gemma 4 MoE fixture (hidden 256, expert width 256, so the K and IQ types
// apply to the stacked experts too): qppl's reference NLL with its own
// decoders = its NLL on the file with every tensor dequantized by ggml's
// to_float = the independent oracle's float64 forward of those weights
// (1e-9 per token); llama.cpp's own PPL is logged beside it (it quantizes
// activations internally).
func TestLlamaCppGemma4MoEQuantized(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: quantizes with llama.cpp")
	}
	h := llamaHelper(t)
	dir := gemma4MoEFixture(t, func(o *fixtures.Options) {
		o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 256, 512, 4, 2, 64
		o.Config = map[string]any{"moe_intermediate_size": 256}
	})
	f32 := convert(t, dir, gguf.F32)
	ws := demoWindows(t, dir, 2, 64)
	base := ggufNLL(t, f32, gguf.Options{}, ws)
	t.Logf("gemma4 MoE F32: PPL %.6f", ppl(base))
	for _, name := range []string{"Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "IQ4_XS", "BF16"} {
		t.Run(name, func(t *testing.T) {
			scoreQuantized(t, h, f32, name, ws).checkDecoders(t, 1e-9)
		})
	}
}

// TestGemma4MoEFusedGateUp: the Gemma 4 MoE file with its experts' gate
// and up fused into ffn_gate_up_exps (gemma4.cpp load_arch_tensors
// accepts it beside the split form) gives the split file's reference NLL
// bit for bit, and llama.cpp (when available) loads the fused file and
// agrees as with the split one. Mutations: the halves swapped (up first)
// move the NLL; a fused tensor with wrong ne is refused naming it.
func TestGemma4MoEFusedGateUp(t *testing.T) {
	dir := gemma4MoEFixture(t, nil)
	path := convert(t, dir, gguf.F32)
	ws := testWindows(512)
	want := ggufNLL(t, path, gguf.Options{}, ws)
	fused := rewrite(t, path, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return k, ggufgen.FuseGateUpExps(ts, false)
	})
	f := openRaw(t, fused)
	if _, err := f.ReadRaw("blk.2.ffn_gate_up_exps.weight"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadRaw("blk.2.ffn_gate_exps.weight"); err == nil {
		t.Fatal("the fused file still holds ffn_gate_exps")
	}
	got := ggufNLL(t, fused, gguf.Options{}, ws)
	if n := sameBitCount(got, want); n != len(want) {
		t.Fatalf("fused file: %d of %d NLLs bit-identical to the split file's (max |Δ| %g)", n, len(want), maxAbsDiff(got, want))
	}
	swapped := rewrite(t, path, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return k, ggufgen.FuseGateUpExps(ts, true)
	})
	d := maxAbsDiff(ggufNLL(t, swapped, gguf.Options{}, ws), want)
	t.Logf("fused gate/up halves swapped: max |ΔNLL| %.3g", d)
	if !(d > 1e-6) {
		t.Fatalf("swapping the gate and up halves changed nothing (%g): the test cannot see it", d)
	}
	bad := rewrite(t, fused, func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Name == "blk.1.ffn_gate_up_exps.weight" {
				ts[i].Dims = []int64{ts[i].Dims[0], ts[i].Dims[1] / 2, 2 * ts[i].Dims[2]}
			}
		}
		return k, ts
	})
	if _, err := gguf.OpenModel(bad, gguf.Options{}); !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "blk.1.ffn_gate_up_exps.weight") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("fused tensor with wrong ne: error %v, want gguf.ErrFormat naming the file and tensor", err)
	}
	if os.Getenv("QPPL_LLAMACPP_LIB") == "" {
		t.Log("QPPL_LLAMACPP_LIB unset: llama.cpp's agreement not checked")
		return
	}
	h := llamaHelper(t)
	a := llamaAgree(t, h, "gemma4 MoE fused F32", fused, demoWindows(t, dir, 3, 64))
	if !(a.maxDiff < 0.02) || !(a.relPPL < 1e-3) {
		t.Fatalf("llama.cpp's NLL on the fused file differs from qppl's by up to %g", a.maxDiff)
	}
	if db := maxAbsDiff(llamaNLL(t, h, swapped, a.ws), a.qppl); !(db > 10*a.maxDiff) {
		t.Fatalf("llama.cpp on the swapped fused file moves only %g (right file %g)", db, a.maxDiff)
	} else {
		t.Logf("llama.cpp on the swapped fused file: max |ΔNLL| %.3g", db)
	}
}

// sameBitCount counts equal float64 bits.
func sameBitCount(a, b []float64) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if math.Float64bits(a[i]) == math.Float64bits(b[i]) {
			n++
		}
	}
	return n
}
