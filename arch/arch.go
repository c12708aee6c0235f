package arch

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/detmath"
)

// ErrUnsupported is wrapped by every error of For.
var ErrUnsupported = errors.New("unsupported architecture")

// Tensor names shared by every layer-independent part of the model.
const (
	EmbedName     = "model.embed_tokens.weight"
	FinalNormName = "model.norm.weight"
	HeadModule    = "lm_head"
	LMHeadName    = "lm_head.weight"
)

// Spec is one model's architecture resolved from its config.
type Spec struct {
	Config  *checkpoint.Config // resolved (see Resolve)
	Family  Family
	Name    string // model_type
	HeadDim int
	QKVBias bool // qwen2, or attention_bias
	QKNorm  bool // qwen3
	// FusedQKV and FusedGateUp: fused projections (phi3, see Layout).
	FusedQKV, FusedGateUp bool
	TiedHead              bool

	// Copied from Config for convenience.
	Vocab, Hidden, Intermediate, Layers, Heads, KVHeads int
	Eps                                                 float64 // rms_norm_eps
	// OBias reports a bias on o_proj (llama/qwen3 attention_bias).
	OBias bool
	// MoE is the mixture-of-experts MLP (nil for a dense model); layer i
	// uses it when Sparse(i).
	MoE *checkpoint.MoE
	// SlidingWindow is the attention window of the sliding layers
	// (mistral, mixtral and phi3: every layer; qwen with
	// use_sliding_window: the layers layer_types or max_window_layers
	// name), 0 for none. Window(i) is layer i's.
	SlidingWindow int
	slidingLayers []bool // nil: every layer slides when SlidingWindow > 0

	// Gemma's operations (see Layout; zero for the other families).
	NormOffset, EmbedScale, SandwichNorms bool
	// GeluTanh: the MLP is down(gelu_tanh(gate)·up) (hidden_activation
	// gelu_pytorch_tanh) instead of down(silu(gate)·up).
	GeluTanh bool
	// AttnScale multiplies q·k: 1/sqrt(query_pre_attn_scalar) when the
	// config has one, else 1/sqrt(head_dim).
	AttnScale float64
	// AttnSoftcap, FinalSoftcap: attention scores (after AttnScale) and
	// the head's logits become cap·tanh(x/cap); 0 for none.
	AttnSoftcap, FinalSoftcap float64
	// LocalRopeTheta (gemma3_text): the sliding layers' RoPE base, with no
	// rope scaling; 0 when every layer uses RopeInvFreq. See LayerInvFreq.
	LocalRopeTheta float64

	// Qwen3.5 (zero otherwise). Prefix is the text decoder's module prefix
	// ("model.", or "model.language_model." in a multimodal checkpoint).
	Prefix string
	// RotaryDim is int(head_dim · partial_rotary_factor), HeadDim unless
	// partial rotary: RoPE has ceil(RotaryDim/2) frequencies 1/θ^(2i/RotaryDim)
	// and rotates (rotate-half) the first 2·ceil(RotaryDim/2) dimensions of
	// each head (apply_rotary_pos_emb's rotary_dim = cos.shape[-1]).
	RotaryDim int
	// AttnOutputGate: q_proj holds per head the query then a gate, and the
	// attention output is multiplied by sigmoid(gate) (see Layout).
	AttnOutputGate bool
	// LinearAttn is the Gated DeltaNet of a hybrid model (nil: none);
	// layer i is one when LinearLayer(i).
	LinearAttn *checkpoint.LinearAttention
	// Ignored are the tensor-name prefixes the model deliberately does not
	// run (vision tower): loaders report them, not as unused.
	Ignored []checkpoint.IgnoredPrefix
	// Gemma4 is the Gemma 4 text decoder's per-layer structure (head sizes,
	// KV sharing, per-layer inputs, RoPE per layer type; see gemma4.go);
	// nil for the other families.
	Gemma4 *Gemma4
	// GptOss holds gpt-oss's clamped-SwiGLU constants (see gpt_oss.go):
	// its layers have attention sinks, a router with a bias, and fused,
	// biased experts (GptOssExperts); nil for the other families.
	GptOss *GptOss
}

// LinearLayer reports whether layer i is a Gated DeltaNet layer.
func (s *Spec) LinearLayer(i int) bool { return s.LinearAttn != nil && s.LinearAttn.Layers[i] }

// EmbedTensor is the embedding's tensor name (EmbedName under Prefix).
func (s *Spec) EmbedTensor() string { return s.prefix() + "embed_tokens.weight" }

// FinalNormTensor is the final norm's tensor name (FinalNormName under Prefix).
func (s *Spec) FinalNormTensor() string { return s.prefix() + "norm.weight" }

func (s *Spec) prefix() string {
	if s.Prefix == "" {
		return "model."
	}
	return s.Prefix
}

// ConvDim is the number of channels of a Gated DeltaNet's in_proj_qkv and
// conv1d: query and key (KeyHeads·KeyDim each), then value.
func (s *Spec) ConvDim() int {
	la := s.LinearAttn
	return 2*la.KeyHeads*la.KeyDim + la.ValueHeads*la.ValueDim
}

// LocalRope reports whether layer i uses the local RoPE (LocalRopeTheta):
// gemma3_text's sliding_attention layers.
func (s *Spec) LocalRope(i int) bool {
	return s.LocalRopeTheta > 0 && s.slidingLayers != nil && s.slidingLayers[i]
}

// LayerInvFreq returns layer i's RoPE inverse frequencies: RopeInvFreq, or
// for a LocalRope layer the default RoPE of base LocalRopeTheta
// (Gemma3TextModel.rotary_emb_local).
func (s *Spec) LayerInvFreq(i int) []float64 {
	if s.Gemma4 != nil {
		return s.Gemma4.InvFreq(i, s.LayerHeadDim(i))
	}
	if s.LocalRope(i) {
		return RopeInvFreq(s.HeadDim, s.LocalRopeTheta, nil)
	}
	return s.RopeInvFreq()
}

// Window returns the attention window of layer i, 0 for full causal
// attention. With window W > 0, the query at position t attends to the
// keys at positions t-W+1 … t (W keys, itself included): transformers'
// masking_utils.sliding_window_overlay keeps kv_idx > q_idx - W on top of
// causal_mask_function's kv_idx <= q_idx. A window of at least the context
// length is full causal attention.
func (s *Spec) Window(i int) int {
	if s.SlidingWindow <= 0 || (s.slidingLayers != nil && !s.slidingLayers[i]) {
		return 0
	}
	return s.SlidingWindow
}

// For resolves the architecture of cfg or says why it is unsupported. A
// config not yet resolved (checkpoint.ParseConfig's) is resolved first
// (Resolve); its errors wrap checkpoint.ErrConfig.
func For(cfg *checkpoint.Config) (*Spec, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: no config", ErrUnsupported)
	}
	cfg, err := Resolve(cfg)
	if err != nil {
		return nil, err
	}
	fam, ok := Lookup(cfg.ModelType)
	if !ok {
		return nil, fmt.Errorf("%w: model_type %q (supported: %s)", ErrUnsupported, cfg.ModelType, strings.Join(Names(), ", "))
	}
	lay := fam.Layout(cfg)
	s := &Spec{
		Config: cfg, Family: fam, Name: cfg.ModelType, HeadDim: cfg.HeadDim, TiedHead: cfg.TieWordEmbeddings,
		Vocab: cfg.VocabSize, Hidden: cfg.HiddenSize, Intermediate: cfg.IntermediateSize,
		Layers: cfg.NumHiddenLayers, Heads: cfg.NumAttentionHeads, KVHeads: cfg.NumKeyValueHeads,
		Eps: cfg.RMSNormEps, QKVBias: lay.QKVBias, OBias: lay.OBias, QKNorm: lay.QKNorm,
		FusedQKV: lay.FusedQKV, FusedGateUp: lay.FusedGateUp, MoE: cfg.MoE,
	}
	if m := s.MoE; m != nil && fam.MoENames.Router == "" {
		return nil, fmt.Errorf("%w: %s: a mixture of experts without tensor names", ErrUnsupported, fam.Name)
	}
	if m := s.MoE; m != nil && (m.Experts <= 0 || m.TopK <= 0 || m.TopK > m.Experts || m.Intermediate <= 0 || len(m.Sparse) != cfg.NumHiddenLayers) {
		return nil, fmt.Errorf("%w: mixture of experts: %d experts, top %d, width %d, %d layer kinds for %d layers", ErrUnsupported, m.Experts, m.TopK, m.Intermediate, len(m.Sparse), cfg.NumHiddenLayers)
	}
	if cfg.MLPBias {
		return nil, fmt.Errorf("%w: %s with mlp_bias (biases on gate/up/down_proj) is not supported", ErrUnsupported, cfg.ModelType)
	}
	switch {
	case cfg.HiddenAct == "silu":
	case cfg.HiddenAct == "gelu_pytorch_tanh" && lay.EmbedScale: // the gemma families' hidden_activation
		s.GeluTanh = true
	default:
		return nil, fmt.Errorf("%w: %s with hidden_act %q (only silu is supported); the gemma families use gelu_pytorch_tanh", ErrUnsupported, cfg.ModelType, cfg.HiddenAct)
	}
	s.NormOffset, s.EmbedScale, s.SandwichNorms = lay.NormOffset, lay.EmbedScale, lay.SandwichNorms
	s.AttnSoftcap, s.FinalSoftcap = cfg.AttnLogitSoftcap, cfg.FinalLogitSoftcap
	s.LocalRopeTheta = cfg.RopeLocalTheta
	s.Prefix, s.AttnOutputGate, s.LinearAttn, s.Ignored = cfg.TextPrefix, lay.AttnOutputGate, cfg.LinearAttention, cfg.IgnoredPrefixes
	if la := s.LinearAttn; la != nil && (len(la.Layers) != cfg.NumHiddenLayers || la.KeyHeads <= 0 || la.ValueHeads%la.KeyHeads != 0 || la.KeyDim <= 0 || la.ValueDim <= 0 || la.ConvKernel <= 0) {
		return nil, fmt.Errorf("%w: linear attention %+v for %d layers", ErrUnsupported, *la, cfg.NumHiddenLayers)
	}
	if s.AttnSoftcap < 0 || s.FinalSoftcap < 0 || cfg.QueryPreAttnScalar < 0 {
		return nil, fmt.Errorf("%w: negative soft-capping (%v, %v) or query_pre_attn_scalar %v", ErrUnsupported, s.AttnSoftcap, s.FinalSoftcap, cfg.QueryPreAttnScalar)
	}
	s.SlidingWindow = cfg.SlidingWindow
	if cfg.SlidingLayers != nil {
		if len(cfg.SlidingLayers) != cfg.NumHiddenLayers {
			return nil, fmt.Errorf("%w: %d sliding-window layer kinds for %d layers", ErrUnsupported, len(cfg.SlidingLayers), cfg.NumHiddenLayers)
		}
		s.slidingLayers = cfg.SlidingLayers
	}
	if s.SlidingWindow < 0 {
		return nil, fmt.Errorf("%w: sliding window %d must not be negative", ErrUnsupported, s.SlidingWindow)
	}
	// ParseConfig guarantees these; a Config built in code may not, and a
	// zero KVHeads would divide by zero below.
	if s.Vocab <= 0 || s.Hidden <= 0 || s.Intermediate <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 {
		return nil, fmt.Errorf("%w: sizes must be positive: vocab %d, hidden %d, intermediate %d, layers %d, heads %d, key/value heads %d",
			ErrUnsupported, s.Vocab, s.Hidden, s.Intermediate, s.Layers, s.Heads, s.KVHeads)
	}
	if s.HeadDim <= 0 || s.HeadDim%2 != 0 {
		return nil, fmt.Errorf("%w: head_dim %d must be positive and even", ErrUnsupported, s.HeadDim)
	}
	s.AttnScale = 1 / math.Sqrt(float64(s.HeadDim))
	if cfg.QueryPreAttnScalar > 0 {
		s.AttnScale = 1 / math.Sqrt(cfg.QueryPreAttnScalar)
	}
	s.RotaryDim = s.HeadDim
	if f := cfg.PartialRotaryFactor; f > 0 && f < 1 {
		// int(head_dim · partial_rotary_factor), as compute_default_rope_parameters.
		s.RotaryDim = int(float64(s.HeadDim) * f)
		if s.RotaryDim <= 0 {
			return nil, fmt.Errorf("%w: rotary dimension %d (head_dim %d × partial_rotary_factor %v) must be positive", ErrUnsupported, s.RotaryDim, s.HeadDim, f)
		}
	}
	if g, ok := cfg.FamilySettings.(*Gemma4); ok {
		s.Gemma4 = g
		s.AttnScale = 1 // Gemma4TextAttention: self.scaling = 1.0
		if err := gemma4Check(s); err != nil {
			return nil, err
		}
	}
	if g, ok := cfg.FamilySettings.(*GptOss); ok {
		s.GptOss = g
		if s.MoE == nil {
			return nil, fmt.Errorf("%w: gpt_oss without experts", ErrUnsupported)
		}
	}
	if s.Heads%s.KVHeads != 0 {
		return nil, fmt.Errorf("%w: %d heads not divisible by %d key/value heads", ErrUnsupported, s.Heads, s.KVHeads)
	}
	if rs := cfg.RopeScaling; rs != nil {
		switch rs.Type {
		case "default", "linear", "llama3", "yarn":
		default:
			return nil, fmt.Errorf("%w: rope_scaling type %q", ErrUnsupported, rs.Type)
		}
	}
	return s, nil
}

// CheckContext reports whether windows of ctx tokens can be evaluated: ctx
// must be positive. (Positions past max_position_embeddings are allowed,
// as in transformers; sliding windows are computed, see Window.)
func (s *Spec) CheckContext(ctx int) error {
	if ctx <= 0 {
		return fmt.Errorf("arch: context length %d must be positive", ctx)
	}
	return nil
}

// Layer holds the tensor names of decoder layer i. Linear modules are
// module paths (append ".weight", ".bias", or a quantized format's suffixes);
// norms and biases are full tensor names. Optional names are "" when the
// architecture lacks them.
type Layer struct {
	Index                      int
	Prefix                     string // "model.layers.%d."
	AttnNorm                   string // input_layernorm.weight [hidden]
	Q, K, V, O                 string // self_attn.{q,k,v,o}_proj
	QBias, KBias, VBias, OBias string // self_attn.{q,k,v,o}_proj.bias
	QNorm, KNorm               string // self_attn.{q,k}_norm.weight [head_dim] (qwen3)
	MLPNorm                    string // post_attention_layernorm.weight [hidden] (gemma: pre_feedforward_layernorm)
	// PostAttnNorm, PostMLPNorm (gemma's SandwichNorms): post_attention_layernorm
	// on the attention output and post_feedforward_layernorm on the MLP
	// output, both [hidden]; "" otherwise.
	PostAttnNorm, PostMLPNorm string
	Gate, Up, Down            string // mlp.{gate,up,down}_proj ("" in a MoE layer)
	QKV                       string // self_attn.qkv_proj when fused (then Q, K, V are "")
	GateUp                    string // mlp.gate_up_proj when fused (then Gate, Up are "")
	Router                    string // the MoE router [experts, hidden] (mlp.gate, block_sparse_moe.gate; "" in a dense layer)
	// A Gated DeltaNet layer (qwen3_5's linear_attention; then Q, K, V, O,
	// QNorm, KNorm are ""): modules linear_attn.{in_proj_qkv, in_proj_z,
	// in_proj_b, in_proj_a, out_proj}; tensors linear_attn.conv1d.weight
	// [ConvDim, 1, kernel], A_log [value heads], dt_bias [value heads],
	// norm.weight [value head dim].
	InQKV, InZ, InB, InA, Out     string
	Conv, ALog, DtBias, GatedNorm string
	// SharedGate, SharedUp, SharedDown: the shared expert's modules
	// (mlp.shared_expert.*_proj); SharedExpertGate: mlp.shared_expert_gate
	// [1, hidden] ("" without a shared expert).
	SharedGate, SharedUp, SharedDown, SharedExpertGate string
	// Gemma 4 (see gemma4.go): per_layer_input_gate and per_layer_projection
	// (Linear modules), post_per_layer_input_norm.weight [hidden] and
	// layer_scalar [1]; "" otherwise or without per-layer inputs. K, V and
	// KNorm are "" on a KV-shared layer, V on a full attention_k_eq_v one.
	PLEGate, PLEProj, PLENorm, LayerScalar string
	// gpt-oss (see gpt_oss.go): self_attn.sinks [heads] and the router's
	// bias mlp.router.bias [experts]; "" otherwise.
	Sinks, RouterBias string
	// Gemma 4 MoE layers (enable_moe_block; the dense MLP stays in Gate,
	// Up, Down): router.scale [hidden], router.per_expert_scale [experts],
	// pre_feedforward_layernorm_2, post_feedforward_layernorm_1 and _2
	// (.weight, [hidden]); "" otherwise.
	RouterScale, PerExpertScale, PreMoENorm, PostMLPNorm1, PostMoENorm string
}

// Sparse reports whether layer i's MLP is the mixture of experts.
func (s *Spec) Sparse(i int) bool { return s.MoE != nil && s.MoE.Sparse[i] }

// Expert returns the module paths of expert e of MoE layer i (the family's
// MoENames: mlp.experts.{e}.{gate,up,down}_proj for qwen3_moe,
// block_sparse_moe.experts.{e}.{w1,w3,w2} for mixtral).
func (s *Spec) Expert(i, e int) (gate, up, down string) {
	n := s.Family.MoENames
	p := fmt.Sprintf("%slayers.%d.%sexperts.%d.", s.prefix(), i, n.block(), e)
	return p + n.Gate, p + n.Up, p + n.Down
}

// FusedExperts returns the tensor names of MoE layer i's experts as
// transformers ≥ 5 holds them, fused and 3-D (Qwen3MoeExperts,
// Qwen3_5MoeExperts, Gemma4TextExperts: experts.gate_up_proj [E, 2·I,
// hidden], gate rows first; experts.down_proj [E, hidden, I]). Package
// quant opens expert e's Expert(i, e) modules from them when the
// per-expert tensors are absent (quant/fused.go).
func (s *Spec) FusedExperts(i int) (gateUp, down string) {
	p := fmt.Sprintf("%slayers.%d.%sexperts.", s.prefix(), i, s.Family.MoENames.block())
	return p + "gate_up_proj", p + "down_proj"
}

// block is Block followed by a dot, or "" without a block.
func (n MoENames) block() string {
	if n.Block == "" {
		return ""
	}
	return n.Block + "."
}

// Layer returns the tensor names of decoder layer i.
func (s *Spec) Layer(i int) Layer {
	p := fmt.Sprintf("%slayers.%d.", s.prefix(), i)
	l := Layer{
		Index: i, Prefix: p,
		AttnNorm: p + "input_layernorm.weight",
		Q:        p + "self_attn.q_proj", K: p + "self_attn.k_proj",
		V: p + "self_attn.v_proj", O: p + "self_attn.o_proj",
		MLPNorm: p + "post_attention_layernorm.weight",
		Gate:    p + "mlp.gate_proj", Up: p + "mlp.up_proj", Down: p + "mlp.down_proj",
	}
	if s.FusedQKV {
		l.Q, l.K, l.V, l.QKV = "", "", "", p+"self_attn.qkv_proj"
	}
	if s.SandwichNorms {
		l.MLPNorm = p + "pre_feedforward_layernorm.weight"
		l.PostAttnNorm = p + "post_attention_layernorm.weight"
		l.PostMLPNorm = p + "post_feedforward_layernorm.weight"
	}
	if s.FusedGateUp && !s.Sparse(i) {
		l.Gate, l.Up, l.GateUp = "", "", p+"mlp.gate_up_proj"
	}
	if s.Sparse(i) {
		n := s.Family.MoENames
		l.Gate, l.Up, l.Down, l.Router = "", "", "", p+n.block()+n.Router
		if s.MoE.SharedIntermediate > 0 {
			se := p + n.Block + ".shared_expert."
			l.SharedGate, l.SharedUp, l.SharedDown = se+"gate_proj", se+"up_proj", se+"down_proj"
			l.SharedExpertGate = p + n.Block + ".shared_expert_gate"
		}
	}
	if s.LinearLayer(i) {
		la := p + "linear_attn."
		l.Q, l.K, l.V, l.O = "", "", "", ""
		l.InQKV, l.InZ, l.InB, l.InA, l.Out = la+"in_proj_qkv", la+"in_proj_z", la+"in_proj_b", la+"in_proj_a", la+"out_proj"
		l.Conv, l.ALog, l.DtBias, l.GatedNorm = la+"conv1d.weight", la+"A_log", la+"dt_bias", la+"norm.weight"
		return l
	}
	if s.GptOss != nil {
		l.Sinks = p + "self_attn.sinks"
		if l.Router != "" {
			l.RouterBias = l.Router + ".bias"
		}
	}
	if g := s.Gemma4; g != nil {
		l.LayerScalar = p + "layer_scalar"
		if g.PLE > 0 {
			l.PLEGate, l.PLEProj, l.PLENorm = p+"per_layer_input_gate", p+"per_layer_projection", p+"post_per_layer_input_norm.weight"
		}
		if s.Sparse(i) {
			s.gemma4MoELayer(&l)
		}
	}
	if s.QKVBias {
		l.QBias, l.KBias, l.VBias = l.Q+".bias", l.K+".bias", l.V+".bias"
	}
	if s.OBias {
		l.OBias = l.O + ".bias"
	}
	if s.QKNorm {
		l.QNorm, l.KNorm = p+"self_attn.q_norm.weight", p+"self_attn.k_norm.weight"
	}
	if g := s.Gemma4; g != nil {
		if g.Shares(i) {
			l.K, l.V, l.KNorm = "", "", ""
		}
		if g.KEqV && g.Full[i] {
			l.V = ""
		}
		if s.QKVBias && l.K == "" {
			l.KBias = ""
		}
		if s.QKVBias && l.V == "" {
			l.VBias = ""
		}
	}
	return l
}

// Linear is one linear module: y = x·Wᵀ (+ b) with W of shape [Out, In].
type Linear struct {
	Module  string // path without ".weight"
	Out, In int
	Bias    bool
	Proj    Proj // its role in the layer (ProjQ … ProjRouter; ProjHead for lm_head)
	// Expert is the expert index of a MoE expert's gate/up/down_proj, -1
	// for every other module.
	Expert int
}

// Proj names a linear module of a decoder layer. Both backends hold a
// layer's linears (and biases) in arrays indexed by Proj, so that the two
// forward passes name each weight the same way; LayerLinears returns them
// in this order, which is the forward order.
type Proj int

// The linear modules of a decoder layer, and the head.
const (
	ProjQ                Proj = iota // self_attn.q_proj [heads·head_dim, hidden]
	ProjK                            // self_attn.k_proj [kv_heads·head_dim, hidden]
	ProjV                            // self_attn.v_proj [kv_heads·head_dim, hidden]
	ProjO                            // self_attn.o_proj [hidden, heads·head_dim]
	ProjGate                         // mlp.gate_proj [intermediate, hidden]
	ProjUp                           // mlp.up_proj [intermediate, hidden]
	ProjDown                         // mlp.down_proj [hidden, intermediate]; in a MoE layer also each expert's
	ProjRouter                       // mlp.gate, the MoE router [experts, hidden]
	ProjQKV                          // self_attn.qkv_proj, fused q, k, v [(heads+2·kv_heads)·head_dim, hidden]
	ProjGateUp                       // mlp.gate_up_proj, fused gate, up [2·intermediate, hidden]
	ProjInQKV                        // linear_attn.in_proj_qkv [ConvDim, hidden]
	ProjInZ                          // linear_attn.in_proj_z [value heads·value dim, hidden]
	ProjInB                          // linear_attn.in_proj_b [value heads, hidden]
	ProjInA                          // linear_attn.in_proj_a [value heads, hidden]
	ProjOut                          // linear_attn.out_proj [hidden, value heads·value dim]
	ProjSharedGate                   // mlp.shared_expert.gate_proj [shared width, hidden]
	ProjSharedUp                     // mlp.shared_expert.up_proj [shared width, hidden]
	ProjSharedDown                   // mlp.shared_expert.down_proj [hidden, shared width]
	ProjSharedExpertGate             // mlp.shared_expert_gate [1, hidden]
	ProjPLEGate                      // gemma4 per_layer_input_gate [hidden_size_per_layer_input, hidden]
	ProjPLEProj                      // gemma4 per_layer_projection [hidden, hidden_size_per_layer_input]
	// NumProj is the number of linear modules of a decoder layer.
	NumProj
	// ProjHead is lm_head (not a layer module).
	ProjHead Proj = -1
)

// String returns the module's short name (q_proj, …, lm_head).
func (p Proj) String() string {
	switch p {
	case ProjQ:
		return "q_proj"
	case ProjK:
		return "k_proj"
	case ProjV:
		return "v_proj"
	case ProjO:
		return "o_proj"
	case ProjGate:
		return "gate_proj"
	case ProjUp:
		return "up_proj"
	case ProjDown:
		return "down_proj"
	case ProjRouter:
		return "gate"
	case ProjQKV:
		return "qkv_proj"
	case ProjGateUp:
		return "gate_up_proj"
	case ProjInQKV:
		return "in_proj_qkv"
	case ProjInZ:
		return "in_proj_z"
	case ProjInB:
		return "in_proj_b"
	case ProjInA:
		return "in_proj_a"
	case ProjOut:
		return "out_proj"
	case ProjSharedGate:
		return "shared_expert.gate_proj"
	case ProjSharedUp:
		return "shared_expert.up_proj"
	case ProjSharedDown:
		return "shared_expert.down_proj"
	case ProjSharedExpertGate:
		return "shared_expert_gate"
	case ProjPLEGate:
		return "per_layer_input_gate"
	case ProjPLEProj:
		return "per_layer_projection"
	case ProjHead:
		return HeadModule
	}
	return fmt.Sprintf("Proj(%d)", int(p))
}

// LayerLinears returns the linear modules of layer i in forward order with
// their logical shapes: q, k, v (or the fused qkv), o, then the MLP's gate,
// up (or the fused gate_up), down — index k holds Proj(k) in a dense layer
// without fused projections — or, in a MoE layer, the router followed by
// each expert's gate, up and down (Expert 0, 1, ...).
func (s *Spec) LayerLinears(i int) []Linear {
	if s.Gemma4 != nil {
		return s.gemma4Linears(i)
	}
	l := s.Layer(i)
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	var out []Linear
	qOut := q
	if s.AttnOutputGate {
		qOut = 2 * q // per head: query, then gate
	}
	switch {
	case s.LinearLayer(i):
		la := s.LinearAttn
		v := la.ValueHeads * la.ValueDim
		out = append(out,
			Linear{l.InQKV, s.ConvDim(), s.Hidden, false, ProjInQKV, -1},
			Linear{l.InZ, v, s.Hidden, false, ProjInZ, -1},
			Linear{l.InB, la.ValueHeads, s.Hidden, false, ProjInB, -1},
			Linear{l.InA, la.ValueHeads, s.Hidden, false, ProjInA, -1},
			Linear{l.Out, s.Hidden, v, false, ProjOut, -1})
	case s.FusedQKV:
		out = append(out, Linear{l.QKV, q + 2*kv, s.Hidden, false, ProjQKV, -1})
	default:
		out = append(out,
			Linear{l.Q, qOut, s.Hidden, s.QKVBias, ProjQ, -1},
			Linear{l.K, kv, s.Hidden, s.QKVBias, ProjK, -1},
			Linear{l.V, kv, s.Hidden, s.QKVBias, ProjV, -1})
	}
	if !s.LinearLayer(i) {
		out = append(out, Linear{l.O, s.Hidden, q, s.OBias, ProjO, -1})
	}
	if !s.Sparse(i) && s.FusedGateUp {
		return append(out,
			Linear{l.GateUp, 2 * s.Intermediate, s.Hidden, false, ProjGateUp, -1},
			Linear{l.Down, s.Hidden, s.Intermediate, false, ProjDown, -1})
	}
	if !s.Sparse(i) {
		return append(out,
			Linear{l.Gate, s.Intermediate, s.Hidden, false, ProjGate, -1},
			Linear{l.Up, s.Intermediate, s.Hidden, false, ProjUp, -1},
			Linear{l.Down, s.Hidden, s.Intermediate, false, ProjDown, -1})
	}
	m := s.MoE
	if s.GptOss != nil { // the router has a bias; the experts are fused 3-D tensors (GptOssExperts), not Linears
		return append(out, Linear{l.Router, m.Experts, s.Hidden, true, ProjRouter, -1})
	}
	out = append(out, Linear{l.Router, m.Experts, s.Hidden, false, ProjRouter, -1})
	for e := 0; e < m.Experts; e++ {
		g, u, d := s.Expert(i, e)
		out = append(out,
			Linear{g, m.Intermediate, s.Hidden, false, ProjGate, e},
			Linear{u, m.Intermediate, s.Hidden, false, ProjUp, e},
			Linear{d, s.Hidden, m.Intermediate, false, ProjDown, e})
	}
	if w := m.SharedIntermediate; w > 0 {
		out = append(out,
			Linear{l.SharedGate, w, s.Hidden, false, ProjSharedGate, -1},
			Linear{l.SharedUp, w, s.Hidden, false, ProjSharedUp, -1},
			Linear{l.SharedDown, s.Hidden, w, false, ProjSharedDown, -1},
			Linear{l.SharedExpertGate, 1, s.Hidden, false, ProjSharedExpertGate, -1})
	}
	return out
}

// MLPWidth returns the widest MLP activation of any layer: the dense
// intermediate size, the experts' width and the router's expert count.
func (s *Spec) MLPWidth() int {
	w := s.Intermediate
	if s.Gemma4 != nil {
		for i := 0; i < s.Layers; i++ {
			w = max(w, s.LayerIntermediate(i))
		}
	}
	if s.MoE != nil {
		w = max(w, s.MoE.Intermediate, s.MoE.Experts, s.MoE.SharedIntermediate)
	}
	if s.GptOss != nil {
		w = max(w, 2*s.MoE.Intermediate) // gate_up's interleaved output
	}
	return w
}

// Bias returns the bias tensor name of projection p in l ("" when the
// architecture has none): q, k, v, o and gpt-oss's router.
func (l Layer) Bias(p Proj) string {
	switch p {
	case ProjQ:
		return l.QBias
	case ProjK:
		return l.KBias
	case ProjV:
		return l.VBias
	case ProjO:
		return l.OBias
	case ProjRouter:
		return l.RouterBias
	}
	return ""
}

// LayerModules returns the linear module paths of layer i (without
// ".weight"), in forward order.
func (s *Spec) LayerModules(i int) []string {
	ls := s.LayerLinears(i)
	out := make([]string, len(ls))
	for k, l := range ls {
		out[k] = l.Module
	}
	return out
}

// Head returns the output projection: module "lm_head" with shape
// [vocab, hidden]. When the head is tied its weight is the embedding.
func (s *Spec) Head() Linear { return Linear{HeadModule, s.Vocab, s.Hidden, false, ProjHead, -1} }

// HeadName returns the tensor holding the dense output projection weight:
// lm_head.weight, or model.embed_tokens.weight when tie_word_embeddings is
// set (transformers then ignores any lm_head.weight in the checkpoint).
func (s *Spec) HeadName() string {
	if s.TiedHead {
		return EmbedName
	}
	return LMHeadName
}

// TensorShape is a tensor name with its expected shape.
type TensorShape struct {
	Name  string
	Shape []int
}

// DenseTensors returns every tensor that stays dense in any supported
// checkpoint format (embedding, norms, biases, q/k norms), in forward order,
// with expected shapes. Linear weights are not included: their storage
// depends on the quantization format.
func (s *Spec) DenseTensors() []TensorShape {
	if s.Gemma4 != nil {
		return s.gemma4Dense()
	}
	out := []TensorShape{{s.EmbedTensor(), []int{s.Vocab, s.Hidden}}}
	for i := 0; i < s.Layers; i++ {
		l := s.Layer(i)
		q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
		out = append(out, TensorShape{l.AttnNorm, []int{s.Hidden}})
		if s.LinearLayer(i) {
			la := s.LinearAttn
			out = append(out,
				TensorShape{l.Conv, []int{s.ConvDim(), 1, la.ConvKernel}},
				TensorShape{l.ALog, []int{la.ValueHeads}},
				TensorShape{l.DtBias, []int{la.ValueHeads}},
				TensorShape{l.GatedNorm, []int{la.ValueDim}},
				TensorShape{l.MLPNorm, []int{s.Hidden}})
			continue
		}
		if s.QKVBias {
			out = append(out, TensorShape{l.QBias, []int{q}}, TensorShape{l.KBias, []int{kv}}, TensorShape{l.VBias, []int{kv}})
		}
		if s.OBias {
			out = append(out, TensorShape{l.OBias, []int{s.Hidden}})
		}
		if s.GptOss != nil {
			out = append(out, s.gptOssDense(i)...)
		}
		if s.QKNorm {
			out = append(out, TensorShape{l.QNorm, []int{s.HeadDim}}, TensorShape{l.KNorm, []int{s.HeadDim}})
		}
		out = append(out, TensorShape{l.MLPNorm, []int{s.Hidden}})
		if s.SandwichNorms {
			out = append(out, TensorShape{l.PostAttnNorm, []int{s.Hidden}}, TensorShape{l.PostMLPNorm, []int{s.Hidden}})
		}
	}
	return append(out, TensorShape{s.FinalNormTensor(), []int{s.Hidden}})
}

// DenseWeights returns DenseTensors plus the weight of every linear module
// as an unquantized checkpoint stores it ([out, in]), and lm_head.weight
// unless the head is tied: the full tensor list of a dense HF checkpoint.
func (s *Spec) DenseWeights() []TensorShape {
	out := s.DenseTensors()
	for i := 0; i < s.Layers; i++ {
		for _, l := range s.LayerLinears(i) {
			out = append(out, TensorShape{l.Module + ".weight", []int{l.Out, l.In}})
		}
		if s.GptOss != nil {
			gu, _, dn, _ := s.GptOssExperts(i)
			E, I := s.MoE.Experts, s.MoE.Intermediate
			out = append(out, TensorShape{gu, []int{E, s.Hidden, 2 * I}}, TensorShape{dn, []int{E, I, s.Hidden}})
		}
	}
	if !s.TiedHead {
		out = append(out, TensorShape{LMHeadName, []int{s.Vocab, s.Hidden}})
	}
	return out
}

// CheckDense verifies that m holds every tensor of DenseTensors with the
// expected shape and a float dtype, naming the first one missing or wrong.
func (s *Spec) CheckDense(m *checkpoint.Model) error {
	for _, ts := range s.DenseTensors() {
		if err := checkTensor(m, ts); err != nil {
			return err
		}
		switch ti, _ := m.Tensor(ts.Name); ti.DType {
		case checkpoint.F16, checkpoint.BF16, checkpoint.F32, checkpoint.F64:
		default:
			return fmt.Errorf("%w: %s: tensor %q has dtype %s, want F16, BF16, F32 or F64", checkpoint.ErrFormat, ti.File, ts.Name, ti.DType)
		}
	}
	return nil
}

// CheckTensor verifies that m holds the tensor ts.Name with shape ts.Shape.
func CheckTensor(m *checkpoint.Model, ts TensorShape) error { return checkTensor(m, ts) }

func checkTensor(m *checkpoint.Model, ts TensorShape) error {
	ti, ok := m.Tensor(ts.Name)
	if !ok {
		return fmt.Errorf("%w: %s: tensor %q is missing", checkpoint.ErrNotFound, m.Dir, ts.Name)
	}
	if !equalShape(ti.Shape, ts.Shape) {
		return fmt.Errorf("%w: %s: tensor %q has shape %v, want %v from config.json", checkpoint.ErrFormat, ti.File, ts.Name, ti.Shape, ts.Shape)
	}
	return nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RopeInvFreq returns the HeadDim/2 rotary inverse frequencies in float64,
// exactly as transformers' rope initialisation functions define them:
//
//	default: inv_freq[i] = 1 / theta^(2i/dim)          (_compute_default_rope_parameters)
//	linear:  inv_freq[i] / factor                       (_compute_linear_scaling_rope_parameters)
//	llama3:  wavelen = 2π/inv_freq; wavelen > old/low_freq_factor → inv_freq/factor;
//	         wavelen < old/high_freq_factor → inv_freq; otherwise
//	         (1-smooth)·inv_freq/factor + smooth·inv_freq with
//	         smooth = (old/wavelen - low_freq_factor)/(high_freq_factor - low_freq_factor)
//	                                                    (_compute_llama3_parameters)
//
// with dim = head_dim and old = original_max_position_embeddings. The
// attention scaling of these three types is 1.
func (s *Spec) RopeInvFreq() []float64 {
	dim := s.HeadDim
	if s.RotaryDim > 0 {
		dim = s.RotaryDim // partial rotary (qwen3_5): RotaryDim/2 frequencies
	}
	return RopeInvFreq(dim, s.Config.RopeTheta, s.Config.RopeScaling)
}

// RopeInvFreq computes the inverse frequencies for head dimension dim (see
// Spec.RopeInvFreq). rs may be nil (default).
func RopeInvFreq(dim int, theta float64, rs *checkpoint.RopeScaling) []float64 {
	inv := make([]float64, (dim+1)/2) // torch.arange(0, dim, 2): an odd partial-rotary dim rounds up
	for i := range inv {
		inv[i] = 1 / detmath.Pow(theta, float64(2*i)/float64(dim)) // math.Pow differs across GOARCHes
	}
	if rs == nil {
		return inv
	}
	switch rs.Type {
	case "linear":
		for i := range inv {
			inv[i] /= rs.Factor
		}
	case "llama3":
		old := float64(rs.OriginalMaxPositionEmbeddings)
		lowWavelen := old / rs.LowFreqFactor
		highWavelen := old / rs.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			scaled := f
			if wavelen > lowWavelen {
				scaled = f / rs.Factor
			}
			// Medium frequencies: neither wavelen < high nor wavelen > low.
			if !(wavelen < highWavelen) && !(wavelen > lowWavelen) {
				smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
				scaled = float64((1-smooth)*scaled/rs.Factor) + float64(smooth*scaled) // never fused
			}
			inv[i] = scaled
		}
	case "yarn":
		yarnInvFreq(inv, dim, theta, rs)
	}
	return inv
}

// yarnInvFreq overwrites inv with YaRN's inverse frequencies,
// transformers' modeling_rope_utils.py _compute_yarn_parameters (4.55+),
// in float64:
//
//	pos_freqs[i] = base^(2i/dim); extrapolation = 1/pos_freqs;
//	interpolation = 1/(factor·pos_freqs)
//	find_correction_dim(r) = dim·ln(orig/(r·2π)) / (2·ln base)
//	low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow),
//	            floor/ceil only when truncate, then max(low, 0), min(high, dim-1)
//	ramp[i] = clamp((i - low)/(high - low), 0, 1) (high += 0.001 when equal)
//	e = 1 - ramp; inv_freq = interpolation·(1 - e) + extrapolation·e
//
// with orig = original_max_position_embeddings. The cos and sin tables are
// then multiplied by RopeAttentionFactor.
func yarnInvFreq(inv []float64, dim int, base float64, rs *checkpoint.RopeScaling) {
	d := float64(dim)
	orig := float64(rs.OriginalMaxPositionEmbeddings)
	corr := func(rot float64) float64 {
		return d * detmath.Log(orig/(rot*2*math.Pi)) / (2 * detmath.Log(base))
	}
	low, high := corr(rs.BetaFast), corr(rs.BetaSlow)
	if rs.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, d-1)
	if low == high {
		high += 0.001
	}
	for i := range inv {
		pos := detmath.Pow(base, float64(2*i)/d)
		extra, inter := 1/pos, 1/(rs.Factor*pos)
		ramp := min(max((float64(i)-low)/(high-low), 0), 1)
		e := 1 - ramp
		inv[i] = float64(inter*(1-e)) + float64(extra*e) // never fused
	}
}

// RopeAttentionFactor is the factor transformers multiplies RoPE's cos and
// sin by (the rope init function's attention_scaling): 1 except for yarn,
// whose attention_factor is rope_scaling's, or else get_mscale(factor) =
// 0.1·ln(factor) + 1 (1 when factor ≤ 1) — _compute_yarn_parameters.
func RopeAttentionFactor(rs *checkpoint.RopeScaling) float64 {
	if rs == nil || rs.Type != "yarn" {
		return 1
	}
	if rs.AttentionFactor > 0 {
		return rs.AttentionFactor
	}
	if rs.Factor <= 1 {
		return 1
	}
	return 0.1*detmath.Log(rs.Factor) + 1
}
