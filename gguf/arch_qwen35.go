package gguf

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// qwen35Arch declares general.architecture "qwen35": Hugging Face qwen3_5
// (Qwen3_5ForConditionalGeneration's text decoder) and qwen3_5_text.
// qwen35moeArch is the same with every MLP a mixture of experts.
//
// Read from llama.cpp conversion/qwen.py (Qwen3NextModel.set_gguf_parameters
// and modify_tensors, _LinearAttentionVReorderBase, _Qwen35MRopeMixin,
// _Qwen35MtpMixin, Qwen3_5TextModel, Qwen3_5MoeTextModel; Qwen2MoeModel
// for the experts), gguf-py/gguf/constants.py (Keys.SSM, MODEL_TENSOR
// names) and src/models/qwen35.cpp, qwen35moe.cpp (load_arch_hparams,
// load_arch_tensors, build_layer_attn, build_layer_attn_linear):
//
//   - metadata: ssm.conv_kernel = linear_conv_kernel_dim, ssm.state_size =
//     linear_key_head_dim, ssm.group_count = linear_num_key_heads,
//     ssm.time_step_rank = linear_num_value_heads, ssm.inner_size =
//     linear_value_head_dim · linear_num_value_heads, full_attention_interval
//     (layer i is linear attention unless (i+1) % interval == 0; default 4),
//     rope.dimension_count = int(head_dim · partial_rotary_factor),
//     rope.dimension_sections (MRoPE; text tokens have equal positions in
//     every section, so it does not change text); qwen35moe: expert_count,
//     expert_used_count, expert_feed_forward_length,
//     expert_shared_feed_forward_length, no feed_forward_length;
//   - tensors: blk.N.attn_norm, post_attention_norm; attention layers
//     attn_q (per head [query | gate], viewed with stride 2·head_dim),
//     attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm (no Q/K
//     permutation: NEOX rotation of the first dimension_count dims);
//     Gated DeltaNet layers attn_qkv (in_proj_qkv), attn_gate (in_proj_z),
//     ssm_beta (in_proj_b), ssm_alpha (in_proj_a), ssm_out (out_proj),
//     ssm_norm (linear_attn.norm), ssm_conv1d, ssm_a (A_log), ssm_dt.bias
//     (dt_bias); ffn_gate/up/down, or ffn_gate_inp, ffn_{gate,up,down}_exps
//     (stacked), ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp;
//   - transformed on conversion: every Qwen3_5RMSNorm weight
//     (input_layernorm, post_attention_layernorm, q_norm, k_norm,
//     model.norm; not linear_attn.norm) is stored as 1 + w, A_log as
//     −exp(A_log) (both float32: not exactly invertible, so the reader
//     uses the stored values: a gain s is read as s − 1, exact in float64
//     for |s| ≥ 2^-29, so 1 + (s − 1) = s; A as −s through
//     Model.DecayRate; A_log for other readers as log(−s)); conv1d
//     [C, 1, K] squeezed to ne [K, C]; with grouped value heads
//     (linear_num_value_heads = r · linear_num_key_heads, r > 1) the value
//     heads are reordered from grouped (head g·r + s reads key head g) to
//     tiled (stored at s·nk + g: ggml's broadcast then gives key head
//     j mod nk): the V rows of in_proj_qkv and V channels of conv1d, the
//     rows of in_proj_z, in_proj_a, in_proj_b, the entries of A_log and
//     dt_bias, and the columns of out_proj. The reader moves them back.
//   - the vision tower and MTP blocks are not part of the text model (not
//     written; a file declaring nextn_predict_layers is refused).
//
// qppl writes F32 only; the shared expert gate [1, H] is written as ne [H]
// (what ggml_n_dims makes of it; llama_model_quantize's files hold it so).
func qwen35Arch() Arch { return qwen35Decl("qwen35", false) }

// qwen35moeArch declares general.architecture "qwen35moe" (qwen3_5_moe,
// qwen3_5_moe_text): see qwen35Arch.
func qwen35moeArch() Arch { return qwen35Decl("qwen35moe", true) }

func qwen35Decl(name string, moe bool) Arch {
	types := []string{"qwen3_5", "qwen3_5_text"}
	if moe {
		types = []string{"qwen3_5_moe", "qwen3_5_moe_text"}
	}
	return Arch{
		Name: name, ModelTypes: types, KeyLengthRequired: true,
		MoEOnly: moe, PartialRotary: true,
		F32Only: name + " is written as F32 only (qppl does not write the converter's F16 rules — router and conv1d kept F32 — nor llama.cpp's type mix for it)",
		Config:  func(m *Model, cfg map[string]any) error { return qwen35Config(m, name, moe, cfg) },
		Layer:   qwen35Layer,
		Globals: func(s *arch.Spec) []TensorName {
			g := globalNames(s)
			for k := range g {
				if g[k].GGUF == "output_norm.weight" {
					g[k].FromGGUF, g[k].ToGGUF, g[k].StoredForm = gainFromGGUF, gainToGGUF, true
				}
			}
			return g
		},
		Convert: func(s *arch.Spec) ([]KV, error) { return qwen35Convert(s, name) },
	}
}

// gainFromGGUF reads a stored gain s = float32(1 + w) as w = s − 1.
func gainFromGGUF(v []float64) {
	for i := range v {
		v[i]--
	}
}

// gainToGGUF stores 1 + w as the float32 llama.cpp's converter writes.
func gainToGGUF(v []float64) {
	for i := range v {
		v[i] = float64(float32(1 + v[i]))
	}
}

// decayFromGGUF reads ssm_a = −exp(A_log) as A_log = log(−ssm_a) (the
// reference uses the stored value itself, Model.DecayRate).
func decayFromGGUF(v []float64) {
	for i := range v {
		v[i] = math.Log(-v[i])
	}
}

// decayToGGUF stores −exp(A_log) as float32 (formed in float64, rounded
// once; torch's float32 exp may differ in the last bit).
func decayToGGUF(v []float64) {
	for i := range v {
		v[i] = float64(float32(-math.Exp(v[i])))
	}
}

// vHeads returns where each element of nv value heads of d consecutive
// elements (Hugging Face head h = g·r + s, r = nv/nk) is stored after
// llama.cpp's grouped-to-tiled reorder: out[h·d + i] = base + (s·nk + g)·d + i;
// nil when nothing moves (nv = nk).
func vHeads(nk, nv, d, base int) []int {
	if nv == nk {
		return nil
	}
	r := nv / nk
	out := make([]int, nv*d)
	for g := 0; g < nk; g++ {
		for s := 0; s < r; s++ {
			for i := 0; i < d; i++ {
				out[(g*r+s)*d+i] = base + (s*nk+g)*d + i
			}
		}
	}
	return out
}

// qkvRows is the row order of in_proj_qkv and the channel order of conv1d:
// query and key channels in place, value heads tiled.
func qkvRows(la *checkpoint.LinearAttention) []int {
	v := vHeads(la.KeyHeads, la.ValueHeads, la.ValueDim, 2*la.KeyHeads*la.KeyDim)
	if v == nil {
		return nil
	}
	out := make([]int, 2*la.KeyHeads*la.KeyDim, len(v)+2*la.KeyHeads*la.KeyDim)
	for i := range out {
		out[i] = i
	}
	return append(out, v...)
}

// qwen35Layer is the tensor table of layer i (StandardLayer's names for
// attention, MLP and experts; qwen35's own for the rest, see qwen35Arch).
func qwen35Layer(s *arch.Spec, i int) []TensorName {
	l := s.Layer(i)
	blk := fmt.Sprintf("blk.%d.", i)
	out := StandardLayer(s, i)
	la := s.LinearAttn
	for k := range out {
		tn := &out[k]
		switch tn.HF {
		case l.AttnNorm, l.QNorm, l.KNorm:
			tn.FromGGUF, tn.ToGGUF, tn.StoredForm = gainFromGGUF, gainToGGUF, true
		case l.MLPNorm:
			tn.GGUF = blk + "post_attention_norm.weight"
			tn.FromGGUF, tn.ToGGUF, tn.StoredForm = gainFromGGUF, gainToGGUF, true
		case l.InQKV + ".weight":
			tn.GGUF, tn.Rows = blk+"attn_qkv.weight", qkvRows(la)
		case l.InZ + ".weight":
			tn.GGUF, tn.Rows = blk+"attn_gate.weight", vHeads(la.KeyHeads, la.ValueHeads, la.ValueDim, 0)
		case l.InB + ".weight":
			tn.GGUF, tn.Rows = blk+"ssm_beta.weight", vHeads(la.KeyHeads, la.ValueHeads, 1, 0)
		case l.InA + ".weight":
			tn.GGUF, tn.Rows = blk+"ssm_alpha.weight", vHeads(la.KeyHeads, la.ValueHeads, 1, 0)
		case l.Out + ".weight":
			tn.GGUF, tn.Cols = blk+"ssm_out.weight", vHeads(la.KeyHeads, la.ValueHeads, la.ValueDim, 0)
		case l.SharedExpertGate + ".weight":
			tn.Shape = []int{1, s.Hidden}
		}
	}
	if s.LinearLayer(i) {
		out = append(out,
			TensorName{HF: l.Conv, GGUF: blk + "ssm_conv1d.weight", Expert: -1, Rows: qkvRows(la), Shape: []int{s.ConvDim(), 1, la.ConvKernel}},
			TensorName{HF: l.ALog, GGUF: blk + "ssm_a", Expert: -1, Rows: vHeads(la.KeyHeads, la.ValueHeads, 1, 0),
				FromGGUF: decayFromGGUF, ToGGUF: decayToGGUF, StoredForm: true, Decay: true},
			TensorName{HF: l.DtBias, GGUF: blk + "ssm_dt.bias", Expert: -1, Rows: vHeads(la.KeyHeads, la.ValueHeads, 1, 0)},
			TensorName{HF: l.GatedNorm, GGUF: blk + "ssm_norm.weight", Expert: -1})
	}
	return out
}

// qwen35Config reads qwen35's own metadata into the text config
// (qwen3_5_text / qwen3_5_moe_text: the model. prefix).
func qwen35Config(m *Model, a string, moe bool, cfg map[string]any) error {
	path := m.Files[0].Path
	cfg["model_type"] = "qwen3_5_text"
	if moe {
		cfg["model_type"] = "qwen3_5_moe_text"
	}
	cfg["attention_bias"] = false
	if _, ok := m.tensors["blk.0.attn_q.bias"]; ok {
		return fmt.Errorf("%w: %s: tensor \"blk.0.attn_q.bias\": llama.cpp's %s graph has no attention biases", ErrUnsupported, path, a)
	}
	keys := []struct{ key, hf string }{
		{"ssm.conv_kernel", "linear_conv_kernel_dim"}, {"ssm.state_size", "linear_key_head_dim"},
		{"ssm.group_count", "linear_num_key_heads"}, {"ssm.time_step_rank", "linear_num_value_heads"},
		{"ssm.inner_size", ""},
	}
	if moe {
		keys = append(keys, struct{ key, hf string }{"expert_count", "num_experts"}, struct{ key, hf string }{"expert_used_count", "num_experts_per_tok"},
			struct{ key, hf string }{"expert_feed_forward_length", "moe_intermediate_size"},
			struct{ key, hf string }{"expert_shared_feed_forward_length", "shared_expert_intermediate_size"})
	}
	vals := map[string]int64{}
	for _, k := range keys {
		n, err := m.metaInt(a+"."+k.key, -1)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+"."+k.key)
		}
		if k.hf != "" {
			cfg[k.hf] = n
		}
		vals[k.key] = n
	}
	nv, inner := vals["ssm.time_step_rank"], vals["ssm.inner_size"]
	if inner%nv != 0 {
		return fmt.Errorf("%w: %s: metadata %q = %d is not a multiple of %q = %d", ErrFormat, path, a+".ssm.inner_size", inner, a+".ssm.time_step_rank", nv)
	}
	cfg["linear_value_head_dim"] = inner / nv
	interval, err := m.metaInt(a+".full_attention_interval", 4) // llama.cpp's default
	if err != nil {
		return err
	}
	if interval == 0 {
		return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+".full_attention_interval")
	}
	cfg["full_attention_interval"] = interval
	if n, err := m.metaInt(a+".nextn_predict_layers", 0); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%w: %s: metadata %q = %d: multi-token-prediction blocks are not part of the text model (convert without them)", ErrUnsupported, path, a+".nextn_predict_layers", n)
	}
	for _, k := range []string{".attention.recurrent_layers", ".rope.scaling.type", ".rope.scaling.factor", ".rope.scale_linear"} {
		if _, ok := m.meta(a + k); ok {
			return fmt.Errorf("%w: %s: metadata %q is not supported for %s", ErrUnsupported, path, a+k, a)
		}
	}
	if v, ok := m.meta(a + ".rope.dimension_sections"); ok {
		arr, ok := v.Array()
		if !ok || arr.Len > 4 || arr.Elem == TypeArray || arr.Elem == TypeString {
			return m.metaErr(a+".rope.dimension_sections", v, "want up to 4 integers")
		}
		for i := 0; i < arr.Len; i++ {
			if n, ok := arr.At(i).Int(); !ok || n < 0 {
				return m.metaErr(a+".rope.dimension_sections", v, "want up to 4 non-negative integers")
			}
		}
	}
	return nil
}

// qwen35Convert refuses what llama.cpp's qwen35 graph computes
// differently and returns the architecture's metadata.
func qwen35Convert(s *arch.Spec, a string) ([]KV, error) {
	la := s.LinearAttn
	if la.KeyDim != la.ValueDim {
		return nil, fmt.Errorf("%w: convert: linear_key_head_dim %d ≠ linear_value_head_dim %d: llama.cpp's %s graph sizes value heads by ssm.state_size", ErrUnsupported, la.KeyDim, la.ValueDim, a)
	}
	if s.QKVBias || s.OBias {
		return nil, fmt.Errorf("%w: convert: attention_bias: llama.cpp's %s graph has no attention biases", ErrUnsupported, a)
	}
	interval := 0
	for k := 1; k <= s.Layers+1 && interval == 0; k++ {
		ok := true
		for i := 0; i < s.Layers && ok; i++ {
			ok = s.LinearLayer(i) == ((i+1)%k != 0)
		}
		if ok {
			interval = k
		}
	}
	if interval == 0 {
		return nil, fmt.Errorf("%w: convert: layer_types is not \"every full_attention_interval-th layer is full attention\", all llama.cpp's %s metadata can say", ErrUnsupported, a)
	}
	if err := slidingWindowRefusal(s, a); err != nil {
		return nil, err
	}
	sections, err := mropeSections(s.Config)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	u32 := func(k string, v int) KV { return KV{a + "." + k, Uint32Value(uint32(v))} }
	kvs := []KV{
		{a + ".rope.dimension_sections", Int32Array(sections)},
		u32("ssm.conv_kernel", la.ConvKernel),
		u32("ssm.state_size", la.KeyDim),
		u32("ssm.group_count", la.KeyHeads),
		u32("ssm.time_step_rank", la.ValueHeads),
		u32("ssm.inner_size", la.ValueHeads*la.ValueDim),
		u32("full_attention_interval", interval),
	}
	if m := s.MoE; m != nil {
		kvs = append(kvs, u32("expert_count", m.Experts), u32("expert_used_count", m.TopK),
			u32("expert_feed_forward_length", m.Intermediate), u32("expert_shared_feed_forward_length", m.SharedIntermediate))
	}
	return kvs, nil
}

// mropeSections returns rope.dimension_sections: the config's
// mrope_section (rope_parameters or rope_scaling, at the top or in
// text_config) padded to 4, else llama.cpp's default [11, 11, 10, 0]
// (_Qwen35MRopeMixin).
func mropeSections(cfg *checkpoint.Config) ([]int32, error) {
	find := func(raw map[string]json.RawMessage) []int32 {
		for _, k := range []string{"rope_parameters", "rope_scaling"} {
			var rp struct {
				Sections []int32 `json:"mrope_section"`
			}
			if b, ok := raw[k]; ok && json.Unmarshal(b, &rp) == nil && rp.Sections != nil {
				return rp.Sections
			}
		}
		return nil
	}
	sec := find(cfg.Raw)
	if b, ok := cfg.Raw["text_config"]; ok && sec == nil {
		var tc map[string]json.RawMessage
		if json.Unmarshal(b, &tc) == nil {
			sec = find(tc)
		}
	}
	if sec == nil {
		return []int32{11, 11, 10, 0}, nil
	}
	if len(sec) > 4 {
		return nil, fmt.Errorf("%w: mrope_section %v has more than 4 sections", ErrUnsupported, sec)
	}
	return append(sec, make([]int32, 4-len(sec))...), nil
}

// Qwen35Name returns the GGUF name of a Hugging Face tensor of a qwen35 or
// qwen35moe model spec (its text decoder), with expert ≥ 0 naming an
// expert's slice of a stacked tensor; ok is false for names without one.
func Qwen35Name(s *arch.Spec, hf string) (g string, expert int, ok bool) {
	a := qwen35Arch()
	if s.MoE != nil {
		a = qwen35moeArch()
	}
	t, err := newTensorTable(a, s)
	if err != nil {
		return "", -1, false
	}
	tn, ok := t.byHF[hf]
	if !ok || strings.TrimSpace(tn.GGUF) == "" {
		return "", -1, false
	}
	return tn.GGUF, tn.Expert, true
}
