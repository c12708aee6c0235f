package reference

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
)

// gemma4MoEFixture writes the gemma4_text "moe" fixture (4 layers of every
// kind, each with 8 experts of width 16, top 2, beside its dense MLP;
// window 32) with the given expert layout and config overrides.
func gemma4MoEFixture(t *testing.T, experts string, cfg map[string]any) string {
	t.Helper()
	o, err := fixtures.Defaults("gemma4_text")
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init, o.Variant, o.Experts, o.Config = 300, fixtures.InitRandom, "moe", experts, cfg
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGemma4MoE: the Gemma 4 MoE fixture — experts fused and 3-D as the
// BF16 release stores them — equals the independent oracle to 1e-9 at ctx
// 70 (> the window of 32) dense, W4A16-G32 and W8A8 (the quantizer writes
// one Linear per expert, as quantized releases do); the per-expert layout
// of the same weights gives the same bits; the experts change the model.
func TestGemma4MoE(t *testing.T) {
	toks := randomTokens(70, 300, 9)
	src := gemma4MoEFixture(t, "", nil)
	var dense [][]float64
	for _, scheme := range []string{"", "W4A16-G32", "W8A8"} {
		t.Run("scheme="+scheme, func(t *testing.T) {
			dir := src
			if scheme != "" {
				dir = filepath.Join(t.TempDir(), scheme)
				if err := quantizer.Quantize(src, dir, scheme, quantizer.Options{Seed: 3}); err != nil {
					t.Fatal(err)
				}
			}
			b, m := openBackend(t, dir)
			if scheme == "" {
				if !m.Has("model.layers.0.experts.gate_up_proj") || m.Has("model.layers.0.experts.0.gate_proj.weight") {
					t.Fatal("the dense fixture does not store its experts fused")
				}
			} else if !m.Has("model.layers.3.experts.7.down_proj.weight_packed") && !m.Has("model.layers.3.experts.7.down_proj.weight") {
				t.Fatal("the quantized fixture has no per-expert Linears")
			}
			got := allLogProbs(t, b, toks)
			get, opt := quantOracle(t, m)
			want, err := oracle.LogProbs(m.Config, get, toks, opt)
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			if scheme == "" {
				dense = got
				checkRowDecode(t, b, got, toks)
			} else if d, _, _ := maxAbsDiff(got, dense); d < 1e-6 {
				t.Errorf("quantized log-probs within %g of the dense model", d)
			}
		})
	}
	t.Run("per-expert layout", func(t *testing.T) {
		b, m := openBackend(t, gemma4MoEFixture(t, fixtures.ExpertsPerExpert, nil))
		if m.Has("model.layers.0.experts.gate_up_proj") {
			t.Fatal("per-expert fixture stores fused experts")
		}
		got := allLogProbs(t, b, toks)
		for i := range got {
			for j := range got[i] {
				if math.Float64bits(got[i][j]) != math.Float64bits(dense[i][j]) {
					t.Fatalf("log-prob [%d][%d]: per-expert %v, fused %v", i, j, got[i][j], dense[i][j])
				}
			}
		}
	})
	t.Run("experts change the model", func(t *testing.T) {
		b, _ := openBackend(t, gemma4MoEFixture(t, "", map[string]any{"enable_moe_block": false}))
		if d, _, _ := maxAbsDiff(allLogProbs(t, b, toks), dense); d < 1e-6 {
			t.Errorf("the MoE fixture is within %g of its dense-only model", d)
		}
	})
}

// moeVariant writes a copy of the F32 gemma4 MoE fixture src with E
// experts, top k: expert j is the fixture's expert pick[j], the router is
// zero (every probability 1/E: a uniform router, all tied) and
// per_expert_scale is scale for every expert.
func moeVariant(t *testing.T, src string, pick []int, k int, scale float64) string {
	t.Helper()
	m, err := checkpoint.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	E := len(pick)
	var ts []checkpoint.WriteTensor
	for _, name := range m.Names() {
		v, shape, err := m.ReadFloat64(name)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, ".router.proj.weight"):
			shape = []int{E, shape[1]}
			v = make([]float64, E*shape[1])
		case strings.HasSuffix(name, ".router.per_expert_scale"):
			shape = []int{E}
			v = make([]float64, E)
			for i := range v {
				v[i] = scale
			}
		case strings.HasSuffix(name, ".experts.gate_up_proj"), strings.HasSuffix(name, ".experts.down_proj"):
			per := shape[1] * shape[2]
			var out []float64
			for _, e := range pick {
				out = append(out, v[e*per:(e+1)*per]...)
			}
			v, shape = out, []int{E, shape[1], shape[2]}
		}
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		}
		ts = append(ts, checkpoint.WriteTensor{Name: name, DType: checkpoint.F32, Shape: shape, Data: b})
	}
	dir := filepath.Join(t.TempDir(), "variant")
	copyDir(t, src, dir)
	if err := checkpoint.WriteFile(filepath.Join(dir, checkpoint.SafetensorsFile), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, checkpoint.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["num_experts"], cfg["top_k_experts"] = E, k
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.ConfigFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGemma4MoEInvariants: identical experts under a uniform router equal
// that one expert as a dense MLP (with or without a per-expert scale); a
// fully tied router over 8 experts, top 2, takes experts 6 and 5 as
// torch.topk does (= a 2-expert model of those two), not the lower indices
// 0 and 1 (the control); every case equals the oracle.
func TestGemma4MoEInvariants(t *testing.T) {
	toks := randomTokens(50, 300, 3)
	src := gemma4MoEFixture(t, "", nil) // F32, fused
	nll := func(dir string) [][]float64 {
		b, m := openBackend(t, dir)
		got := allLogProbs(t, b, toks)
		want, err := oracle.LogProbs(m.Config, m.ReadFloat64, toks, oracle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
			t.Errorf("%s: max |reference - oracle| = %g at pos %d id %d", filepath.Base(dir), d, p, v)
		}
		return got
	}
	same := func(a, b [][]float64, what string, equal bool) {
		t.Helper()
		d, p, v := maxAbsDiff(a, b)
		if equal && d > 1e-12 {
			t.Errorf("%s: max |Δ| = %g at pos %d id %d", what, d, p, v)
		}
		if !equal && d < 1e-6 {
			t.Errorf("%s: within %g: the control does not differ", what, d)
		}
	}
	one := nll(moeVariant(t, src, []int{3}, 1, 1))
	same(nll(moeVariant(t, src, []int{3, 3, 3, 3, 3, 3, 3, 3}, 2, 1)), one, "8 copies of expert 3, uniform router, top 2 vs expert 3 alone", true)
	same(nll(moeVariant(t, src, []int{3, 3, 3, 3}, 3, 1)), one, "4 copies, top 3 vs expert 3 alone", true)
	same(nll(moeVariant(t, src, []int{3, 3, 3, 3}, 3, 0.5)), nll(moeVariant(t, src, []int{3}, 1, 0.5)), "per_expert_scale 0.5: 4 copies vs one", true)
	same(one, nll(moeVariant(t, src, []int{3}, 1, 0.5)), "per_expert_scale 0.5 vs 1 (control)", false)

	pair := nll(moeVariant(t, src, []int{5, 6}, 2, 1))
	tied := nll(moeVariant(t, src, []int{0, 1, 2, 3, 4, 5, 6, 7}, 2, 1))
	same(tied, pair, "tied router over 8 experts, top 2 vs experts 5 and 6 (torch.topk's choice)", true)
	same(tied, nll(moeVariant(t, src, []int{0, 1}, 2, 1)), "tied router vs experts 0 and 1 (the lower indices: control)", false)
}
