package oracle

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/qppl/qppl/checkpoint"
)

// settings is what the oracle needs from config.json, resolved by the
// oracle's own reading of the transformers config classes (written apart
// from package arch, and checked against its declarations by
// TestSettingsMatchArch, so that a wrong default in one shows up as a
// disagreement).
type settings struct {
	modelType                    string
	vocab, hidden, inter, layers int
	heads, kvHeads, headDim      int
	eps, theta                   float64
	rope                         *checkpoint.RopeScaling
	tied                         bool
	qkvBias, oBias, qkNorm       bool
	moe                          *checkpoint.MoE // nil: dense
	windows                      []int           // per layer: sliding attention window, 0 full
	gemma                        bool            // Gemma 2 norms, embedding scale, GeGLU, post norms
	queryScalar                  float64         // query_pre_attn_scalar, 0: head_dim
	attnCap, finalCap            float64         // soft caps, 0: none
	localTheta                   float64         // gemma3: RoPE base of the local layers, 0: none
	local                        []bool          // gemma3: which layers use it
	prefix                       string          // the text decoder's module prefix; "": "model."
}

// familyDefaults are the constructor defaults of LlamaConfig,
// MistralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig and
// MixtralConfig (transformers models/<name>/configuration_<name>.py) that
// the oracle reads: key/value heads (0: num_attention_heads), head_dim (0:
// hidden/heads), rms_norm_eps and rope_theta.
func familyDefaults(modelType string) (kvHeads, headDim int, eps, theta float64, ok bool) {
	switch modelType {
	case "llama":
		return 0, 0, 1e-6, 1e4, true
	case "mistral":
		return 8, 0, 1e-6, 1e4, true
	case "qwen2":
		return 32, 0, 1e-6, 1e4, true
	case "qwen3":
		return 32, 128, 1e-6, 1e4, true
	case "qwen3_moe":
		return 4, 0, 1e-6, 1e4, true // Qwen3MoeConfig has no head_dim: getattr falls back to hidden/heads
	case "mixtral":
		return 8, 0, 1e-5, 1e6, true
	case "phi3":
		return 0, 0, 1e-5, 1e4, true
	case "gemma2":
		return 4, 256, 1e-6, 1e4, true
	case "gemma3_text", "gemma3": // Gemma3TextConfig (gemma3: its text_config)
		return 4, 256, 1e-6, 1e6, true
	case "qwen3_5", "qwen3_5_text": // Qwen3_5TextConfig
		return 4, 256, 1e-6, 1e4, true
	case "qwen3_5_moe", "qwen3_5_moe_text": // Qwen3_5MoeTextConfig
		return 2, 256, 1e-6, 1e4, true
	}
	return 0, 0, 0, 0, false
}

// expertNames are the module names of a mixture-of-experts layer under
// "model.layers.{i}.": Qwen3MoeSparseMoeBlock (mlp.gate,
// mlp.experts.{e}.{gate,up,down}_proj) and MixtralSparseMoeBlock
// (block_sparse_moe.gate, block_sparse_moe.experts.{e}.{w1,w3,w2}).
func expertNames(modelType string) (router, gate, up, down string) {
	if modelType == "mixtral" {
		return "block_sparse_moe.gate", "block_sparse_moe.experts.%d.w1", "block_sparse_moe.experts.%d.w3", "block_sparse_moe.experts.%d.w2"
	}
	return "mlp.gate", "mlp.experts.%d.gate_proj", "mlp.experts.%d.up_proj", "mlp.experts.%d.down_proj"
}

// readSettings reads cfg. A config with its raw JSON (cfg.Raw) is read from
// that JSON alone, whatever its resolved fields say; a config built in
// code (Raw nil) is taken field by field.
func readSettings(cfg *checkpoint.Config) (settings, error) {
	if cfg == nil {
		return settings{}, fmt.Errorf("oracle: nil config")
	}
	if cfg.Raw == nil {
		s := settings{
			modelType: cfg.ModelType, vocab: cfg.VocabSize, hidden: cfg.HiddenSize, inter: cfg.IntermediateSize,
			layers: cfg.NumHiddenLayers, heads: cfg.NumAttentionHeads, kvHeads: cfg.NumKeyValueHeads,
			headDim: cfg.HeadDim, eps: cfg.RMSNormEps, theta: cfg.RopeTheta, rope: cfg.RopeScaling,
			tied: cfg.TieWordEmbeddings,
		}
		if s.kvHeads == 0 {
			s.kvHeads = s.heads
		}
		if s.headDim == 0 && s.heads > 0 {
			s.headDim = s.hidden / s.heads
		}
		s.moe = cfg.MoE
		s.gemma = cfg.ModelType == "gemma2" || cfg.ModelType == "gemma3_text" || cfg.ModelType == "gemma3"
		s.queryScalar, s.attnCap, s.finalCap = cfg.QueryPreAttnScalar, cfg.AttnLogitSoftcap, cfg.FinalLogitSoftcap
		if s.localTheta = cfg.RopeLocalTheta; s.localTheta > 0 {
			s.local = cfg.SlidingLayers
		}
		s.windows = make([]int, max(s.layers, 0))
		for i := range s.windows {
			if cfg.SlidingLayers == nil || cfg.SlidingLayers[i] {
				s.windows[i] = cfg.SlidingWindow
			}
		}
		return s, s.layout(cfg.AttentionBias)
	}
	raw := cfg.Raw // replaced by text_config's object for a multimodal qwen3_5
	var s settings
	str := func(key string) string {
		var v string
		_ = json.Unmarshal(raw[key], &v)
		return v
	}
	// num reads a number; has reports a non-null value.
	has := func(key string) bool { v, ok := raw[key]; return ok && string(v) != "null" }
	num := func(key string, def float64) float64 {
		if !has(key) {
			return def
		}
		var v float64
		_ = json.Unmarshal(raw[key], &v)
		return v
	}
	boolean := func(key string, def bool) bool {
		if !has(key) {
			return def
		}
		var v bool
		_ = json.Unmarshal(raw[key], &v)
		return v
	}
	s.modelType = str("model_type")
	kvDef, hdDef, epsDef, thetaDef, ok := familyDefaults(s.modelType)
	if !ok {
		return s, fmt.Errorf("oracle: unsupported model_type %q", s.modelType)
	}
	q35 := isQwen35(s.modelType)
	tiedDef := s.modelType == "gemma2" || s.modelType == "gemma3_text" // Gemma2Config ties by default
	// text is the model_type of the text decoder's config class: gemma3
	// (Gemma3Config) holds a Gemma3TextConfig under text_config.
	text := s.modelType
	var sizeDef map[string]float64
	if s.modelType == "gemma3" {
		text = "gemma3_text"
		if !has("text_config") {
			return s, fmt.Errorf("oracle: gemma3 without text_config")
		}
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(raw["text_config"], &sub); err != nil {
			return s, fmt.Errorf("oracle: text_config: %v", err)
		}
		// PreTrainedModel.tie_weights reads the text config's
		// tie_word_embeddings (Gemma3TextConfig: True); a top-level key
		// that says otherwise is not taken.
		// Gemma3Config's own key (PretrainedConfig: True) is the one a
		// newer transformers would read: the two must agree.
		top := boolean("tie_word_embeddings", true)
		raw = sub
		s.prefix = "model.language_model."
		tiedDef = true
		if top != boolean("tie_word_embeddings", true) {
			return s, fmt.Errorf("oracle: gemma3 tie_word_embeddings differs between the wrapper and text_config")
		}
	}
	if text == "gemma3_text" {
		// Gemma3TextConfig.__init__'s sizes (released text_configs omit them).
		sizeDef = map[string]float64{"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8}
	}
	if q35 && has("text_config") {
		// Qwen3_5Config: the text model's keys are under text_config; the
		// wrapper's own tie_word_embeddings (False by default) decides.
		tiedDef = boolean("tie_word_embeddings", false)
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(raw["text_config"], &sub); err != nil {
			return s, fmt.Errorf("oracle: text_config: %v", err)
		}
		if _, top := raw["tie_word_embeddings"]; !top {
			_ = json.Unmarshal(sub["tie_word_embeddings"], &tiedDef)
		}
		raw = sub
		delete(raw, "tie_word_embeddings")
		s.prefix = "model.language_model."
	}
	s.vocab = int(num("vocab_size", sizeDef["vocab_size"]))
	s.hidden = int(num("hidden_size", sizeDef["hidden_size"]))
	s.inter = int(num("intermediate_size", sizeDef["intermediate_size"]))
	s.layers = int(num("num_hidden_layers", sizeDef["num_hidden_layers"]))
	s.heads = int(num("num_attention_heads", sizeDef["num_attention_heads"]))
	if _, present := raw["num_key_value_heads"]; kvDef == 0 || present {
		kvDef = s.heads // absent in llama, or null: num_attention_heads
	}
	s.kvHeads = int(num("num_key_value_heads", float64(kvDef)))
	if _, present := raw["head_dim"]; (hdDef == 0 || present) && s.heads > 0 {
		hdDef = s.hidden / s.heads
	}
	s.headDim = int(num("head_dim", float64(hdDef)))
	s.eps = num("rms_norm_eps", epsDef)
	s.theta = num("rope_theta", thetaDef)
	s.tied = boolean("tie_word_embeddings", tiedDef)
	rope, theta, err := readRope(raw)
	if err != nil {
		return s, err
	}
	s.rope = rope
	if theta > 0 {
		s.theta = theta
	}
	if s.modelType == "qwen3_moe" {
		// Qwen3MoeConfig defaults; Qwen3MoeDecoderLayer: layer i is sparse
		// when i ∉ mlp_only_layers, num_experts > 0 and (i+1) % step == 0.
		m := &checkpoint.MoE{Experts: int(num("num_experts", 128)), TopK: int(num("num_experts_per_tok", 8)),
			Intermediate: int(num("moe_intermediate_size", 768)), NormTopK: boolean("norm_topk_prob", false)}
		step := int(num("decoder_sparse_step", 1))
		var only []int
		if has("mlp_only_layers") {
			_ = json.Unmarshal(raw["mlp_only_layers"], &only)
		}
		if m.Experts > 0 && step > 0 {
			m.Sparse = make([]bool, s.layers)
			for i := range m.Sparse {
				m.Sparse[i] = (i+1)%step == 0 && !slices.Contains(only, i)
			}
			s.moe = m
		}
	}
	if s.modelType == "qwen3_5_moe" || s.modelType == "qwen3_5_moe_text" {
		// Qwen3_5MoeDecoderLayer: every layer a Qwen3_5MoeSparseMoeBlock
		// (256 experts of 512, top 8, always renormalised); there is no
		// intermediate_size: arch and the oracle size buffers by the experts'.
		m := &checkpoint.MoE{Experts: int(num("num_experts", 256)), TopK: int(num("num_experts_per_tok", 8)),
			Intermediate: int(num("moe_intermediate_size", 512)), NormTopK: true, Sparse: make([]bool, s.layers),
			SharedIntermediate: int(num("shared_expert_intermediate_size", 512))}
		for i := range m.Sparse {
			m.Sparse[i] = true
		}
		if !has("intermediate_size") {
			s.inter = m.Intermediate
		}
		s.moe = m
	}
	if s.modelType == "mixtral" {
		// MixtralDecoderLayer: every layer is a MixtralSparseMoeBlock of
		// intermediate_size experts, weights always renormalised.
		m := &checkpoint.MoE{Experts: int(num("num_local_experts", 8)), TopK: int(num("num_experts_per_tok", 2)),
			Intermediate: s.inter, NormTopK: true, Sparse: make([]bool, s.layers)}
		for i := range m.Sparse {
			m.Sparse[i] = true
		}
		s.moe = m
	}
	if s.modelType == "phi3" {
		f := num("partial_rotary_factor", 1)
		var rp map[string]any
		if has("rope_parameters") && json.Unmarshal(raw["rope_parameters"], &rp) == nil {
			if v, ok := rp["partial_rotary_factor"].(float64); ok {
				f = v
			}
		}
		if f != 1 {
			return s, fmt.Errorf("oracle: phi3 partial_rotary_factor %v", f)
		}
	}
	if s.windows, err = readWindows(raw, text, s.layers); err != nil {
		return s, err
	}
	if s.modelType == "gemma2" {
		// Gemma2Config: query_pre_attn_scalar 256, attn_logit_softcapping
		// 50, final_logit_softcapping 30 (null: none); Gemma2MLP's
		// hidden_activation must be the tanh gelu.
		s.gemma = true
		s.queryScalar = num("query_pre_attn_scalar", 256)
		s.attnCap, s.finalCap = num("attn_logit_softcapping", 50), num("final_logit_softcapping", 30)
		if _, given := raw["attn_logit_softcapping"]; given && !has("attn_logit_softcapping") {
			s.attnCap = 0
		}
		if _, given := raw["final_logit_softcapping"]; given && !has("final_logit_softcapping") {
			s.finalCap = 0
		}
		if act := str("hidden_activation"); act != "" && act != "gelu_pytorch_tanh" {
			return s, fmt.Errorf("oracle: gemma2 hidden_activation %q", act)
		}
	}
	if text == "gemma3_text" {
		// Gemma3TextConfig: as Gemma 2 but no soft caps by default, and
		// rope_local_base_freq 10000 for the sliding_attention layers
		// (every layer but each sliding_window_pattern-th, default 6).
		s.gemma = true
		s.queryScalar = num("query_pre_attn_scalar", 256)
		s.attnCap, s.finalCap = num("attn_logit_softcapping", 0), num("final_logit_softcapping", 0)
		s.localTheta = num("rope_local_base_freq", 10000)
		pattern := int(num("sliding_window_pattern", 6))
		var types []string
		if has("layer_types") {
			_ = json.Unmarshal(raw["layer_types"], &types)
		}
		s.local = make([]bool, s.layers)
		for i := range s.local {
			s.local[i] = (i+1)%pattern != 0
			if types != nil {
				s.local[i] = types[i] == "sliding_attention"
			}
		}
		if boolean("use_bidirectional_attention", false) || has("rope_parameters") {
			return s, fmt.Errorf("oracle: gemma3_text with bidirectional attention or rope_parameters")
		}
		if act := str("hidden_activation"); act != "" && act != "gelu_pytorch_tanh" {
			return s, fmt.Errorf("oracle: gemma3_text hidden_activation %q", act)
		}
		if s.modelType == "gemma3" && s.finalCap != 0 {
			// Gemma3ForConditionalGeneration.forward: lm_head(hidden), no cap.
			return s, fmt.Errorf("oracle: gemma3 with final_logit_softcapping")
		}
	}
	bias := boolean("attention_bias", false)
	if s.modelType == "llama" && boolean("mlp_bias", false) {
		return s, fmt.Errorf("oracle: llama with mlp_bias")
	}
	return s, s.layout(bias)
}

// layout sets the optional weights of the decoder layers: LlamaAttention
// and Qwen3Attention put attention_bias on q, k, v and o; Qwen2Attention
// always has q, k, v biases and none on o; MistralAttention has none;
// Qwen3Attention adds q_norm and k_norm.
func (s *settings) layout(attentionBias bool) error {
	switch s.modelType {
	case "llama":
		s.qkvBias, s.oBias = attentionBias, attentionBias
	case "mistral", "mixtral":
	case "phi3": // Phi3Attention: fused qkv_proj, no bias (the split is load's)
	case "qwen2":
		s.qkvBias = true
	case "qwen3", "qwen3_moe":
		s.qkvBias, s.oBias, s.qkNorm = attentionBias, attentionBias, true
	case "gemma2": // Gemma2Attention: bias=config.attention_bias on q, k, v, o
		s.qkvBias, s.oBias = attentionBias, attentionBias
	case "gemma3_text", "gemma3": // Gemma3Attention: the same plus q_norm, k_norm
		s.qkvBias, s.oBias, s.qkNorm = attentionBias, attentionBias, true
	case "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text": // Qwen3_5Attention
		s.qkvBias, s.oBias, s.qkNorm = attentionBias, attentionBias, true
	default:
		return fmt.Errorf("oracle: unsupported model_type %q", s.modelType)
	}
	return nil
}

// readRope reads rope_scaling, or transformers v5's rope_parameters (whose
// rope_theta, when present, replaces the top-level one: returned as theta,
// 0 otherwise).
func readRope(raw map[string]json.RawMessage) (rs *checkpoint.RopeScaling, theta float64, err error) {
	var obj map[string]any
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		if v, ok := raw[key]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &obj); err != nil {
				return nil, 0, fmt.Errorf("oracle: %s: %v", key, err)
			}
			if key == "rope_parameters" {
				theta, _ = obj["rope_theta"].(float64)
			}
			break
		}
	}
	if obj == nil {
		return nil, theta, nil
	}
	typ, _ := obj["rope_type"].(string)
	if typ == "" {
		typ, _ = obj["type"].(string)
	}
	f := func(k string) float64 { v, _ := obj[k].(float64); return v }
	switch typ {
	case "", "default":
		return nil, theta, nil
	case "linear":
		return &checkpoint.RopeScaling{Type: typ, Factor: f("factor")}, theta, nil
	case "llama3":
		return &checkpoint.RopeScaling{Type: typ, Factor: f("factor"), LowFreqFactor: f("low_freq_factor"),
			HighFreqFactor: f("high_freq_factor"), OriginalMaxPositionEmbeddings: int(f("original_max_position_embeddings"))}, theta, nil
	}
	return nil, 0, fmt.Errorf("oracle: unsupported rope type %q", typ)
}

// readWindows returns each layer's sliding attention window (0: full), as
// transformers builds it:
//   - MistralConfig: sliding_window defaults to 4096 (null: none), used by
//     every MistralAttention; MixtralConfig and Phi3Config default to None;
//   - Qwen2Config/Qwen3Config: sliding_window is None unless
//     use_sliding_window; layer_types defaults to "sliding_attention" for
//     i >= max_window_layers (28) when the window is not None, and a
//     layer slides only when its type is sliding_attention and the window
//     is not None;
//   - Qwen3MoeConfig: the window (with use_sliding_window) on every layer.
func readWindows(raw map[string]json.RawMessage, modelType string, layers int) ([]int, error) {
	out := make([]int, max(layers, 0))
	present := func(k string) bool { v, ok := raw[k]; return ok && string(v) != "null" }
	intOf := func(k string, def int) int {
		if !present(k) {
			return def
		}
		var v int
		_ = json.Unmarshal(raw[k], &v)
		return v
	}
	useSW := false
	if present("use_sliding_window") {
		_ = json.Unmarshal(raw["use_sliding_window"], &useSW)
	}
	w := 0
	switch modelType {
	case "mistral":
		if _, given := raw["sliding_window"]; !given {
			w = 4096
		} else {
			w = intOf("sliding_window", 0)
		}
	case "mixtral", "phi3":
		w = intOf("sliding_window", 0)
	case "qwen3_moe":
		if useSW {
			w = intOf("sliding_window", 0)
			if _, given := raw["sliding_window"]; !given {
				w = 4096
			}
		}
	case "gemma2", "gemma3_text":
		// Gemma2Config: sliding_window 4096 (null: none) on the layers
		// whose layer_types entry is sliding_attention, by default the
		// even ones ((i + 1) % 2 != 0); Gemma3TextConfig: all but every
		// sliding_window_pattern-th (6).
		if _, given := raw["sliding_window"]; given && !present("sliding_window") {
			return out, nil
		}
		w = intOf("sliding_window", 4096)
		period := 2
		if modelType == "gemma3_text" {
			period = intOf("sliding_window_pattern", 6)
		}
		var types []string
		if present("layer_types") {
			if err := json.Unmarshal(raw["layer_types"], &types); err != nil || len(types) != layers {
				return nil, fmt.Errorf("oracle: bad layer_types")
			}
		}
		for i := range out {
			if (types == nil && (i+1)%period != 0) || (types != nil && types[i] == "sliding_attention") {
				out[i] = w
			}
		}
		return out, nil
	case "qwen2", "qwen3":
		if !useSW || (raw["sliding_window"] != nil && !present("sliding_window")) {
			return out, nil
		}
		w = intOf("sliding_window", 4096)
		var types []string
		if present("layer_types") {
			if err := json.Unmarshal(raw["layer_types"], &types); err != nil || len(types) != layers {
				return nil, fmt.Errorf("oracle: bad layer_types")
			}
		}
		mwl := intOf("max_window_layers", 28)
		for i := range out {
			if (types == nil && i >= mwl) || (types != nil && types[i] == "sliding_attention") {
				out[i] = w
			}
		}
		return out, nil
	}
	for i := range out {
		out[i] = w
	}
	return out, nil
}
