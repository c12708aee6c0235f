package arch

import (
	"encoding/json"

	"github.com/qppl/qppl/checkpoint"
)

// qwen2 declares Qwen2ForCausalLM: llama with a bias on q, k and v (never
// on o) and Qwen's sliding-window rule.
//
// transformers: models/qwen2/configuration_qwen2.py (Qwen2Config:
// num_key_value_heads 32, max_position_embeddings 32768, rms_norm_eps
// 1e-6, rope_theta 10000, use_sliding_window False, sliding_window 4096,
// max_window_layers 28; layer i slides only when use_sliding_window and
// i >= max_window_layers) and models/qwen2/modeling_qwen2.py
// (Qwen2Attention: q, k, v_proj with bias=True, o_proj bias=False; head_dim
// from getattr(config, "head_dim", hidden_size // num_attention_heads)).
func qwen2() Family {
	return Family{
		Name: "qwen2", Class: "Qwen2ForCausalLM",
		Defaults: Defaults{KVHeads: 32, MaxPos: 32768, Eps: 1e-6, Theta: 10000, AttnBias: true},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			c.AttentionBias = true // Qwen2Attention: q/k/v always have a bias
			qwenSlidingWindow(r, c)
		},
		Layout: func(*checkpoint.Config) Layout { return Layout{QKVBias: true} },
		Fixture: Fixture{
			OmitStandardHeadDim: true,
			Config:              qwenFixtureConfig,
		},
	}
}

// qwenSlidingWindow reads the window of Qwen2Config and Qwen3Config into
// c: sliding_window is kept only when use_sliding_window (else None), and
// layer_types, when absent, is "sliding_attention" for layer i exactly
// when that window is not None and i >= max_window_layers (default 28);
// Qwen2Attention.__init__ then sets self.sliding_window =
// config.sliding_window for a "sliding_attention" layer, None otherwise
// (None: full causal attention, whatever layer_types says).
func qwenSlidingWindow(r *checkpoint.ConfigReader, c *checkpoint.Config) {
	if !r.Bool("use_sliding_window", false) || r.IsNull("sliding_window") {
		return
	}
	w := r.Positive("sliding_window", 4096)
	types := readLayerTypes(r, c.NumHiddenLayers)
	maxWin := r.Int("max_window_layers", 28)
	if r.Err() != nil {
		return
	}
	sl := make([]bool, c.NumHiddenLayers)
	some := false
	for i := range sl {
		if types != nil {
			sl[i] = types[i] == "sliding_attention"
		} else {
			sl[i] = i >= maxWin
		}
		some = some || sl[i]
	}
	if some {
		c.SlidingWindow, c.SlidingLayers = w, sl
	}
}

// readLayerTypes reads layer_types (nil when absent): one of
// "full_attention" or "sliding_attention" per layer (transformers'
// layer_type_validation accepts more kinds; those belong to families qppl
// does not compute).
func readLayerTypes(r *checkpoint.ConfigReader, layers int) []string {
	raw := r.Get("layer_types")
	if raw == nil || r.IsNull("layer_types") {
		return nil
	}
	var ts []string
	if err := json.Unmarshal(raw, &ts); err != nil {
		r.Fail("layer_types", "want a list of strings: %v", err)
		return nil
	}
	if len(ts) != layers {
		r.Fail("layer_types", "%d entries for %d layers", len(ts), layers)
		return nil
	}
	for i, t := range ts {
		if t != "full_attention" && t != "sliding_attention" {
			r.Fail("layer_types", "entry %d is %q, want full_attention or sliding_attention", i, t)
			return nil
		}
	}
	return ts
}

// qwenFixtureConfig is the config of Qwen2/Qwen3 releases (eps 1e-6, theta
// 1e6) with the sliding window switched on: a window of 32 tokens, shorter
// than the contexts the tests evaluate, on the layers from
// max_window_layers = 1 on (layer 0 attends to the whole context).
func qwenFixtureConfig(s FixtureShape) map[string]any {
	return map[string]any{
		"rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"use_sliding_window": true, "sliding_window": 32, "max_window_layers": min(1, s.Layers-1),
	}
}
