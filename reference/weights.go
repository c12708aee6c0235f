package reference

import (
	"fmt"
	"math"
	"strconv"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/quant"
)

// source gives the reference access to a checkpoint's tensors. The
// production source is a checkpoint.Model seen through a quant.Scheme; tests
// may supply dense in-memory weights.
type source interface {
	// Linear opens a Linear module (name without ".weight").
	Linear(module string) (quant.Linear, error)
	// Float64 decodes a small dense tensor (norm weight, bias, embedding).
	Float64(name string) ([]float64, []int, error)
}

// checkpointSource reads through package quant, so every packed format
// quant understands is decoded exactly.
type checkpointSource struct {
	m      *checkpoint.Model
	scheme *quant.Scheme
}

func (s checkpointSource) Linear(module string) (quant.Linear, error) {
	return s.scheme.Linear(s.m, module)
}

func (s checkpointSource) Float64(name string) ([]float64, []int, error) {
	return s.m.ReadFloat64(name)
}

// dims are the resolved sizes of a model.
type dims struct {
	C, H, KV, D, I, V, L int
	eps                  float64
}

// layerWeights binds one decoder layer. Linears are handles: they are
// decoded into the scratch buffer when the layer runs.
type layerWeights struct {
	attnNorm, mlpNorm          []float64 // [C]
	qNorm, kNorm               []float64 // [D], qwen3 only
	q, k, v, o, gate, up, down quant.Linear
	bq, bk, bv, bo             []float64 // nil when absent
}

// model is a bound checkpoint.
type model struct {
	dims
	invFreq []float64 // [D/2]
	embed   []float64 // [V][C], decoded once
	norm    []float64 // [C]
	head    quant.Linear
	layers  []layerWeights
	scratch int // largest Linear of a layer, out·in
}

// facts are the per-architecture options the forward pass needs.
type facts struct {
	qkvBias, oBias, qkNorm, tied bool
	headDim                      int
}

// archFacts resolves the architectural options of cfg the way transformers'
// modeling files do.
func archFacts(cfg *checkpoint.Config) (facts, error) {
	var f facts
	switch cfg.ModelType {
	case "llama", "mistral":
		f.qkvBias = cfg.AttentionBias
		f.oBias = cfg.AttentionBias
	case "qwen2":
		f.qkvBias = true // Qwen2Attention: bias on q, k, v only
	case "qwen3":
		f.qkvBias = cfg.AttentionBias
		f.oBias = cfg.AttentionBias
		f.qkNorm = true
	default:
		return f, fmt.Errorf("reference: unsupported model_type %q (want llama, mistral, qwen2 or qwen3)", cfg.ModelType)
	}
	if cfg.HiddenAct != "" && cfg.HiddenAct != "silu" {
		return f, fmt.Errorf("reference: unsupported hidden_act %q (want silu)", cfg.HiddenAct)
	}
	f.tied = cfg.TieWordEmbeddings
	f.headDim = cfg.HeadDim
	if f.headDim == 0 && cfg.NumAttentionHeads > 0 {
		f.headDim = cfg.HiddenSize / cfg.NumAttentionHeads
	}
	return f, nil
}

// ropeInvFreq returns transformers' RoPE inverse frequencies for head width
// dim, computed in float64: default 1/theta^(2i/dim), linear (divided by
// factor) and llama3 (_compute_llama3_parameters).
func ropeInvFreq(cfg *checkpoint.Config, dim int) ([]float64, error) {
	if dim <= 0 || dim%2 != 0 {
		return nil, fmt.Errorf("reference: head_dim %d must be positive and even for RoPE", dim)
	}
	theta := cfg.RopeTheta
	if !(theta > 0) {
		return nil, fmt.Errorf("reference: rope_theta %v must be positive", theta)
	}
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(dim))
	}
	rs := cfg.RopeScaling
	if rs == nil || rs.Type == "" || rs.Type == "default" {
		return inv, nil
	}
	switch rs.Type {
	case "linear":
		if !(rs.Factor > 0) {
			return nil, fmt.Errorf("reference: rope_scaling linear factor %v must be positive", rs.Factor)
		}
		for i := range inv {
			inv[i] /= rs.Factor
		}
	case "llama3":
		if !(rs.Factor > 0) || !(rs.LowFreqFactor > 0) || !(rs.HighFreqFactor > rs.LowFreqFactor) || rs.OriginalMaxPositionEmbeddings <= 0 {
			return nil, fmt.Errorf("reference: invalid llama3 rope_scaling %+v", *rs)
		}
		old := float64(rs.OriginalMaxPositionEmbeddings)
		lowWavelen := old / rs.LowFreqFactor
		highWavelen := old / rs.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			scaled := f
			if wavelen > lowWavelen {
				scaled = f / rs.Factor
			}
			if !(wavelen < highWavelen) && !(wavelen > lowWavelen) {
				smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
				scaled = (1-smooth)*scaled/rs.Factor + smooth*scaled
			}
			inv[i] = scaled
		}
	default:
		return nil, fmt.Errorf("reference: unsupported rope_scaling type %q", rs.Type)
	}
	return inv, nil
}

// bind resolves cfg and opens every tensor of the model from src, checking
// every shape. Linears stay encoded; small tensors and the embedding are
// decoded.
func bind(cfg *checkpoint.Config, src source) (*model, error) {
	if cfg == nil {
		return nil, fmt.Errorf("reference: nil config")
	}
	f, err := archFacts(cfg)
	if err != nil {
		return nil, err
	}
	d := dims{
		C: cfg.HiddenSize, H: cfg.NumAttentionHeads, KV: cfg.NumKeyValueHeads,
		D: f.headDim, I: cfg.IntermediateSize, V: cfg.VocabSize, L: cfg.NumHiddenLayers,
		eps: cfg.RMSNormEps,
	}
	if d.KV == 0 {
		d.KV = d.H
	}
	if d.C <= 0 || d.H <= 0 || d.KV <= 0 || d.D <= 0 || d.I <= 0 || d.V <= 0 || d.L <= 0 {
		return nil, fmt.Errorf("reference: config.json: non-positive size in %+v", d)
	}
	if d.H%d.KV != 0 {
		return nil, fmt.Errorf("reference: config.json: num_attention_heads %d not a multiple of num_key_value_heads %d", d.H, d.KV)
	}
	if !(d.eps >= 0) {
		return nil, fmt.Errorf("reference: config.json: rms_norm_eps %v", d.eps)
	}
	m := &model{dims: d, layers: make([]layerWeights, d.L)}
	if m.invFreq, err = ropeInvFreq(cfg, d.D); err != nil {
		return nil, err
	}
	vec := func(name string, n int) ([]float64, error) {
		v, shape, err := src.Float64(name)
		if err != nil {
			return nil, fmt.Errorf("reference: %s: %w", name, err)
		}
		if len(shape) != 1 || shape[0] != n || len(v) != n {
			return nil, fmt.Errorf("reference: %s: shape %v, want [%d]", name, shape, n)
		}
		return v, nil
	}
	lin := func(module string, out, in int) (quant.Linear, error) {
		l, err := src.Linear(module)
		if err != nil {
			return nil, fmt.Errorf("reference: %s: %w", module, err)
		}
		if o, i := l.Shape(); o != out || i != in {
			return nil, fmt.Errorf("reference: %s: weight shape [%d %d], want [%d %d]", module, o, i, out, in)
		}
		return l, nil
	}
	emb, shape, err := src.Float64("model.embed_tokens.weight")
	if err != nil {
		return nil, fmt.Errorf("reference: model.embed_tokens.weight: %w", err)
	}
	if len(shape) != 2 || shape[0] != d.V || shape[1] != d.C || len(emb) != d.V*d.C {
		return nil, fmt.Errorf("reference: model.embed_tokens.weight: shape %v, want [%d %d]", shape, d.V, d.C)
	}
	m.embed = emb
	if m.norm, err = vec("model.norm.weight", d.C); err != nil {
		return nil, err
	}
	if !f.tied {
		if m.head, err = lin("lm_head", d.V, d.C); err != nil {
			return nil, err
		}
	}
	qw, kvw := d.H*d.D, d.KV*d.D
	m.scratch = max(qw*d.C, kvw*d.C, d.C*qw, d.I*d.C, d.C*d.I)
	for i := range m.layers {
		p := "model.layers." + strconv.Itoa(i) + "."
		l := &m.layers[i]
		if l.attnNorm, err = vec(p+"input_layernorm.weight", d.C); err != nil {
			return nil, err
		}
		if l.mlpNorm, err = vec(p+"post_attention_layernorm.weight", d.C); err != nil {
			return nil, err
		}
		for _, x := range []struct {
			dst     *quant.Linear
			name    string
			out, in int
		}{
			{&l.q, "self_attn.q_proj", qw, d.C},
			{&l.k, "self_attn.k_proj", kvw, d.C},
			{&l.v, "self_attn.v_proj", kvw, d.C},
			{&l.o, "self_attn.o_proj", d.C, qw},
			{&l.gate, "mlp.gate_proj", d.I, d.C},
			{&l.up, "mlp.up_proj", d.I, d.C},
			{&l.down, "mlp.down_proj", d.C, d.I},
		} {
			if *x.dst, err = lin(p+x.name, x.out, x.in); err != nil {
				return nil, err
			}
		}
		if f.qkvBias {
			if l.bq, err = vec(p+"self_attn.q_proj.bias", qw); err != nil {
				return nil, err
			}
			if l.bk, err = vec(p+"self_attn.k_proj.bias", kvw); err != nil {
				return nil, err
			}
			if l.bv, err = vec(p+"self_attn.v_proj.bias", kvw); err != nil {
				return nil, err
			}
		}
		if f.oBias {
			if l.bo, err = vec(p+"self_attn.o_proj.bias", d.C); err != nil {
				return nil, err
			}
		}
		if f.qkNorm {
			if l.qNorm, err = vec(p+"self_attn.q_norm.weight", d.D); err != nil {
				return nil, err
			}
			if l.kNorm, err = vec(p+"self_attn.k_norm.weight", d.D); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
