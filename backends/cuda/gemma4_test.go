package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
)

// TestGemma4PLECombine: ple_combine bit for bit against its Go rule
// out[l][t][p] = f32(f32(proj + f32(tab·ts))·s) (each operation rounded to
// fp32, no fused multiply-add), including the [T][L·P] → [L][T][P] layout.
func TestGemma4PLECombine(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	rng := rand.New(rand.NewPCG(4, 14))
	const T, L, P = 5, 3, 7
	n := T * L * P
	proj, tab := make([]float32, n), make([]float32, n)
	for i := range proj {
		proj[i], tab[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64()*0.1)
	}
	pp, err := allocCopy(d, f32le(proj))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := allocCopy(d, f32le(tab))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Alloc(int64(4 * n))
	if err != nil {
		t.Fatal(err)
	}
	ts, s := float32(math.Sqrt(P)), float32(1/math.Sqrt(2))
	if err := launchPLECombine(d, out, pp, pt, T, L, P, ts, s); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4*n)
	if err := d.CopyOut(b, out); err != nil {
		t.Fatal(err)
	}
	for tk := 0; tk < T; tk++ {
		for l := 0; l < L; l++ {
			for p := 0; p < P; p++ {
				i := (tk*L+l)*P + p
				want := float32(float32(proj[i]+float32(tab[i]*ts)) * s)
				got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*((l*T+tk)*P+p):]))
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("out[%d][%d][%d] = %v, want %v", l, tk, p, got, want)
				}
			}
		}
	}
}

// scoreNLL scores toks on b (NLL of every position after the first).
func scoreNLL(t *testing.T, b backends.Backend, toks []int32) []float64 {
	t.Helper()
	sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return sc.NLL
}

// TestGemma4SplitAndFusion: the gemma4_text fixture split over two
// devices so that the KV-shared layers (2, 3) run on another device than
// the layers whose keys and values they read (0, 1), run without GEMM
// fusion, and run with buffers planned for 16 tokens (grown for the
// window), gives scores bit-identical to one device with fusion (which
// fuses q|k|v on layer 0, the one layer with a v_proj that is not
// KV-shared).
func TestGemma4SplitAndFusion(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "gemma4_text", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	opt := Options{Name: "emu", Precision: "bf16", MaxTokens: 72, HeadRows: 16}
	one, err := New(m, emuDevices(t, 1, 1<<30), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if l0 := one.devs[0].layers[0]; !l0.fuse[fuseQKV] || !l0.fuse[fuseGU] {
		t.Fatalf("layer 0 does not fuse (q|k|v %v, gate|up %v): the fused path is not exercised", l0.fuse[fuseQKV], l0.fuse[fuseGU])
	}
	toks := testTokens(70, backendtest.Vocab, 5)
	want := scoreNLL(t, one, toks)

	p := one.Plan()
	d0 := p.Devices[0]
	budgets := []float64{float64(d0.Embed+d0.Activations+d0.Scratch+p.LayerBytes[0]+p.LayerBytes[1]+64) / 1e9, 1}
	optSplit := opt
	optSplit.SplitGB = budgets
	two, err := New(m, emuDevices(t, 2, 1<<30), optSplit)
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if p2 := two.Plan(); p2.Devices[0].EndLayer != 2 || p2.Devices[1].FirstLayer != 2 {
		t.Fatalf("split: device 0 layers [%d, %d), device 1 [%d, %d), want [0, 2) and [2, 4)",
			p2.Devices[0].FirstLayer, p2.Devices[0].EndLayer, p2.Devices[1].FirstLayer, p2.Devices[1].EndLayer)
	}
	optNF := opt
	optNF.NoFusion = true
	nf, err := New(m, emuDevices(t, 1, 1<<30), optNF)
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	optGrow := opt
	optGrow.MaxTokens = 16 // buffers and RoPE tables reallocated for the 70-token window
	grown, err := New(m, emuDevices(t, 1, 1<<30), optGrow)
	if err != nil {
		t.Fatal(err)
	}
	defer grown.Close()
	for name, b := range map[string]backends.Backend{"two devices": two, "no fusion": nf, "grown buffers": grown} {
		got := scoreNLL(t, b, toks)
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Errorf("%s: NLL[%d] = %v, one fused device %v", name, i, got[i], want[i])
				break
			}
		}
	}
}

// TestGemma4VariantsAgainstReference: each Gemma 4 feature switched away
// from the fixture's setting (v_proj on full layers, no per-layer inputs,
// no KV sharing, single-width MLP, attention biases, default layer types,
// no final soft cap, equal head sizes, other proportional RoPE parameters)
// computed by the emulator in fp32 against the float64 reference, within
// TestAgainstReference's fp32 tolerances.
func TestGemma4VariantsAgainstReference(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     map[string]any
		variant string
	}{
		{"fixture", nil, ""},
		{"moe (fused 3-D experts)", nil, "moe"},
		{"moe, 4 experts top 3, no per-layer inputs", map[string]any{"num_experts": 4, "top_k_experts": 3, "hidden_size_per_layer_input": nil}, "moe"},
		{"v_proj on full layers", map[string]any{"attention_k_eq_v": false}, ""},
		{"no per-layer inputs", map[string]any{"hidden_size_per_layer_input": nil}, ""},
		{"no KV sharing", map[string]any{"num_kv_shared_layers": 0}, ""},
		{"single-width MLP", map[string]any{"use_double_wide_mlp": false}, ""},
		{"attention biases", map[string]any{"attention_bias": true}, ""},
		{"default layer types, window 8", map[string]any{"layer_types": nil, "sliding_window": 8, "num_kv_shared_layers": 0}, ""},
		{"no final soft cap", map[string]any{"final_logit_softcapping": nil}, ""},
		{"global head_dim = head_dim", map[string]any{"global_head_dim": 24}, ""},
		{"proportional RoPE: half rotated, factor 2", map[string]any{"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 500.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "factor": 2.0},
		}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := fixtures.Defaults("gemma4_text")
			if err != nil {
				t.Fatal(err)
			}
			o.Vocab, o.Init, o.Config, o.Variant = 300, fixtures.InitRandom, c.cfg, c.variant
			dir := filepath.Join(t.TempDir(), "m")
			if err := fixtures.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			maxd, meand, _ := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 72}, testTokens(70, 300, 11))
			t.Logf("max |ΔNLL| %.3g, mean %.3g", maxd, meand)
			if !(maxd <= 1e-4 && meand <= 2e-5) {
				t.Errorf("max |ΔNLL| %.3g, mean %.3g, tolerance 1e-4, 2e-5", maxd, meand)
			}
		})
	}
}

// TestGemma4RefusesKVCache: a gemma4_text checkpoint with an FP8 KV cache
// (kv_cache_scheme) is refused with arch.ErrUnsupported naming it, as the
// reference refuses it, never computed without the cache's rounding.
func TestGemma4RefusesKVCache(t *testing.T) {
	dense := writeQuantized(t, "gemma4_text", "", false)
	q := filepath.Join(t.TempDir(), "kv")
	amax := make([][2][]float64, 4) // per layer, keys and values: one per-tensor amax
	for i := range amax {
		amax[i] = [2][]float64{{3}, {2}}
	}
	if err := quantizer.Quantize(dense, q, "W4A16", quantizer.Options{Seed: 3, KVCache: quantizer.KVCacheFP8, KVAmax: amax}); err != nil {
		t.Fatal(err)
	}
	_, err := New(openModel(t, q), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64})
	if !errors.Is(err, arch.ErrUnsupported) || !strings.Contains(err.Error(), "kv_cache_scheme") {
		t.Fatalf("New: %v, want a refusal naming kv_cache_scheme", err)
	}
}

// TestGemma4MoESchemesAgainstReference is TestSchemesAgainstReference for
// the gemma4_text "moe" fixture (fused 3-D experts in the dense
// checkpoint, per-expert Linears after quantization), with experts 32 wide
// so that every scheme's group size divides their down_proj input: every
// fixture quantizer scheme, emulated kernels in fp32 against the float64
// reference, within that test's tolerances.
func TestGemma4MoESchemesAgainstReference(t *testing.T) {
	o, err := fixtures.Defaults("gemma4_text")
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Variant, o.Config = 260, "moe", map[string]any{"moe_intermediate_size": 32}
	dense := filepath.Join(t.TempDir(), "dense")
	if err := fixtures.Write(dense, o); err != nil {
		t.Fatal(err)
	}
	schemes := quantizer.Schemes()
	if testing.Short() {
		schemes = schemes[:1]
	}
	for _, sc := range append([]string{""}, schemes...) {
		dir := dense
		if sc != "" {
			dir = filepath.Join(t.TempDir(), sc)
			if err := quantizer.Quantize(dense, dir, sc, quantizer.Options{Seed: 3, GroupSize: groupSize(sc)}); err != nil {
				t.Fatalf("%s: %v", sc, err)
			}
		}
		maxd, meand, _ := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64}, testTokens(64, 256, 9))
		tol, tolMean := 2e-4, 2e-5
		if sc != "" && quantizer.QuantizesActivations(sc) {
			tol, tolMean = 5e-2, 5e-3
		}
		t.Logf("%-14s max |ΔNLL| %.3g mean %.3g", sc, maxd, meand)
		if !(maxd <= tol && meand <= tolMean) { // NaN-safe
			t.Errorf("%s: max |ΔNLL| %.3g mean %.3g, tolerance %g, %g", sc, maxd, meand, tol, tolMean)
		}
	}
}
