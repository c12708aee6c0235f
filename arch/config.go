package arch

import (
	"fmt"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// OpenDir opens a model directory with checkpoint.OpenDir and replaces its
// Config by the resolved one (ParseConfig), so that an unsupported family
// or an inconsistent config.json fails here, before any work.
func OpenDir(dir string) (*checkpoint.Model, error) {
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	c, err := Resolve(m.Config)
	if err != nil {
		m.Close()
		return nil, err
	}
	if err := pickTextPrefix(m, c); err != nil {
		m.Close()
		return nil, err
	}
	m.Config = c
	return m, nil
}

// pickTextPrefix sets c.TextPrefix, for a Wrapper family, to the first of
// its Prefixes whose embedding m holds (the older layouts of
// Gemma3ForConditionalGeneration checkpoints), leaving the current one
// when none matches (the loaders then name the missing tensor).
func pickTextPrefix(m *checkpoint.Model, c *checkpoint.Config) error {
	fam, ok := Lookup(c.ModelType)
	if !ok || fam.Wrapper == nil || c.TextPrefix == "" {
		return nil
	}
	for i, p := range fam.Wrapper.Prefixes {
		if _, ok := m.Peek(p + "embed_tokens.weight"); !ok {
			continue
		}
		if i > 0 && !c.TieWordEmbeddings {
			return fmt.Errorf("%w: %s: tie_word_embeddings is false, but the untied head of the older %s* layout is not read (re-save the checkpoint with a current transformers: %s*, lm_head.weight)",
				checkpoint.ErrConfig, c.Path, p, fam.Wrapper.Prefixes[0])
		}
		c.TextPrefix = p
		return nil
	}
	return nil
}

// LoadConfig reads and resolves the config.json of a model directory.
func LoadConfig(dir string) (*checkpoint.Config, error) {
	c, err := checkpoint.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	return Resolve(c)
}

// ParseConfig parses config.json with the defaults and quirks of its
// family's declaration; name is used in error messages. Every error wraps
// checkpoint.ErrConfig.
//
// Required keys: model_type (one of Names), vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads. The others
// take the transformers constructor defaults of the family (Family.Defaults):
// mistral has 8 key/value heads by default, qwen2 32, qwen3 32 with head_dim
// 128; llama and mistral derive head_dim as hidden_size/num_attention_heads.
// A JSON null means "absent", as in transformers. rope_scaling (key
// "rope_type" or legacy "type") may be default, linear or llama3; the
// transformers v5 "rope_parameters" object is read the same way.
func ParseConfig(data []byte, name string) (*checkpoint.Config, error) {
	c, err := checkpoint.ParseConfig(data, name)
	if err != nil {
		return nil, err
	}
	return Resolve(c)
}

// Resolve returns the config of c's family with its defaults and quirks
// applied, read from c.Raw. A config already resolved, or built in code
// (Raw nil), is returned as it is.
func Resolve(c *checkpoint.Config) (*checkpoint.Config, error) {
	if c == nil || c.Resolved || c.Raw == nil {
		return c, nil
	}
	name := c.Path
	r := checkpoint.NewConfigReader(name, c.Raw)
	// QuantizationFiles come from beside config.json (checkpoint.OpenDir),
	// not from Raw: carried over as they are.
	out := &checkpoint.Config{Raw: c.Raw, Path: c.Path, Resolved: true, QuantizationFiles: c.QuantizationFiles}
	out.ModelType = r.Str("model_type", "")
	if err := r.Err(); err != nil {
		return nil, err
	}
	if out.ModelType == "" {
		return nil, fmt.Errorf("%w: %s: missing model_type (supported: %s)", checkpoint.ErrConfig, name, strings.Join(Names(), ", "))
	}
	fam, ok := Lookup(out.ModelType)
	if !ok {
		return nil, fmt.Errorf("%w: %s: unsupported model_type %q (supported: %s)", checkpoint.ErrConfig, name, out.ModelType, strings.Join(Names(), ", "))
	}
	// tr reads the text decoder's keys: text_config of a multimodal
	// wrapper (Family.TextConfig), else the top level.
	tr := r
	if fam.TextConfig && r.Get("text_config") != nil {
		if tr = r.Sub("text_config"); tr == nil {
			return nil, r.Err()
		}
		out.TextPrefix = "model.language_model."
		if w := fam.Wrapper; w != nil && len(w.Prefixes) > 0 {
			out.TextPrefix = w.Prefixes[0]
		}
	} else if fam.Wrapper != nil {
		// Gemma3Config(text_config=None) builds its default text model
		// and reads none of the top-level keys: refused, not guessed.
		return nil, fmt.Errorf("%w: %s: model_type %q without a text_config object (the text decoder's keys are read from text_config)", checkpoint.ErrConfig, name, out.ModelType)
	}
	if err := readCommon(tr, out, fam.Defaults); err != nil {
		return nil, err
	}
	switch {
	case tr == r:
	case fam.Wrapper != nil && fam.Wrapper.TextTie:
		// transformers 4.x ties by text_config's key, a v5 wrapper by its
		// own (default True): refused unless both say the same.
		if top := r.Bool("tie_word_embeddings", true); r.Err() == nil && top != out.TieWordEmbeddings {
			r.Fail("tie_word_embeddings", "%v at the top level (true when absent) but %v in text_config: which one transformers ties by depends on its version; refused as ambiguous (give both the same value)", top, out.TieWordEmbeddings)
		}
	case r.Get("tie_word_embeddings") != nil: // the wrapper's own key wins (Qwen3_5Config.tie_word_embeddings)
		out.TieWordEmbeddings = r.Bool("tie_word_embeddings", out.TieWordEmbeddings)
	}
	if fam.Quirks != nil {
		fam.Quirks(tr, out)
	}
	if w := fam.Wrapper; w != nil && w.Top != nil && r.Err() == nil {
		w.Top(r, out)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if err := readRope(tr, out); err != nil {
		return nil, err
	}
	if err := checkpoint.ReadHeader(r, out); err != nil {
		return nil, err
	}
	if tr != r { // token ids a wrapper leaves to its text_config
		var tc checkpoint.Config
		if err := checkpoint.ReadHeader(tr, &tc); err != nil {
			return nil, err
		}
		if out.BOSTokenID < 0 {
			out.BOSTokenID = tc.BOSTokenID
		}
		if out.EOSTokenIDs == nil {
			out.EOSTokenIDs, out.EOSTokenID = tc.EOSTokenIDs, tc.EOSTokenID
		}
	}
	if err := out.CheckSizes(name); err != nil {
		return nil, err
	}
	return out, nil
}

// readCommon reads the keys every supported family shares, with the
// family's defaults d.
func readCommon(r *checkpoint.ConfigReader, c *checkpoint.Config, d Defaults) error {
	name := r.Name()
	size := func(key string, def int) int { // a constructor default, else required
		if def > 0 {
			return r.Positive(key, def)
		}
		return r.Required(key)
	}
	c.VocabSize = size("vocab_size", d.Vocab)
	c.HiddenSize = size("hidden_size", d.Hidden)
	if d.NoIntermediate {
		c.IntermediateSize = r.Int("intermediate_size", 0)
	} else {
		c.IntermediateSize = size("intermediate_size", d.Intermediate)
	}
	c.NumHiddenLayers = size("num_hidden_layers", d.Layers)
	c.NumAttentionHeads = size("num_attention_heads", d.Heads)
	if err := r.Err(); err != nil {
		return err
	}
	kvDefault := d.KVHeads
	if kvDefault == 0 {
		kvDefault = c.NumAttentionHeads
	}
	// A key given as null takes the None branch of the transformers
	// constructor; an absent key takes the constructor's default.
	if r.IsNull("num_key_value_heads") {
		kvDefault = c.NumAttentionHeads
	}
	c.NumKeyValueHeads = r.Positive("num_key_value_heads", kvDefault)
	hdDefault := d.HeadDim
	if hdDefault == 0 || r.IsNull("head_dim") {
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			hdDefault = -1 // only an error when head_dim is absent
		} else {
			hdDefault = c.HiddenSize / c.NumAttentionHeads
		}
	}
	c.HeadDim = r.Int("head_dim", hdDefault)
	if r.Err() == nil && c.HeadDim == -1 {
		return fmt.Errorf("%w: %s: hidden_size %d is not divisible by num_attention_heads %d (and no head_dim is given)", checkpoint.ErrConfig, name, c.HiddenSize, c.NumAttentionHeads)
	}
	c.MaxPositionEmbeddings = r.Positive("max_position_embeddings", d.MaxPos)
	c.RMSNormEps = r.Float("rms_norm_eps", d.Eps)
	c.RopeTheta = r.Float("rope_theta", d.Theta)
	c.TieWordEmbeddings = r.Bool("tie_word_embeddings", d.Tie)
	c.AttentionBias = r.Bool("attention_bias", d.AttnBias)
	c.HiddenAct = r.Str("hidden_act", "silu")
	return r.Err()
}

// readRope reads rope_scaling (or transformers v5 rope_parameters) into
// c.RopeScaling: nil for the default RoPE, else linear, llama3 or yarn (see
// RopeInvFreq).
func readRope(r *checkpoint.ConfigReader, c *checkpoint.Config) error {
	key := "rope_scaling"
	if r.Get(key) == nil {
		key = "rope_parameters"
		if r.Get(key) == nil {
			return nil
		}
	}
	sp := r.Sub(key)
	if err := r.Err(); err != nil {
		return err
	}
	typ := sp.Str("rope_type", "")
	if typ == "" {
		typ = sp.Str("type", "")
	}
	if key == "rope_parameters" && sp.Has("rope_theta") {
		c.RopeTheta = sp.Float("rope_theta", c.RopeTheta)
	}
	if err := r.Err(); err != nil {
		return err
	}
	rs := &checkpoint.RopeScaling{Type: typ}
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", checkpoint.ErrConfig, r.Name(), fmt.Sprintf(f, a...))
	}
	switch typ {
	case "", "default":
		return nil // v5 always writes rope_parameters; default means none
	case "linear":
		rs.Factor = sp.RequiredFloat("factor")
		if r.Err() == nil && !(rs.Factor > 0) {
			return bad("%s.factor must be positive, got %v", key, rs.Factor)
		}
	case "llama3":
		rs.Factor = sp.RequiredFloat("factor")
		rs.LowFreqFactor = sp.RequiredFloat("low_freq_factor")
		rs.HighFreqFactor = sp.RequiredFloat("high_freq_factor")
		rs.OriginalMaxPositionEmbeddings = sp.Required("original_max_position_embeddings")
		if err := r.Err(); err != nil {
			return err
		}
		switch {
		case !(rs.Factor > 0):
			return bad("%s.factor must be positive, got %v", key, rs.Factor)
		case !(rs.LowFreqFactor > 0):
			return bad("%s.low_freq_factor must be positive, got %v", key, rs.LowFreqFactor)
		case !(rs.HighFreqFactor > rs.LowFreqFactor):
			return bad("%s.high_freq_factor %v must exceed low_freq_factor %v", key, rs.HighFreqFactor, rs.LowFreqFactor)
		}
	case "yarn":
		// modeling_rope_utils.py _compute_yarn_parameters (transformers
		// 4.55+, the version that reads truncate): factor required;
		// original_max_position_embeddings or max_position_embeddings;
		// beta_fast/beta_slow "or" 32/1 (0 and null give the default);
		// rope_scaling.get("truncate", True) (null: falsy, no truncation);
		// attention_factor or get_mscale(factor). mscale/mscale_all_dim
		// (DeepSeek-V3) are not read here: refused.
		rs.Factor = sp.RequiredFloat("factor")
		rs.OriginalMaxPositionEmbeddings = sp.Int("original_max_position_embeddings", c.MaxPositionEmbeddings)
		rs.BetaFast = sp.Float("beta_fast", 0)
		rs.BetaSlow = sp.Float("beta_slow", 0)
		rs.Truncate = sp.Bool("truncate", true) && !sp.IsNull("truncate")
		rs.AttentionFactor = sp.Float("attention_factor", 0)
		if err := r.Err(); err != nil {
			return err
		}
		if rs.BetaFast == 0 {
			rs.BetaFast = 32
		}
		if rs.BetaSlow == 0 {
			rs.BetaSlow = 1
		}
		switch {
		case sp.Has("mscale") || sp.Has("mscale_all_dim"):
			return bad("%s: yarn with mscale/mscale_all_dim is not supported", key)
		case !(rs.Factor > 0):
			return bad("%s.factor must be positive, got %v", key, rs.Factor)
		case rs.OriginalMaxPositionEmbeddings <= 0:
			return bad("%s.original_max_position_embeddings must be positive, got %d", key, rs.OriginalMaxPositionEmbeddings)
		case !(rs.BetaFast > 0) || !(rs.BetaSlow > 0):
			return bad("%s: beta_fast %v and beta_slow %v must be positive", key, rs.BetaFast, rs.BetaSlow)
		case sp.Get("attention_factor") != nil && !(rs.AttentionFactor > 0):
			return bad("%s.attention_factor must be positive, got %v", key, rs.AttentionFactor)
		}
	default:
		return bad("unsupported %s type %q (supported: default, linear, llama3, yarn)", key, typ)
	}
	if err := r.Err(); err != nil {
		return err
	}
	c.RopeScaling = rs
	return nil
}
