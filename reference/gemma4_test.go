package reference

import (
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/internal/oracle"
)

// TestGemma4Variants: the gemma4_text fixture (4 layers: sliding, full with
// k = v, KV-shared sliding, KV-shared full; per-layer inputs; double-wide
// shared MLPs; window 32) and variants switching each feature off or
// changing it equal the independent oracle to 1e-9 on 70 tokens, and each
// variant differs from the fixture (so the feature is exercised).
func TestGemma4Variants(t *testing.T) {
	toks := randomTokens(70, 300, 9)
	run := func(t *testing.T, cfg map[string]any) [][]float64 {
		o, err := fixtures.Defaults("gemma4_text")
		if err != nil {
			t.Fatal(err)
		}
		o.Vocab, o.Init, o.Config = 300, fixtures.InitRandom, cfg
		dir := filepath.Join(t.TempDir(), "m")
		if err := fixtures.Write(dir, o); err != nil {
			t.Fatal(err)
		}
		b, m := openBackend(t, dir)
		got := allLogProbs(t, b, toks)
		want, err := oracle.LogProbs(m.Config, m.ReadFloat64, toks, oracle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
			t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
		}
		return got
	}
	base := run(t, nil)
	for _, c := range []struct {
		name string
		cfg  map[string]any
	}{
		{"v_proj on full layers", map[string]any{"attention_k_eq_v": false}},
		{"no per-layer inputs", map[string]any{"hidden_size_per_layer_input": nil}},
		{"no KV sharing", map[string]any{"num_kv_shared_layers": 0}},
		{"KV sharing of every layer is none", map[string]any{"num_kv_shared_layers": 4}},
		{"single-width MLP", map[string]any{"use_double_wide_mlp": false}},
		{"attention biases", map[string]any{"attention_bias": true}},
		{"default layer types, window 8", map[string]any{"layer_types": nil, "sliding_window": 8, "num_kv_shared_layers": 0}},
		{"no final soft cap", map[string]any{"final_logit_softcapping": nil}},
		{"global head_dim = head_dim", map[string]any{"global_head_dim": 24}},
		{"proportional RoPE: half rotated, factor 2", map[string]any{"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 500.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "factor": 2.0},
		}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := run(t, c.cfg)
			if d, _, _ := maxAbsDiff(got, base); d <= 1e-9 {
				t.Errorf("equals the fixture (max |Δ| %g): the variant is not exercised", d)
			}
		})
	}
}
