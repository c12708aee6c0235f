package arch

import (
	"slices"

	"github.com/qppl/qppl/checkpoint"
)

// Family declares one model_type: everything qppl knows about it. Each
// supported family is one file of this package (llama.go, mistral.go, ...)
// holding one function that returns its declaration; Families lists them.
// Nothing else in qppl names a family: config parsing, the tensor names
// and optional weights of Spec, the fixtures, the conformance suite and the
// CLI help all read these declarations.
type Family struct {
	// Name is config.json's model_type.
	Name string
	// Class is config.json's architectures entry (LlamaForCausalLM).
	Class string
	// Defaults are the constructor defaults of the family's transformers
	// config class for the keys that may be absent.
	Defaults Defaults
	// Quirks reads the family's own config keys into c after the common ones
	// (attention_bias, mlp_bias, sliding-window rules). Errors go to r.
	Quirks func(r *checkpoint.ConfigReader, c *checkpoint.Config)
	// Layout says which optional weights a resolved config has.
	Layout func(c *checkpoint.Config) Layout
	// MoENames names the tensors of a mixture-of-experts MLP (families
	// whose Quirks set Config.MoE).
	MoENames MoENames
	// Fixture is the small realistic checkpoint package fixtures writes.
	Fixture Fixture
	// Aliases are other model_type values read with this declaration
	// (qwen3_5_text: the text-only checkpoint of qwen3_5).
	Aliases []string
	// TextConfig: a config.json with a text_config object is a multimodal
	// wrapper whose text decoder is read from text_config and stored under
	// "model.language_model." (Config.TextPrefix); the top level keeps
	// model_type, tie_word_embeddings, the token ids and quantization_config.
	TextConfig bool
	// Wrapper, when set (with TextConfig), is a multimodal-only family
	// (gemma3, gemma4): its text_config is required, and its own rules
	// for the prefixes and the tied head apply (see Wrapper).
	Wrapper *Wrapper
}

// Wrapper is what a multimodal wrapper family (Gemma3ForConditionalGeneration,
// Gemma4ForConditionalGeneration) adds to TextConfig.
type Wrapper struct {
	// Prefixes are the text decoder's module prefixes a checkpoint may use,
	// the current one first: OpenDir takes the first whose embedding the
	// checkpoint holds (transformers' _checkpoint_conversion_mapping maps
	// the older ones onto the first). A prefix other than the first needs a
	// tied head (its lm_head name is not read).
	Prefixes []string
	// TextTie: the wrapper's tie_word_embeddings (True when absent:
	// PretrainedConfig's default, Gemma4Config's field) and text_config's
	// must agree, else the config is refused as ambiguous: transformers
	// 4.x ties by text_config's (PreTrainedModel.tie_weights reads
	// get_text_config(decoder=True)), and a v5 wrapper class has its own.
	TextTie bool
	// Top, when set, reads the wrapper's own top-level keys (r is the
	// top level) after the text decoder's Quirks.
	Top func(r *checkpoint.ConfigReader, c *checkpoint.Config)
}

// MoENames are the module names of a mixture-of-experts layer, relative to
// "model.layers.{i}.": the router is Block.Router, expert e's projections
// Block.experts.{e}.{Gate,Up,Down}. Block is "" when the router and the
// experts sit directly under the layer (gemma4: router.proj,
// experts.{e}.gate_proj).
type MoENames struct {
	Block, Router, Gate, Up, Down string
}

// Defaults are a config class's constructor defaults.
type Defaults struct {
	KVHeads  int // num_key_value_heads; 0: num_attention_heads
	HeadDim  int // head_dim; 0: hidden_size / num_attention_heads
	MaxPos   int // max_position_embeddings
	Eps      float64
	Theta    float64
	Tie      bool // tie_word_embeddings
	AttnBias bool // attention_bias
	// NoIntermediate: the config class has no intermediate_size (every
	// MLP is a mixture of experts); Quirks sets Config.IntermediateSize.
	NoIntermediate bool
	// Vocab, Hidden, Intermediate, Layers, Heads: the constructor's
	// vocab_size, hidden_size, intermediate_size, num_hidden_layers and
	// num_attention_heads, for families whose released configs omit them
	// (Gemma 3's text_config); 0: the key is required.
	Vocab, Hidden, Intermediate, Layers, Heads int
}

// Layout is the set of optional weights of a decoder layer.
type Layout struct {
	QKVBias bool // bias on q_proj, k_proj and v_proj
	OBias   bool // bias on o_proj
	QKNorm  bool // RMSNorm over each head of q and k before RoPE (q_norm, k_norm)
	// FusedQKV: one self_attn.qkv_proj [(heads+2·kv_heads)·head_dim, hidden]
	// whose output columns are q, k, v in that order (phi3).
	FusedQKV bool
	// FusedGateUp: one mlp.gate_up_proj [2·intermediate, hidden] whose
	// output columns are gate then up (phi3).
	FusedGateUp bool
	// Gemma: every RMSNorm multiplies by (1 + weight) (NormOffset); the
	// embeddings are multiplied by sqrt(hidden_size) (EmbedScale); the
	// attention output goes through post_attention_layernorm before the
	// residual add, and the MLP sits between pre_feedforward_layernorm and
	// post_feedforward_layernorm (SandwichNorms).
	NormOffset, EmbedScale, SandwichNorms bool
	// AttnOutputGate (qwen3_5): q_proj [2·heads·head_dim, hidden] yields,
	// per head, the query then a gate; the attention output is multiplied
	// by sigmoid(gate) before o_proj.
	AttnOutputGate bool
}

// Fixture describes the small checkpoint that package fixtures (and the
// conformance suite) writes for a family: real config keys and tensor
// names, the shape chosen so that every optional feature is exercised.
type Fixture struct {
	// Tied is the default tie_word_embeddings of the fixture.
	Tied bool
	// HeadDim, when not 0, is the fixture's head_dim (chosen ≠ hidden/heads
	// for families that read head_dim from config.json).
	HeadDim int
	// OmitStandardHeadDim leaves head_dim out of config.json when it equals
	// hidden/heads (real configs of the family have no such key).
	OmitStandardHeadDim bool
	// Layers, when not 0, is the suite model's layer count (gemma4: 4, so
	// that KV-shared layers of both kinds exist).
	Layers int
	// Config returns the family's own config.json keys for a fixture of
	// the given shape (norm eps, RoPE, window keys, biases, ...).
	Config func(s FixtureShape) map[string]any
	// Nest, when set, rewrites the finished flat config.json object into
	// the family's nested form (a multimodal wrapper with text_config).
	Nest func(flat map[string]any) map[string]any
	// Variants are named config.json overrides that make a fixture of
	// another kind of the family (gemma4_text "moe"): package fixtures'
	// Options.Variant, qppl fixture --variant.
	Variants map[string]map[string]any
	// FusedExperts: the fixture stores its MoE experts fused and 3-D
	// (Spec.FusedExperts), as the family's BF16 release does (gemma4);
	// else per expert. Options.FusedExperts overrides it.
	FusedExperts bool
	// Extra are tensors a real checkpoint of the family holds beside the
	// text decoder, which qppl ignores (a vision tower); fixtures write
	// them with small random values.
	Extra []TensorShape
}

// FixtureShape is what a family's fixture config may depend on.
type FixtureShape struct {
	Layers int
	MaxPos int
	Vocab  int
}

// Families returns every supported family, in the order of Names.
func Families() []Family {
	return []Family{llama(), mistral(), qwen2(), qwen3(), qwen3MoE(), mixtral(), phi3(), gemma2(), gemma3Text(), qwen35(), qwen35MoE(), gemma4Text(), gemma3(), gemma4(), gptOss()}
}

// Names returns the supported model_type values.
func Names() []string {
	fs := Families()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// Lookup returns the family named by model_type.
func Lookup(name string) (Family, bool) {
	fs := Families()
	i := slices.IndexFunc(fs, func(f Family) bool { return f.Name == name || slices.Contains(f.Aliases, name) })
	if i < 0 {
		return Family{}, false
	}
	return fs[i], true
}
