package reference

import (
	"math"
	"path/filepath"
	"testing"

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
