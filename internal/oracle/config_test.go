package oracle

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// TestSettingsMatchArch checks the oracle's own reading of config.json
// against package arch's family declarations, for every family arch
// declares (so a family the oracle does not know fails here) and configs
// that lean on each default: absent keys, null keys, explicit keys,
// attention_bias, rope_scaling and rope_parameters.
func TestSettingsMatchArch(t *testing.T) {
	variants := []map[string]any{
		{},
		{"num_key_value_heads": nil, "head_dim": nil},
		{"num_key_value_heads": 2, "head_dim": 6, "rms_norm_eps": 1e-5, "rope_theta": 5e5, "tie_word_embeddings": true},
		{"num_key_value_heads": 1, "attention_bias": true, "num_experts": 6, "num_experts_per_tok": 3, "norm_topk_prob": true, "moe_intermediate_size": 10},
		{"num_key_value_heads": 2, "num_experts": 4, "decoder_sparse_step": 2, "mlp_only_layers": []int{1, 7}, "num_hidden_layers": 4},
		{"num_key_value_heads": 2, "num_experts": 4, "mlp_only_layers": []int{0}, "num_experts_per_tok": 2},
		{"num_key_value_heads": 2, "num_local_experts": 3, "num_experts_per_tok": 1, "rms_norm_eps": nil, "rope_theta": nil},
		{"num_key_value_heads": 4, "rope_scaling": map[string]any{"rope_type": "linear", "factor": 2.0}},
		{"num_key_value_heads": 2, "rope_parameters": map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
			"high_freq_factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 20000.0}},
		// Sliding windows: per-layer rules of each family.
		{"num_key_value_heads": 2, "sliding_window": 7},
		{"num_key_value_heads": 2, "sliding_window": nil, "use_sliding_window": true},
		{"num_key_value_heads": 2, "use_sliding_window": true, "sliding_window": 3, "max_window_layers": 1},
		{"num_key_value_heads": 2, "use_sliding_window": true, "max_window_layers": 0},
		{"num_key_value_heads": 2, "use_sliding_window": true, "sliding_window": 5, "layer_types": []string{"sliding_attention", "full_attention"}},
		{"num_key_value_heads": 2, "use_sliding_window": false, "sliding_window": 5, "layer_types": []string{"sliding_attention", "sliding_attention"}},
		// Gemma's scalar and soft caps.
		{"num_key_value_heads": 2, "query_pre_attn_scalar": 16, "attn_logit_softcapping": nil, "final_logit_softcapping": 12.5},
		{"num_key_value_heads": 2, "attn_logit_softcapping": 7.0, "final_logit_softcapping": nil, "sliding_window": nil},
		{"num_key_value_heads": 2, "sliding_window_pattern": 2, "rope_local_base_freq": 500.0, "sliding_window": 3},
		{"num_key_value_heads": 2, "sliding_window_pattern": 1, "rope_scaling": map[string]any{"rope_type": "linear", "factor": 8.0}},
	}
	names := arch.Names()
	if len(names) == 0 {
		t.Fatal("arch declares no family")
	}
	for _, name := range names {
		checked := 0
		for _, v := range variants {
			c := map[string]any{"model_type": name, "vocab_size": 40, "hidden_size": 32, "intermediate_size": 24,
				"num_hidden_layers": 2, "num_attention_heads": 4}
			for k, x := range v {
				c[k] = x
			}
			if fam, _ := arch.Lookup(name); fam.Fixture.Nest != nil && fam.Wrapper != nil {
				// a multimodal wrapper (gemma3): the text decoder's keys
				// under text_config, as its released configs hold them
				c = fam.Fixture.Nest(c)
			}
			js, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := arch.ParseConfig(js, "config.json")
			if err != nil {
				// A default the family cannot take at these sizes (mistral's
				// 8 key/value heads for 4 heads) is skipped: the oracle is
				// never asked about a config arch refuses.
				continue
			}
			spec, err := arch.For(cfg)
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			if spec.Gemma4 != nil { // gemma4_text: the oracle's own network (gemma4.go)
				checked++
				checkG4Settings(t, string(js), cfg, spec)
				continue
			}
			if spec.GptOss != nil { // gpt_oss: the oracle's own network (gptoss.go)
				checked++
				checkGOSettings(t, string(js), cfg, spec)
				continue
			}
			st, err := readSettings(cfg)
			if err != nil {
				t.Errorf("%s: oracle: %v", js, err)
				continue
			}
			want := settings{
				modelType: name, vocab: cfg.VocabSize, hidden: cfg.HiddenSize, inter: cfg.IntermediateSize,
				layers: cfg.NumHiddenLayers, heads: cfg.NumAttentionHeads, kvHeads: cfg.NumKeyValueHeads,
				headDim: cfg.HeadDim, eps: cfg.RMSNormEps, theta: cfg.RopeTheta, rope: cfg.RopeScaling,
				tied: cfg.TieWordEmbeddings, qkvBias: spec.QKVBias, oBias: spec.OBias, qkNorm: spec.QKNorm,
				moe: spec.MoE, windows: make([]int, spec.Layers),
				gemma:   spec.NormOffset && spec.EmbedScale && spec.SandwichNorms && spec.GeluTanh,
				attnCap: spec.AttnSoftcap, finalCap: spec.FinalSoftcap, prefix: spec.Prefix,
			}
			if want.gemma {
				want.queryScalar = 1 / (spec.AttnScale * spec.AttnScale)
			}
			if want.localTheta = spec.LocalRopeTheta; want.localTheta > 0 {
				want.local = make([]bool, spec.Layers)
				for i := range want.local {
					want.local[i] = spec.LocalRope(i)
				}
			}
			for i := range want.windows {
				want.windows[i] = spec.Window(i)
			}
			checked++
			if !equalSettings(st, want) {
				t.Errorf("%s:\noracle %+v\n  arch %+v", js, st, want)
			}
		}
		// The hybrid qwen3_5 families refuse the two layer_types naming
		// sliding_attention (Qwen3_5DecoderLayer would have no token mixer);
		// gemma4_text the flat llama3 rope_parameters (it has one entry per
		// layer type).
		notApplicable := 0
		if strings.HasPrefix(name, "qwen3_5") {
			notApplicable = 2
		}
		if name == "gemma4_text" || name == "gemma4" {
			notApplicable = 1
		}
		if name == "gemma3" { // Gemma3ForConditionalGeneration applies no final soft cap: refused
			notApplicable = 1
		}
		if checked < len(variants)-1-notApplicable {
			t.Errorf("%s: only %d of %d configs accepted by arch", name, checked, len(variants))
		}
	}
	// Every name the oracle knows is declared by arch (no stale family).
	for _, name := range []string{"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3"} {
		if _, _, _, _, ok := familyDefaults(name); ok && !slices.Contains(names, name) {
			t.Errorf("oracle knows %s, arch does not declare it", name)
		}
	}
}

func equalSettings(a, b settings) bool {
	ra, rb := a.rope, b.rope
	ma, mb := a.moe, b.moe
	if !slices.Equal(a.windows, b.windows) {
		return false
	}
	a.rope, b.rope, a.moe, b.moe, a.windows, b.windows = nil, nil, nil, nil, nil, nil
	if !reflect.DeepEqual(a, b) || (ma == nil) != (mb == nil) {
		return false
	}
	if ma != nil && (ma.Experts != mb.Experts || ma.TopK != mb.TopK || ma.Intermediate != mb.Intermediate ||
		ma.NormTopK != mb.NormTopK || !slices.Equal(ma.Sparse, mb.Sparse)) {
		return false
	}
	if (ra == nil) != (rb == nil) {
		return false
	}
	return ra == nil || *ra == *rb
}

// checkG4Settings compares the oracle's reading of a gemma4_text config
// with arch's.
func checkG4Settings(t *testing.T, js string, cfg *checkpoint.Config, spec *arch.Spec) {
	t.Helper()
	g, err := readG4(cfg)
	if err != nil {
		t.Errorf("%s: oracle: %v", js, err)
		return
	}
	a := spec.Gemma4
	got := []any{g.vocab, g.hidden, g.inter, g.layers, g.heads, g.kvHeads, g.headDim, g.globalKV, g.globalHeadDim,
		g.eps, g.tied, g.bias, g.kEqV, g.doubleWide, g.firstShared, g.ple, g.pleVocab, g.full,
		g.slidingTheta, g.fullTheta, g.partial, g.factor, g.finalCap, g.prefix}
	prefix := spec.Prefix
	if prefix == "" {
		prefix = "model."
	}
	want := []any{spec.Vocab, spec.Hidden, spec.Intermediate, spec.Layers, spec.Heads, spec.KVHeads, spec.HeadDim, a.GlobalKVHeads, a.GlobalHeadDim,
		spec.Eps, spec.TiedHead, spec.QKVBias, a.KEqV, a.DoubleWide, a.Shared, a.PLE, a.PLEVocab, a.Full,
		a.SlidingTheta, a.FullTheta, a.FullPartial, a.FullFactor, spec.FinalSoftcap, prefix}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\noracle %v\n  arch %v", js, got, want)
	}
	for i := 0; i < spec.Layers; i++ {
		if w := spec.Window(i); (w == 0) != g.full[i] || (w != 0 && w != g.window) || g.source(i) != a.KVSource(i) {
			t.Errorf("%s: layer %d: arch window %d, source %d; oracle full %v window %d source %d", js, i, w, a.KVSource(i), g.full[i], g.window, g.source(i))
		}
	}
}

// checkGOSettings compares the oracle's reading of a gpt_oss config with
// arch's.
func checkGOSettings(t *testing.T, js string, cfg *checkpoint.Config, spec *arch.Spec) {
	t.Helper()
	g, err := readGO(cfg)
	if err != nil {
		t.Errorf("%s: oracle: %v", js, err)
		return
	}
	windows := make([]int, spec.Layers)
	for i := range windows {
		windows[i] = spec.Window(i)
	}
	freqs, scale, err := g.invFreq()
	if err != nil {
		t.Errorf("%s: oracle: %v", js, err)
		return
	}
	wantFreqs := spec.RopeInvFreq()
	for i := range freqs {
		if d := math.Abs(freqs[i] - wantFreqs[i]); d > 1e-12*wantFreqs[i] {
			t.Errorf("%s: inv_freq[%d]: oracle %v, arch %v", js, i, freqs[i], wantFreqs[i])
		}
	}
	if ws := arch.RopeAttentionFactor(cfg.RopeScaling); math.Abs(scale-ws) > 1e-15 {
		t.Errorf("%s: rope attention factor: oracle %v, arch %v", js, scale, ws)
	}
	got := []any{g.vocab, g.hidden, g.inter, g.layers, g.heads, g.kvHeads, g.headDim, g.eps, g.theta, g.tied, g.bias, g.bias,
		g.experts, g.topK, g.windows, g.alpha, g.limit}
	want := []any{spec.Vocab, spec.Hidden, spec.Intermediate, spec.Layers, spec.Heads, spec.KVHeads, spec.HeadDim, spec.Eps, cfg.RopeTheta, spec.TiedHead, spec.QKVBias, spec.OBias,
		spec.MoE.Experts, spec.MoE.TopK, windows, spec.GptOss.Alpha, spec.GptOss.Limit}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\noracle %v\n  arch %v", js, got, want)
	}
}

// TestGptOssRopeMatchesArch: the oracle's YaRN (and its defaults) against
// arch's for gpt_oss configs: absent rope_scaling (GptOssConfig's yarn),
// truncate true and false, explicit attention_factor, beta defaults (0 and
// null mean 32 and 1), original_max_position_embeddings absent (then
// max_position_embeddings), and rope_parameters with rope_theta.
func TestGptOssRopeMatchesArch(t *testing.T) {
	for _, rope := range []map[string]any{
		nil,
		{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false, "original_max_position_embeddings": 4096}},
		{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512}},
		{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0, "beta_fast": 0, "beta_slow": nil, "attention_factor": 1.25, "truncate": true}},
		{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 16.0, "rope_theta": 50000.0, "truncate": false}},
		{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 64}},
	} {
		c := map[string]any{"model_type": "gpt_oss", "vocab_size": 40, "hidden_size": 64, "intermediate_size": 32,
			"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
			"max_position_embeddings": 8192, "num_local_experts": 4, "num_experts_per_tok": 2}
		for k, v := range rope {
			c[k] = v
		}
		js, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := arch.ParseConfig(js, "config.json")
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		spec, err := arch.For(cfg)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if cfg.RopeScaling == nil || cfg.RopeScaling.Type != "yarn" {
			t.Fatalf("%s: rope %+v, want yarn", js, cfg.RopeScaling)
		}
		checkGOSettings(t, string(js), cfg, spec)
	}
}
