package arch

import "github.com/qppl/qppl/checkpoint"

// gemma2 declares Gemma2ForCausalLM.
//
// transformers: models/gemma2/configuration_gemma2.py (Gemma2Config:
// num_key_value_heads 4, head_dim 256, hidden_activation
// "gelu_pytorch_tanh", max_position_embeddings 8192, rms_norm_eps 1e-6,
// rope_theta 10000, tie_word_embeddings True, attention_bias False,
// query_pre_attn_scalar 256, sliding_window 4096, final_logit_softcapping
// 30.0, attn_logit_softcapping 50.0; layer_types defaults to
// "sliding_attention" if (i + 1) % 2 else "full_attention": layer 0
// slides, layer 1 is global, ...) and models/gemma2/modeling_gemma2.py:
//
//   - Gemma2Model.forward: hidden_states = inputs_embeds · normalizer with
//     normalizer = torch.tensor(hidden_size**0.5, dtype=hidden_states.dtype):
//     the factor is rounded to the activation dtype (bf16 for the released
//     checkpoints: sqrt(3584) = 59.866… becomes 59.75, sqrt(2304) = 48 is
//     exact). qppl's float64 reference is transformers run in float64, so
//     it multiplies by math.Sqrt(hidden) in float64 (Spec.EmbedScale);
//   - Gemma2RMSNorm.forward: x·rsqrt(mean(x²)+eps) computed in float32, times
//     (1 + weight), then cast back (Spec.NormOffset);
//   - Gemma2MLP: down_proj(act(gate_proj(x)) · up_proj(x)) with act =
//     ACT2FN[hidden_activation], gelu_pytorch_tanh:
//     0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) (Spec.GeluTanh);
//   - Gemma2Attention: scaling = query_pre_attn_scalar**-0.5 (Spec.AttnScale);
//     eager_attention_forward: scores = q·kᵀ·scaling, then with softcap
//     scores = tanh(scores/softcap)·softcap, then the mask, then softmax;
//     self.sliding_window = config.sliding_window for a sliding_attention
//     layer (Spec.Window); bias = attention_bias on q, k, v, o_proj;
//   - Gemma2DecoderLayer.forward: h = x + post_attention_layernorm(attn(
//     input_layernorm(x))); out = h + post_feedforward_layernorm(mlp(
//     pre_feedforward_layernorm(h))) (Spec.SandwichNorms);
//   - Gemma2ForCausalLM.forward: logits = lm_head(norm(h)), then with
//     final_logit_softcapping logits = tanh(logits/cap)·cap
//     (Spec.FinalSoftcap).
func gemma2() Family {
	return Family{
		Name: "gemma2", Class: "Gemma2ForCausalLM",
		Defaults: Defaults{KVHeads: 4, HeadDim: 256, MaxPos: 8192, Eps: 1e-6, Theta: 10000, Tie: true},
		Quirks: func(r *checkpoint.ConfigReader, c *checkpoint.Config) {
			// Gemma2MLP reads hidden_activation; hidden_act is unused.
			c.HiddenAct = r.Str("hidden_activation", "gelu_pytorch_tanh")
			c.QueryPreAttnScalar = r.Float("query_pre_attn_scalar", 256)
			c.AttnLogitSoftcap = r.Float("attn_logit_softcapping", 50)
			c.FinalLogitSoftcap = r.Float("final_logit_softcapping", 30)
			gemmaWindows(r, c, func(i int) bool { return (i+1)%2 != 0 })
		},
		Layout: func(c *checkpoint.Config) Layout {
			return Layout{QKVBias: c.AttentionBias, OBias: c.AttentionBias, NormOffset: true, EmbedScale: true, SandwichNorms: true}
		},
		Fixture: Fixture{
			Tied:    true,
			HeadDim: 24, // ≠ hidden/heads, as Gemma 2's head_dim 256 is
			// Gemma-2-9B's keys with a window (32) shorter than the test
			// contexts and query_pre_attn_scalar ≠ head_dim (as 27B's 144).
			// The soft caps are Gemma 2's; the fixtures' scores and logits
			// reach them.
			Config: func(FixtureShape) map[string]any {
				return map[string]any{
					"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "gelu_pytorch_tanh",
					"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 20,
					"sliding_window": 32, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
					"attention_bias": false, "cache_implementation": "hybrid",
				}
			},
		},
	}
}

// gemmaWindows reads sliding_window and layer_types (absent: sliding(i)
// says which layers are sliding_attention layers); a null sliding_window
// (window 0: full attention, the layers keep their kind for gemma3's RoPE)
// or a null soft cap means none.
func gemmaWindows(r *checkpoint.ConfigReader, c *checkpoint.Config, sliding func(i int) bool) {
	if r.IsNull("attn_logit_softcapping") {
		c.AttnLogitSoftcap = 0
	}
	if r.IsNull("final_logit_softcapping") {
		c.FinalLogitSoftcap = 0
	}
	w := 0
	if !r.IsNull("sliding_window") {
		w = r.Positive("sliding_window", 4096)
	}
	types := readLayerTypes(r, c.NumHiddenLayers)
	if r.Err() != nil {
		return
	}
	sl := make([]bool, c.NumHiddenLayers)
	for i := range sl {
		sl[i] = sliding(i)
		if types != nil {
			sl[i] = types[i] == "sliding_attention"
		}
	}
	c.SlidingWindow, c.SlidingLayers = w, sl
}
