package reference

import (
	"math"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/internal/oracle"
)

// gemma2Config is a small Gemma 2 built in code: GQA, alternating
// sliding (window 8) and global layers, query_pre_attn_scalar ≠ head_dim.
func gemma2Config(attnCap, finalCap float64) *checkpoint.Config {
	c := *testConfigs()["mistral-mqa-untied"]
	c.ModelType, c.HiddenAct = "gemma2", "gelu_pytorch_tanh"
	c.NumKeyValueHeads, c.TieWordEmbeddings = 2, true
	c.QueryPreAttnScalar, c.AttnLogitSoftcap, c.FinalLogitSoftcap = 9, attnCap, finalCap
	c.SlidingWindow, c.SlidingLayers = 8, []bool{true, false}
	return &c
}

// gemma2Weights are random weights with gemma's extra norms (random
// around 0, as (1 + weight) is applied) and embeddings large enough that
// the caps below bite.
func gemma2Weights(cfg *checkpoint.Config) memSource {
	src := randomWeights(cfg, 31)
	aux := randomWeights(cfg, 32)
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		p := "model.layers." + string(rune('0'+i)) + "."
		src.t[p+"pre_feedforward_layernorm.weight"] = aux.t[p+"input_layernorm.weight"]
		src.t[p+"post_feedforward_layernorm.weight"] = aux.t[p+"post_attention_layernorm.weight"]
	}
	e := src.t["model.embed_tokens.weight"]
	for i := range e.data {
		e.data[i] *= 4
	}
	return src
}

// TestGemma2SoftCapping: Gemma 2 equals the oracle to 1e-9 with its soft
// caps (attention 50 and final 30 as released, and small caps 2 and 3 that
// change every score); a huge cap (1e12) equals no capping to 1e-9, and
// the small caps do differ from none (so the comparisons can fail).
func TestGemma2SoftCapping(t *testing.T) {
	toks := randomTokens(40, 37, 6)
	run := func(attnCap, finalCap float64) ([][]float64, [][]float64) {
		cfg := gemma2Config(attnCap, finalCap)
		src := gemma2Weights(cfg)
		b, err := newBackend(cfg, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := oracle.LogProbs(cfg, src.getter, toks, oracle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return allLogProbs(t, b, toks), want
	}
	none, _ := run(0, 0)
	for _, c := range []struct {
		attn, final float64
		likeNone    bool
	}{{50, 30, false}, {2, 3, false}, {2, 0, false}, {0, 3, false}, {1e12, 1e12, true}} {
		got, want := run(c.attn, c.final)
		if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
			t.Errorf("caps %g, %g: max |reference - oracle| = %g at pos %d id %d", c.attn, c.final, d, p, v)
		}
		d, _, _ := maxAbsDiff(got, none)
		if c.likeNone != (d <= 1e-9) {
			t.Errorf("caps %g, %g: max |Δ| from no capping %g, want ≤ 1e-9: %v", c.attn, c.final, d, c.likeNone)
		}
	}
	if math.IsNaN(none[0][0]) {
		t.Fatal("NaN")
	}
}
