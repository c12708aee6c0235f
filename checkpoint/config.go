package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
)

// SupportedModelTypes returns the model_type values ParseConfig accepts.
func SupportedModelTypes() []string { return []string{"llama", "mistral", "qwen2", "qwen3"} }

// Upper bounds on sizes read from config.json, far above any real model,
// so that products of sizes never overflow and nonsense is rejected before
// anything is allocated from it.
const (
	maxDim      = 1 << 24 // vocab, intermediate
	maxSmallDim = 1 << 16 // layers, heads, head_dim
	maxPos      = 1 << 31
)

// Config is config.json of a causal LM, with Hugging Face transformers'
// field names and defaults applied.
type Config struct {
	ModelType             string
	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int
	HeadDim               int
	MaxPositionEmbeddings int
	RMSNormEps            float64
	RopeTheta             float64
	RopeScaling           *RopeScaling // nil = default
	TieWordEmbeddings     bool
	AttentionBias         bool
	HiddenAct             string
	BOSTokenID            int // -1 when absent
	EOSTokenID            int // -1 when absent; the first one when a list
	TorchDtype            string
	QuantizationConfig    json.RawMessage // quantization_config or compression_config; nil when absent

	EOSTokenIDs []int // every eos_token_id (a list in some configs); nil when absent
	// MLPBias is llama's mlp_bias (biases on gate/up/down); false for the
	// other model types, whose MLPs have none.
	MLPBias bool
	// SlidingWindow is the attention window when the model uses one
	// (mistral's sliding_window; qwen2/qwen3 only with use_sliding_window
	// and max_window_layers < num_hidden_layers), 0 for full causal
	// attention.
	SlidingWindow int
	// QuantizationKey is "quantization_config" or "compression_config"
	// (legacy), whichever supplied QuantizationConfig; "" when absent.
	QuantizationKey string
	// Raw holds every top-level key of config.json as found.
	Raw map[string]json.RawMessage
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                          string // "default", "linear", "llama3"
	Factor                        float64
	LowFreqFactor                 float64
	HighFreqFactor                float64
	OriginalMaxPositionEmbeddings int
}

// modelDefaults are transformers' constructor defaults of each config class
// (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config) for the keys that
// are optional here.
type modelDefaults struct {
	kvHeads       int // 0: num_attention_heads
	headDim       int // 0: hidden_size / num_attention_heads
	maxPos        int
	eps           float64
	theta         float64
	tie           bool
	attnBias      bool // attention_bias default (qwen2 always has q/k/v bias)
	slidingWindow int  // mistral's default window
}

func defaultsFor(modelType string) (modelDefaults, bool) {
	switch modelType {
	case "llama":
		return modelDefaults{maxPos: 2048, eps: 1e-6, theta: 10000}, true
	case "mistral":
		return modelDefaults{kvHeads: 8, maxPos: 4096 * 32, eps: 1e-6, theta: 10000, slidingWindow: 4096}, true
	case "qwen2":
		return modelDefaults{kvHeads: 32, maxPos: 32768, eps: 1e-6, theta: 10000, attnBias: true, slidingWindow: 4096}, true
	case "qwen3":
		return modelDefaults{kvHeads: 32, headDim: 128, maxPos: 32768, eps: 1e-6, theta: 10000, slidingWindow: 4096}, true
	}
	return modelDefaults{}, false
}

// LoadConfig reads and parses the config.json of a model directory.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := readSmallFile(path, ErrConfig)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, path, err)
		}
		return nil, err
	}
	return ParseConfig(data, path)
}

// ParseConfig parses config.json; name is used in error messages.
//
// Required keys: model_type (llama, mistral, qwen2 or qwen3), vocab_size,
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads.
// The others take transformers' defaults for the model type: mistral has 8
// key/value heads by default, qwen2 32, qwen3 32 with head_dim 128; llama
// and mistral derive head_dim as hidden_size/num_attention_heads. A JSON
// null means "absent", as in transformers. rope_scaling (key "rope_type" or
// legacy "type") may be default, linear or llama3; the transformers v5
// "rope_parameters" object is read the same way.
func ParseConfig(data []byte, name string) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object: %v", ErrConfig, name, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object", ErrConfig, name)
	}
	p := cfgParser{name: name, raw: raw}
	c := &Config{Raw: raw}
	c.ModelType = p.str("model_type", "")
	if p.err != nil {
		return nil, p.err
	}
	if c.ModelType == "" {
		return nil, fmt.Errorf("%w: %s: missing model_type (supported: %s)", ErrConfig, name, strings.Join(SupportedModelTypes(), ", "))
	}
	d, ok := defaultsFor(c.ModelType)
	if !ok {
		return nil, fmt.Errorf("%w: %s: unsupported model_type %q (supported: %s)", ErrConfig, name, c.ModelType, strings.Join(SupportedModelTypes(), ", "))
	}
	c.VocabSize = p.required("vocab_size")
	c.HiddenSize = p.required("hidden_size")
	c.IntermediateSize = p.required("intermediate_size")
	c.NumHiddenLayers = p.required("num_hidden_layers")
	c.NumAttentionHeads = p.required("num_attention_heads")
	if p.err != nil {
		return nil, p.err
	}
	kvDefault := d.kvHeads
	if kvDefault == 0 {
		kvDefault = c.NumAttentionHeads
	}
	// A key given as null takes the None branch of the transformers
	// constructor; an absent key takes the constructor's default.
	if p.isNullKey("num_key_value_heads") {
		kvDefault = c.NumAttentionHeads
	}
	c.NumKeyValueHeads = p.positive("num_key_value_heads", kvDefault)
	hdDefault := d.headDim
	if hdDefault == 0 || p.isNullKey("head_dim") {
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			hdDefault = -1 // only an error when head_dim is absent
		} else {
			hdDefault = c.HiddenSize / c.NumAttentionHeads
		}
	}
	c.HeadDim = p.integer("head_dim", hdDefault)
	if p.err == nil && c.HeadDim == -1 {
		return nil, fmt.Errorf("%w: %s: hidden_size %d is not divisible by num_attention_heads %d (and no head_dim is given)", ErrConfig, name, c.HiddenSize, c.NumAttentionHeads)
	}
	c.MaxPositionEmbeddings = p.positive("max_position_embeddings", d.maxPos)
	c.RMSNormEps = p.float("rms_norm_eps", d.eps)
	c.RopeTheta = p.float("rope_theta", d.theta)
	c.TieWordEmbeddings = p.boolean("tie_word_embeddings", d.tie)
	c.AttentionBias = p.boolean("attention_bias", d.attnBias)
	if c.ModelType == "qwen2" {
		c.AttentionBias = true // Qwen2Attention: q/k/v always have a bias
	}
	if c.ModelType == "mistral" {
		c.AttentionBias = false // MistralAttention has no bias
	}
	if c.ModelType == "llama" {
		c.MLPBias = p.boolean("mlp_bias", false)
	}
	c.HiddenAct = p.str("hidden_act", "silu")
	c.TorchDtype = p.str("torch_dtype", "")
	if c.TorchDtype == "" {
		c.TorchDtype = p.str("dtype", "")
	}
	c.BOSTokenID = p.tokenID("bos_token_id")
	c.EOSTokenIDs = p.tokenIDs("eos_token_id")
	c.EOSTokenID = -1
	if len(c.EOSTokenIDs) > 0 {
		c.EOSTokenID = c.EOSTokenIDs[0]
	}
	switch c.ModelType {
	case "mistral":
		c.SlidingWindow = p.integer("sliding_window", d.slidingWindow)
		if p.isNullKey("sliding_window") {
			c.SlidingWindow = 0
		}
	default:
		// Qwen2Config/Qwen3Config: layer i uses the window only when
		// use_sliding_window and i >= max_window_layers (default 28), so
		// with max_window_layers >= num_hidden_layers no layer does.
		if p.boolean("use_sliding_window", false) && !p.isNullKey("sliding_window") &&
			p.integer("max_window_layers", 28) < c.NumHiddenLayers {
			c.SlidingWindow = p.integer("sliding_window", d.slidingWindow)
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	if err := c.parseRope(&p); err != nil {
		return nil, err
	}
	for _, key := range []string{"quantization_config", "compression_config"} {
		if v, ok := raw[key]; ok && !isNull(v) {
			c.QuantizationConfig = append(json.RawMessage(nil), v...)
			c.QuantizationKey = key
			break
		}
	}
	if c.QuantizationConfig != nil && (len(bytes.TrimSpace(c.QuantizationConfig)) == 0 || bytes.TrimSpace(c.QuantizationConfig)[0] != '{') {
		return nil, fmt.Errorf("%w: %s: %s must be a JSON object", ErrConfig, name, c.QuantizationKey)
	}
	if err := c.check(name); err != nil {
		return nil, err
	}
	return c, nil
}

// check rejects values no model can have.
func (c *Config) check(name string) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, name, fmt.Sprintf(f, a...))
	}
	for _, v := range []struct {
		key      string
		val, max int
	}{
		{"vocab_size", c.VocabSize, maxDim}, {"hidden_size", c.HiddenSize, maxDim},
		{"intermediate_size", c.IntermediateSize, maxDim}, {"num_hidden_layers", c.NumHiddenLayers, maxSmallDim},
		{"num_attention_heads", c.NumAttentionHeads, maxSmallDim}, {"num_key_value_heads", c.NumKeyValueHeads, maxSmallDim},
		{"head_dim", c.HeadDim, maxSmallDim}, {"max_position_embeddings", c.MaxPositionEmbeddings, maxPos},
	} {
		if v.val <= 0 {
			return bad("%s must be positive, got %d", v.key, v.val)
		}
		if v.val > v.max {
			return bad("%s = %d exceeds the limit %d", v.key, v.val, v.max)
		}
	}
	switch {
	case c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return bad("num_attention_heads %d is not divisible by num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	case c.HeadDim%2 != 0:
		return bad("head_dim %d must be even for rotary embeddings", c.HeadDim)
	case !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0):
		return bad("rms_norm_eps must be positive and finite, got %v", c.RMSNormEps)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0):
		return bad("rope_theta must be positive and finite, got %v", c.RopeTheta)
	case c.SlidingWindow < 0:
		return bad("sliding_window must not be negative, got %d", c.SlidingWindow)
	}
	return nil
}

// parseRope reads rope_scaling (or transformers v5 rope_parameters).
func (c *Config) parseRope(p *cfgParser) error {
	key := "rope_scaling"
	v, ok := p.raw[key]
	if !ok || isNull(v) {
		key = "rope_parameters"
		v, ok = p.raw[key]
		if !ok || isNull(v) {
			return nil
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: %s: %s must be an object", ErrConfig, p.name, key)
	}
	sp := cfgParser{name: p.name, raw: obj, prefix: key + "."}
	typ := sp.str("rope_type", "")
	if typ == "" {
		typ = sp.str("type", "")
	}
	if key == "rope_parameters" {
		if _, has := obj["rope_theta"]; has {
			c.RopeTheta = sp.float("rope_theta", c.RopeTheta)
		}
	}
	if sp.err != nil {
		return sp.err
	}
	rs := &RopeScaling{Type: typ}
	switch typ {
	case "", "default":
		rs.Type = "default"
	case "linear":
		rs.Factor = sp.requiredFloat("factor")
		if sp.err == nil && !(rs.Factor > 0) {
			return fmt.Errorf("%w: %s: %s.factor must be positive, got %v", ErrConfig, p.name, key, rs.Factor)
		}
	case "llama3":
		rs.Factor = sp.requiredFloat("factor")
		rs.LowFreqFactor = sp.requiredFloat("low_freq_factor")
		rs.HighFreqFactor = sp.requiredFloat("high_freq_factor")
		rs.OriginalMaxPositionEmbeddings = sp.required("original_max_position_embeddings")
		if sp.err != nil {
			return sp.err
		}
		switch {
		case !(rs.Factor > 0):
			return fmt.Errorf("%w: %s: %s.factor must be positive, got %v", ErrConfig, p.name, key, rs.Factor)
		case !(rs.LowFreqFactor > 0):
			return fmt.Errorf("%w: %s: %s.low_freq_factor must be positive, got %v", ErrConfig, p.name, key, rs.LowFreqFactor)
		case !(rs.HighFreqFactor > rs.LowFreqFactor):
			return fmt.Errorf("%w: %s: %s.high_freq_factor %v must exceed low_freq_factor %v", ErrConfig, p.name, key, rs.HighFreqFactor, rs.LowFreqFactor)
		}
	default:
		return fmt.Errorf("%w: %s: unsupported %s type %q (supported: default, linear, llama3)", ErrConfig, p.name, key, typ)
	}
	if sp.err != nil {
		return sp.err
	}
	if rs.Type == "default" && key == "rope_parameters" {
		return nil // v5 always writes rope_parameters; default means none
	}
	if rs.Type == "default" {
		return nil
	}
	c.RopeScaling = rs
	return nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// cfgParser reads typed keys, keeping the first error.
type cfgParser struct {
	name   string
	prefix string
	raw    map[string]json.RawMessage
	err    error
}

func (p *cfgParser) fail(key, f string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %s: %s%s: %s", ErrConfig, p.name, p.prefix, key, fmt.Sprintf(f, a...))
	}
}

// isNullKey reports whether key is present with the value null.
func (p *cfgParser) isNullKey(key string) bool {
	v, ok := p.raw[key]
	return ok && isNull(v)
}

// get returns the value of key, or nil when absent or null.
func (p *cfgParser) get(key string) json.RawMessage {
	v, ok := p.raw[key]
	if !ok || isNull(v) {
		return nil
	}
	return v
}

func (p *cfgParser) parseInt(key string, v json.RawMessage) int {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		p.fail(key, "want an integer, got %s", clip(v))
		return 0
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		p.fail(key, "want an integer, got %s", clip(v))
		return 0
	}
	return int(f)
}

func (p *cfgParser) required(key string) int {
	v := p.get(key)
	if v == nil {
		p.fail(key, "missing required key")
		return 0
	}
	n := p.parseInt(key, v)
	if p.err == nil && n <= 0 {
		p.fail(key, "must be positive, got %d", n)
	}
	return n
}

func (p *cfgParser) integer(key string, def int) int {
	v := p.get(key)
	if v == nil {
		return def
	}
	return p.parseInt(key, v)
}

func (p *cfgParser) positive(key string, def int) int {
	n := p.integer(key, def)
	if p.err == nil && n <= 0 {
		p.fail(key, "must be positive, got %d", n)
	}
	return n
}

func (p *cfgParser) float(key string, def float64) float64 {
	v := p.get(key)
	if v == nil {
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		p.fail(key, "want a number, got %s", clip(v))
	}
	return f
}

func (p *cfgParser) requiredFloat(key string) float64 {
	if p.get(key) == nil {
		p.fail(key, "missing required key")
		return 0
	}
	return p.float(key, 0)
}

func (p *cfgParser) boolean(key string, def bool) bool {
	v := p.get(key)
	if v == nil {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		p.fail(key, "want true or false, got %s", clip(v))
	}
	return b
}

func (p *cfgParser) str(key, def string) string {
	v := p.get(key)
	if v == nil {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.fail(key, "want a string, got %s", clip(v))
	}
	return s
}

func (p *cfgParser) tokenID(key string) int {
	v := p.get(key)
	if v == nil {
		return -1
	}
	n := p.parseInt(key, v)
	if p.err == nil && n < 0 {
		p.fail(key, "must not be negative, got %d", n)
	}
	return n
}

func (p *cfgParser) tokenIDs(key string) []int {
	v := p.get(key)
	if v == nil {
		return nil
	}
	t := bytes.TrimSpace(v)
	if len(t) > 0 && t[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(t, &list); err != nil {
			p.fail(key, "want an integer or a list of integers, got %s", clip(v))
			return nil
		}
		out := make([]int, 0, len(list))
		for _, e := range list {
			n := p.parseInt(key, e)
			if p.err == nil && n < 0 {
				p.fail(key, "must not be negative, got %d", n)
			}
			out = append(out, n)
		}
		if p.err != nil {
			return nil
		}
		return out
	}
	n := p.tokenID(key)
	if p.err != nil {
		return nil
	}
	return []int{n}
}

// clip shortens a JSON value for an error message.
func clip(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
