package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
)

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
	// SlidingLayers says which decoder layers use SlidingWindow (qwen2/qwen3
	// layer_types, or i >= max_window_layers); nil: every layer does.
	SlidingLayers []bool
	// QueryPreAttnScalar (gemma2/gemma3): attention scores are scaled by
	// its inverse square root instead of head_dim's; 0 when absent.
	QueryPreAttnScalar float64
	// AttnLogitSoftcap and FinalLogitSoftcap (gemma2): scores and logits
	// become cap·tanh(x/cap); 0 for none.
	AttnLogitSoftcap, FinalLogitSoftcap float64
	// RopeLocalTheta (gemma3_text's rope_local_base_freq): the sliding
	// layers (SlidingLayers) use the default RoPE with this base, the
	// others RopeTheta and RopeScaling; 0 when every layer uses the latter.
	RopeLocalTheta float64
	// QuantizationKey is "quantization_config" or "compression_config"
	// (legacy), whichever supplied QuantizationConfig; "" when absent.
	QuantizationKey string
	// QuantizationFiles holds the quantization settings files found beside
	// config.json (QuantizationSideFiles: name → content, each a JSON
	// object), read by OpenDir only when config.json has no
	// quantization_config; package quant decides what they mean.
	QuantizationFiles map[string]json.RawMessage
	// Raw holds every top-level key of config.json as found.
	Raw map[string]json.RawMessage
	// MoE describes a mixture-of-experts MLP; nil for a dense model.
	MoE *MoE
	// LinearAttention describes the Gated DeltaNet layers of a hybrid
	// model (qwen3_5); nil when every layer is softmax attention.
	LinearAttention *LinearAttention
	// PartialRotaryFactor: RoPE rotates the first head_dim·factor
	// dimensions of each head and passes the rest (qwen3_5); 0 means 1.
	PartialRotaryFactor float64
	// AttnOutputGate: q_proj also yields a per-head gate and the attention
	// output is multiplied by sigmoid(gate) before o_proj (qwen3_5).
	AttnOutputGate bool
	// TextPrefix is the module prefix of the text decoder: "model." for a
	// causal LM, "model.language_model." for the text model of a
	// multimodal checkpoint whose config nests it under text_config; ""
	// means "model.".
	TextPrefix string
	// IgnoredPrefixes are tensor-name prefixes that the architecture
	// deliberately does not run (a vision tower, multi-token-prediction
	// heads): loaders report them as ignored, not as unused.
	IgnoredPrefixes []IgnoredPrefix
	// Path names config.json in error messages.
	Path string
	// FamilySettings holds what a family's config quirks read beyond the
	// fields above (package arch's type, e.g. *arch.Gemma4); nil for most.
	FamilySettings any
	// Resolved is set by package arch once the family's defaults and quirks
	// are applied (arch.ParseConfig); ParseConfig leaves it false.
	Resolved bool
}

// MoE is a mixture-of-experts MLP: each token's MLP output is the
// routing-weighted sum of TopK of Experts SiLU-gated MLPs of width
// Intermediate, chosen by a router Linear.
type MoE struct {
	Experts      int  // num_experts
	TopK         int  // num_experts_per_tok
	Intermediate int  // moe_intermediate_size
	NormTopK     bool // norm_topk_prob: renormalise the TopK weights to sum 1
	// Sparse[i] reports whether layer i's MLP is the MoE block (the other
	// layers have a dense MLP of width intermediate_size).
	Sparse []bool
	// SharedIntermediate, when positive, is the width of a shared expert
	// that every token runs, scaled by sigmoid(shared_expert_gate(x))
	// (qwen3_5_moe's shared_expert_intermediate_size).
	SharedIntermediate int
}

// LinearAttention is the Gated DeltaNet of a hybrid model: layer i is a
// linear-attention layer when Layers[i]; the others are softmax attention.
type LinearAttention struct {
	Layers     []bool
	KeyHeads   int // linear_num_key_heads
	ValueHeads int // linear_num_value_heads
	KeyDim     int // linear_key_head_dim
	ValueDim   int // linear_value_head_dim
	ConvKernel int // linear_conv_kernel_dim
}

// IgnoredPrefix is a tensor-name prefix a loader leaves alone on purpose,
// with what it holds ("vision tower").
type IgnoredPrefix struct {
	Prefix, What string
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                          string // "default", "linear", "llama3", "yarn"
	Factor                        float64
	LowFreqFactor                 float64
	HighFreqFactor                float64
	OriginalMaxPositionEmbeddings int
	// YaRN (Type "yarn"): beta_fast, beta_slow (defaults 32 and 1),
	// truncate (default true) and attention_factor (0: absent, derived
	// from factor; see arch.RopeInvFreq and arch.RopeAttentionFactor).
	BetaFast, BetaSlow float64
	Truncate           bool
	AttentionFactor    float64
}

// LoadConfig reads config.json of a model directory and parses it with
// ParseConfig.
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

// ParseConfig reads the family-independent part of config.json; name is
// used in error messages. It fills ModelType, the top-level sizes that are
// present (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads; zero when absent), the token ids, torch_dtype and
// quantization_config, and keeps every key in Raw. It applies no model
// family's defaults and knows no model_type: package arch resolves a
// Config (arch.ParseConfig, arch.For) with the defaults and quirks of the
// family's declaration and sets Resolved.
func ParseConfig(data []byte, name string) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object: %v", ErrConfig, name, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object", ErrConfig, name)
	}
	r := NewConfigReader(name, raw)
	c := &Config{Raw: raw, Path: name}
	c.ModelType = r.Str("model_type", "")
	c.VocabSize = r.Int("vocab_size", 0)
	c.HiddenSize = r.Int("hidden_size", 0)
	c.IntermediateSize = r.Int("intermediate_size", 0)
	c.NumHiddenLayers = r.Int("num_hidden_layers", 0)
	c.NumAttentionHeads = r.Int("num_attention_heads", 0)
	if err := r.Err(); err != nil {
		return nil, err
	}
	if err := ReadHeader(r, c); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadHeader reads the keys of config.json that mean the same for every
// model family into c: torch_dtype (or dtype), bos_token_id, eos_token_id
// (an integer or a list) and quantization_config (or the legacy
// compression_config). It returns r's first error.
func ReadHeader(r *ConfigReader, c *Config) error {
	c.TorchDtype = r.Str("torch_dtype", "")
	if c.TorchDtype == "" {
		c.TorchDtype = r.Str("dtype", "")
	}
	c.BOSTokenID = r.tokenID("bos_token_id")
	c.EOSTokenIDs = r.tokenIDs("eos_token_id")
	c.EOSTokenID = -1
	if len(c.EOSTokenIDs) > 0 {
		c.EOSTokenID = c.EOSTokenIDs[0]
	}
	if err := r.Err(); err != nil {
		return err
	}
	c.QuantizationConfig, c.QuantizationKey = nil, ""
	for _, key := range []string{"quantization_config", "compression_config"} {
		if v, ok := r.raw[key]; ok && !isNull(v) {
			c.QuantizationConfig = append(json.RawMessage(nil), v...)
			c.QuantizationKey = key
			break
		}
	}
	if c.QuantizationConfig != nil && (len(bytes.TrimSpace(c.QuantizationConfig)) == 0 || bytes.TrimSpace(c.QuantizationConfig)[0] != '{') {
		return fmt.Errorf("%w: %s: %s must be a JSON object", ErrConfig, r.name, c.QuantizationKey)
	}
	return nil
}

// CheckSizes rejects sizes no model can have: every size positive and
// below the limits above, heads divisible by key/value heads, an even
// head_dim, positive finite eps and theta, a non-negative window.
func (c *Config) CheckSizes(name string) error {
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

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// ConfigReader reads typed keys of one JSON object of config.json, keeping
// the first error (every error wraps ErrConfig and names the file and the
// key). A key given as null reads as absent, as in transformers.
type ConfigReader struct {
	name   string
	prefix string
	raw    map[string]json.RawMessage
	err    error
	root   *ConfigReader // the reader whose err Sub readers share; nil for a root
}

func (p *ConfigReader) top() *ConfigReader {
	if p.root != nil {
		return p.root
	}
	return p
}

// NewConfigReader reads the object raw of the file name.
func NewConfigReader(name string, raw map[string]json.RawMessage) *ConfigReader {
	return &ConfigReader{name: name, raw: raw}
}

// Sub returns a reader of the object under key (nil when absent or null),
// whose errors name the key as a prefix ("rope_scaling.factor"); a value
// that is not an object is an error of r.
func (p *ConfigReader) Sub(key string) *ConfigReader {
	v := p.Get(key)
	if v == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
		if t := p.top(); t.err == nil {
			t.err = fmt.Errorf("%w: %s: %s%s must be an object", ErrConfig, p.name, p.prefix, key)
		}
		return nil
	}
	return &ConfigReader{name: p.name, raw: obj, prefix: p.prefix + key + ".", root: p.top()}
}

// Err returns the first error (of this reader and every Sub reader).
func (p *ConfigReader) Err() error { return p.top().err }

// Name returns the file name used in errors.
func (p *ConfigReader) Name() string { return p.name }

// Has reports whether key is present (null included).
func (p *ConfigReader) Has(key string) bool { _, ok := p.raw[key]; return ok }

// Fail records an error about key unless one is recorded already.
func (p *ConfigReader) Fail(key, f string, a ...any) {
	if t := p.top(); t.err == nil {
		t.err = fmt.Errorf("%w: %s: %s%s: %s", ErrConfig, p.name, p.prefix, key, fmt.Sprintf(f, a...))
	}
}

// IsNull reports whether key is present with the value null.
func (p *ConfigReader) IsNull(key string) bool {
	v, ok := p.raw[key]
	return ok && isNull(v)
}

// Get returns the value of key, or nil when absent or null.
func (p *ConfigReader) Get(key string) json.RawMessage {
	v, ok := p.raw[key]
	if !ok || isNull(v) {
		return nil
	}
	return v
}

func (p *ConfigReader) parseInt(key string, v json.RawMessage) int {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		p.Fail(key, "want an integer, got %s", clip(v))
		return 0
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		p.Fail(key, "want an integer, got %s", clip(v))
		return 0
	}
	return int(f)
}

// Required reads a positive integer that must be present.
func (p *ConfigReader) Required(key string) int {
	v := p.Get(key)
	if v == nil {
		p.Fail(key, "missing required key")
		return 0
	}
	n := p.parseInt(key, v)
	if p.Err() == nil && n <= 0 {
		p.Fail(key, "must be positive, got %d", n)
	}
	return n
}

// Int reads an integer, def when absent or null.
func (p *ConfigReader) Int(key string, def int) int {
	v := p.Get(key)
	if v == nil {
		return def
	}
	return p.parseInt(key, v)
}

// Positive reads a positive integer, def when absent or null.
func (p *ConfigReader) Positive(key string, def int) int {
	n := p.Int(key, def)
	if p.Err() == nil && n <= 0 {
		p.Fail(key, "must be positive, got %d", n)
	}
	return n
}

// Float reads a number, def when absent or null.
func (p *ConfigReader) Float(key string, def float64) float64 {
	v := p.Get(key)
	if v == nil {
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		p.Fail(key, "want a number, got %s", clip(v))
	}
	return f
}

// RequiredFloat reads a number that must be present.
func (p *ConfigReader) RequiredFloat(key string) float64 {
	if p.Get(key) == nil {
		p.Fail(key, "missing required key")
		return 0
	}
	return p.Float(key, 0)
}

// Bool reads true or false, def when absent or null.
func (p *ConfigReader) Bool(key string, def bool) bool {
	v := p.Get(key)
	if v == nil {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		p.Fail(key, "want true or false, got %s", clip(v))
	}
	return b
}

// Str reads a string, def when absent or null.
func (p *ConfigReader) Str(key, def string) string {
	v := p.Get(key)
	if v == nil {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.Fail(key, "want a string, got %s", clip(v))
	}
	return s
}

// Ints reads a list of integers (def when absent or null).
func (p *ConfigReader) Ints(key string, def []int) []int {
	v := p.Get(key)
	if v == nil {
		return def
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil {
		p.Fail(key, "want a list of integers, got %s", clip(v))
		return nil
	}
	out := make([]int, len(list))
	for i, e := range list {
		out[i] = p.parseInt(key, e)
	}
	return out
}

func (p *ConfigReader) tokenID(key string) int {
	v := p.Get(key)
	if v == nil {
		return -1
	}
	n := p.parseInt(key, v)
	if p.Err() == nil && n < 0 {
		p.Fail(key, "must not be negative, got %d", n)
	}
	return n
}

func (p *ConfigReader) tokenIDs(key string) []int {
	v := p.Get(key)
	if v == nil {
		return nil
	}
	t := bytes.TrimSpace(v)
	if len(t) > 0 && t[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(t, &list); err != nil {
			p.Fail(key, "want an integer or a list of integers, got %s", clip(v))
			return nil
		}
		out := make([]int, 0, len(list))
		for _, e := range list {
			n := p.parseInt(key, e)
			if p.Err() == nil && n < 0 {
				p.Fail(key, "must not be negative, got %d", n)
			}
			out = append(out, n)
		}
		if p.Err() != nil {
			return nil
		}
		return out
	}
	n := p.tokenID(key)
	if p.Err() != nil {
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
