package gguf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qppl/qppl/arch"
)

// Arch declares one GGUF architecture (general.architecture): everything
// package gguf knows about it, in one place. Each is one file
// arch_<name>.go holding one function that returns its declaration;
// archs() lists them. OpenModel (reading), Convert (writing), Inspect and
// the backends only consult these declarations: nothing else in package
// gguf names a GGUF architecture.
//
// What every architecture shares is not declared: the common <arch>.*
// hyperparameter keys (Model.resolve, Convert), token_embd / output_norm /
// output, a tied head when output.weight is absent, rope_freqs.weight, and
// the standard layer tensor table (StandardLayer).
type Arch struct {
	// Name is general.architecture.
	Name string
	// ModelTypes are the Hugging Face model_type values Convert writes as
	// this architecture (llama: llama, mistral, mixtral).
	ModelTypes []string
	// PermuteQK: llama.cpp's converter permutes the rows of q_proj and
	// k_proj (convert_hf_to_gguf.py LlamaModel.permute); the reader undoes
	// it (Unpermute, Linear.RowOrder), the converter applies it (Permute).
	PermuteQK bool
	// KeyLengthRequired: the head size is <arch>.attention.key_length and
	// never defaults to embedding_length / head_count (qwen3's head_dim).
	KeyLengthRequired bool
	// Config reads the architecture's own metadata into the config.json
	// object cfg after the common keys (Model.resolve): at least
	// cfg["model_type"]. Its errors name the file and key (m.metaErr,
	// ErrFormat, ErrUnsupported).
	Config func(m *Model, cfg map[string]any) error
	// Layer returns layer i's tensor table (Hugging Face name → GGUF name);
	// nil is StandardLayer. Every tensor of the layer (s.DenseWeights)
	// must be in it.
	Layer func(s *arch.Spec, i int) []TensorName
	// MoEOnly: every layer's MLP is a mixture of experts without a dense
	// width (qwen35moe): <arch>.feed_forward_length is neither required
	// nor written.
	MoEOnly bool
	// PartialRotary: <arch>.rope.dimension_count may be smaller than the
	// head size (qwen35: int(head_dim · partial_rotary_factor)); it is
	// read as partial_rotary_factor and written from Spec.RotaryDim.
	PartialRotary bool
	// Convert checks that s is a model llama.cpp's graph of this
	// architecture computes (refusing what it would compute differently,
	// naming the config.json key) and returns the architecture's own
	// metadata, written after the common keys.
	Convert func(s *arch.Spec) ([]KV, error)
	// Globals returns the layer-independent tensors (the embedding first,
	// then those written after the layers); nil is globalNames.
	Globals func(s *arch.Spec) []TensorName
	// OwnKeys are <arch>.* key suffixes (attention.key_length, ...) that
	// the architecture reads in Config and writes in Convert itself, for
	// per-layer values the common reading would refuse; OwnRopeFreqs: it
	// reads rope_freqs.weight itself (Config) and writes it (Tensors).
	OwnKeys      []string
	OwnRopeFreqs bool
	// Tensors returns tensors the converter writes beside the Hugging
	// Face ones (gemma4's rope_freqs.weight).
	Tensors func(s *arch.Spec) ([]WriteTensor, error)
	// Parts, when set, lists the Hugging Face tensors of s that no single
	// GGUF tensor holds: each is split into the parts named (the table's
	// entries, TensorName.Fused) with their shapes (gpt-oss's fused
	// experts). The reader checks and reads the parts; the converter
	// writes them.
	Parts func(s *arch.Spec) map[string][]arch.TensorShape
	// FusedGateUp: a layer's experts may store gate and up fused as
	// blk.N.ffn_gate_up_exps.weight instead of ffn_gate_exps and
	// ffn_up_exps (TensorName.GateUp); the reader accepts either.
	FusedGateUp bool
	// F32Only, when set, says why the converter writes only F32 files of
	// this architecture (qppl does not reproduce llama.cpp's type mix for
	// it).
	F32Only string
}

// owns reports whether the architecture reads and writes <arch>.suffix
// itself.
func (a Arch) owns(suffix string) bool { return slices.Contains(a.OwnKeys, suffix) }

// TensorName maps one Hugging Face tensor onto its GGUF tensor.
type TensorName struct {
	HF   string // Hugging Face tensor name (model.layers.0.self_attn.q_proj.weight)
	GGUF string // GGUF tensor name (blk.0.attn_q.weight)
	// Expert ≥ 0: the Hugging Face tensor is expert Expert's 2-D weight
	// [out, in], stored as slice Expert of the 3-D GGUF tensor (ggml ne
	// [in, out, experts]: llama.cpp's stacked ffn_{gate,up,down}_exps);
	// -1 otherwise.
	Expert int
	// FromGGUF, when set, turns the decoded GGUF values into the Hugging
	// Face ones (in place) and ToGGUF does the reverse for the converter;
	// both or neither are set, and only on vectors (norms), which the
	// backends read through Model.Float64.
	FromGGUF, ToGGUF func(v []float64)
	// StoredForm, with FromGGUF: the value llama.cpp stores is the one the
	// model reads, as it is (qwen35's gains and decay rates, see
	// arch_qwen35.go), so the converter writes no residual for the tensor
	// (ResidualPrefix) and the reader refuses one; without it the rounding
	// of ToGGUF is recorded as a residual (gemma's gains).
	StoredForm bool
	// Rows, Cols (nil: as stored) are where the converter moved the
	// Hugging Face rows (first dimension) and, for a 2-D weight, columns:
	// row i is stored row Rows[i], column j stored column Cols[j]
	// (qwen35's tiled value heads). The reader moves them back (Float64,
	// Linear.Dequantize; Linear.RowOrder and ColOrder for the backends),
	// before FromGGUF; the converter moves them after ToGGUF.
	Rows, Cols []int
	// Shape, when set, is the Hugging Face shape of a tensor the converter
	// writes without its size-1 dimensions (qwen35's conv1d [C, 1, K] as
	// ne [K, C]; the shared expert gate [1, H] as ne [H], as ggml writes
	// it); the reader accepts ne with or without them and presents Shape.
	Shape []int
	// Fused and Part: the entry is a part of the Hugging Face tensor Fused
	// (Arch.Parts), and Part takes it out of Fused's values of shape
	// shape (the converter; the reader reassembles the parts itself).
	Fused string
	Part  func(fused []float64, shape []int) ([]float64, []int)
	// GateUp: 1 or 2 for an expert's gate or up weight read from the
	// fused blk.N.ffn_gate_up_exps.weight (ggml ne [in, 2·out, experts]):
	// expert e's slice holds its gate rows, then its up rows (llama.cpp
	// llama-graph.cpp build_moe_ffn: gate is the view at offset 0 of the
	// gate_up product, up the view at n_ff). Set by Model.fuseGateUp when
	// the file holds the fused tensor (Arch.FusedGateUp).
	GateUp int
	// Decay: the tensor is A_log, stored as −exp(A_log) (qwen35's ssm_a);
	// Model.DecayRate gives exp(A_log) exactly as stored.
	Decay bool
}

// archs lists every GGUF architecture package gguf reads and writes.
func archs() []Arch {
	return []Arch{llamaArch(), qwen2Arch(), qwen3Arch(), qwen3MoEArch(), phi3Arch(), qwen35Arch(), qwen35moeArch(), gemma2Arch(), gemma3Arch(), gemma4Arch(), gptOssArch()}
}

// archNames returns the general.architecture values of archs.
func archNames() []string {
	var out []string
	for _, a := range archs() {
		out = append(out, a.Name)
	}
	return out
}

// Architectures describes the GGUF architectures Convert writes, for
// help texts: "llama (llama, mistral, mixtral), qwen2 (qwen2), ...".
func Architectures() string {
	var parts []string
	for _, a := range archs() {
		parts = append(parts, a.Name+" ("+strings.Join(a.ModelTypes, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

// lookupArch finds a declaration by general.architecture.
func lookupArch(name string) (Arch, bool) {
	as := archs()
	i := slices.IndexFunc(as, func(a Arch) bool { return a.Name == name })
	if i < 0 {
		return Arch{}, false
	}
	return as[i], true
}

// archForModelType finds the declaration that writes a model_type.
func archForModelType(modelType string) (Arch, bool) {
	for _, a := range archs() {
		if slices.Contains(a.ModelTypes, modelType) {
			return a, true
		}
	}
	return Arch{}, false
}

// layer returns layer i's table (a.Layer or StandardLayer).
func (a Arch) layer(s *arch.Spec, i int) []TensorName {
	if a.Layer != nil {
		return a.Layer(s, i)
	}
	return StandardLayer(s, i)
}

// globalNames are the layer-independent tensors of every architecture
// (gguf-py constants.py MODEL_TENSOR.TOKEN_EMBD, OUTPUT_NORM, OUTPUT).
func globalNames(s *arch.Spec) []TensorName {
	out := []TensorName{
		{HF: s.EmbedTensor(), GGUF: "token_embd.weight", Expert: -1},
		{HF: s.FinalNormTensor(), GGUF: "output_norm.weight", Expert: -1},
	}
	if !s.TiedHead {
		out = append(out, TensorName{HF: arch.LMHeadName, GGUF: "output.weight", Expert: -1})
	}
	return out
}

// projGGUF are the GGUF names (after "blk.N.", before ".weight") of the
// standard linear modules, gguf-py constants.py TENSOR_NAMES: ATTN_Q
// attn_q, ATTN_K, ATTN_V, ATTN_OUT attn_output, ATTN_QKV attn_qkv,
// FFN_GATE, FFN_UP (also phi3's fused gate‖up), FFN_DOWN, FFN_GATE_INP
// (the router), FFN_{GATE,UP,DOWN}_SHEXP, FFN_GATE_INP_SHEXP.
var projGGUF = map[arch.Proj]string{
	arch.ProjQ: "attn_q", arch.ProjK: "attn_k", arch.ProjV: "attn_v", arch.ProjO: "attn_output",
	arch.ProjQKV: "attn_qkv", arch.ProjGate: "ffn_gate", arch.ProjUp: "ffn_up", arch.ProjDown: "ffn_down",
	arch.ProjGateUp: "ffn_up", arch.ProjRouter: "ffn_gate_inp",
	arch.ProjSharedGate: "ffn_gate_shexp", arch.ProjSharedUp: "ffn_up_shexp", arch.ProjSharedDown: "ffn_down_shexp",
	arch.ProjSharedExpertGate: "ffn_gate_inp_shexp",
}

// expertGGUF are the stacked expert tensors (constants.py FFN_GATE_EXP
// ffn_gate_exps, FFN_UP_EXP ffn_up_exps, FFN_DOWN_EXP ffn_down_exps).
var expertGGUF = map[arch.Proj]string{arch.ProjGate: "ffn_gate_exps", arch.ProjUp: "ffn_up_exps", arch.ProjDown: "ffn_down_exps"}

// StandardLayer is the tensor table of decoder layer i shared by the
// llama-like architectures (gguf-py constants.py): attn_norm, the
// attention biases, attn_q_norm/attn_k_norm, ffn_norm (the vectors first,
// in this order), then every linear of s.LayerLinears(i) by projGGUF, a
// mixture of experts' weights as slices of the stacked *_exps tensors. A
// module without a standard name (Gated DeltaNet, gemma's extra norms)
// maps to "", which OpenModel and Convert refuse naming it: such an
// architecture declares its own Layer.
func StandardLayer(s *arch.Spec, i int) []TensorName {
	l := s.Layer(i)
	blk := fmt.Sprintf("blk.%d.", i)
	var out []TensorName
	vec := func(hf, g string) {
		if hf != "" {
			out = append(out, TensorName{HF: hf, GGUF: blk + g, Expert: -1})
		}
	}
	vec(l.AttnNorm, "attn_norm.weight")
	vec(l.QBias, "attn_q.bias")
	vec(l.KBias, "attn_k.bias")
	vec(l.VBias, "attn_v.bias")
	vec(l.OBias, "attn_output.bias")
	vec(l.QNorm, "attn_q_norm.weight")
	vec(l.KNorm, "attn_k_norm.weight")
	vec(l.MLPNorm, "ffn_norm.weight")
	for _, lin := range s.LayerLinears(i) {
		g := projGGUF[lin.Proj]
		if lin.Expert >= 0 {
			g = expertGGUF[lin.Proj]
		}
		tn := TensorName{HF: lin.Module + ".weight", Expert: lin.Expert}
		if g != "" {
			tn.GGUF = blk + g + ".weight"
		}
		out = append(out, tn)
	}
	return out
}

// tensorTable maps every Hugging Face tensor of s onto its GGUF tensor,
// with the GGUF tensors in the converter's order.
type tensorTable struct {
	byHF  map[string]TensorName
	order []TensorName // globals' embedding, the layers, final norm, head
}

// newTensorTable builds a's table for s; a tensor of s.DenseWeights
// without a GGUF name is an error naming it.
func newTensorTable(a Arch, s *arch.Spec) (*tensorTable, error) {
	t := &tensorTable{byHF: map[string]TensorName{}}
	g := globalNames(s)
	if a.Globals != nil {
		g = a.Globals(s)
	}
	add := func(tn TensorName) error {
		if tn.GGUF == "" {
			return fmt.Errorf("%w: GGUF architecture %q has no tensor name for %s", ErrUnsupported, a.Name, tn.HF)
		}
		if (tn.FromGGUF == nil) != (tn.ToGGUF == nil) {
			return fmt.Errorf("gguf: architecture %q: tensor %s: FromGGUF and ToGGUF must be set together", a.Name, tn.HF)
		}
		if _, dup := t.byHF[tn.HF]; dup {
			return fmt.Errorf("gguf: architecture %q: tensor %s mapped twice", a.Name, tn.HF)
		}
		t.byHF[tn.HF] = tn
		t.order = append(t.order, tn)
		return nil
	}
	if err := add(g[0]); err != nil {
		return nil, err
	}
	for i := 0; i < s.Layers; i++ {
		for _, tn := range a.layer(s, i) {
			if err := add(tn); err != nil {
				return nil, err
			}
		}
	}
	for _, tn := range g[1:] {
		if err := add(tn); err != nil {
			return nil, err
		}
	}
	var missing []string
	for _, ts := range denseWeights(a, s) {
		if _, ok := t.byHF[ts.Name]; !ok {
			missing = append(missing, ts.Name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: GGUF architecture %q maps no tensor for %s", ErrUnsupported, a.Name, strings.Join(missing, ", "))
	}
	return t, nil
}

// denseWeights is s.DenseWeights with the tensors of a.Parts replaced by
// their parts.
func denseWeights(a Arch, s *arch.Spec) []arch.TensorShape {
	all := s.DenseWeights()
	if a.Parts == nil {
		return all
	}
	parts := a.Parts(s)
	var out []arch.TensorShape
	for _, ts := range all {
		if p, ok := parts[ts.Name]; ok {
			out = append(out, p...)
			continue
		}
		out = append(out, ts)
	}
	return out
}

// slidingWindowRefusal refuses a model with a sliding attention window
// shorter than its context: llama.cpp's graph of architecture a attends to
// every earlier position, so the file would compute another model.
func slidingWindowRefusal(s *arch.Spec, a string) error {
	for i := 0; i < s.Layers; i++ {
		if w := s.Window(i); w > 0 && w < s.Config.MaxPositionEmbeddings {
			return fmt.Errorf("%w: convert: layer %d has a sliding attention window of %d tokens (config.json sliding_window), which llama.cpp's %s graph does not apply", ErrUnsupported, i, w, a)
		}
	}
	return nil
}
