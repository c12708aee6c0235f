package gguf

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/qppl/qppl/arch"
)

// Qwen3.5 (general.architecture qwen35) and Qwen3.5-MoE (qwen35moe) as
// llama.cpp's converter writes them. Read from llama.cpp
// conversion/qwen.py (Qwen3NextModel.modify_tensors,
// _LinearAttentionVReorderBase, _Qwen35MRopeMixin, Qwen3_5TextModel,
// Qwen3_5MoeTextModel; Qwen2MoeModel for the experts),
// gguf-py/gguf/constants.py (MODEL_TENSOR names, Keys.SSM) and
// src/models/qwen35.cpp, qwen35moe.cpp (load_arch_hparams,
// load_arch_tensors, build_layer_attn_linear):
//
//   - metadata: qwen35.ssm.conv_kernel = linear_conv_kernel_dim,
//     ssm.state_size = linear_key_head_dim, ssm.group_count =
//     linear_num_key_heads, ssm.time_step_rank = linear_num_value_heads,
//     ssm.inner_size = linear_value_head_dim · linear_num_value_heads,
//     full_attention_interval (layer i is linear attention unless
//     (i+1) % interval == 0), rope.dimension_count = int(head_dim ·
//     partial_rotary_factor), rope.dimension_sections (the MRoPE sections,
//     equal positions for text); qwen35moe: expert_count,
//     expert_used_count, expert_feed_forward_length,
//     expert_shared_feed_forward_length;
//   - tensors transformed on conversion: every Qwen3_5RMSNorm weight
//     (input_layernorm, post_attention_layernorm, q_norm, k_norm,
//     model.norm; not linear_attn.norm) is stored as 1 + w (float32);
//     A_log as −exp(A_log) (blk.N.ssm_a, float32); conv1d.weight
//     [C, 1, K] squeezed to [C, K]; dt_bias renamed blk.N.ssm_dt.bias;
//     with grouped value heads (linear_num_value_heads >
//     linear_num_key_heads) the value heads are reordered from grouped
//     (head g·r + s reads key head g, r = nv/nk) to tiled (stored at
//     s·nk + g, so ggml's broadcast gives key head j % nk): the V rows of
//     in_proj_qkv and the V channels of conv1d, the rows of in_proj_z,
//     in_proj_a, in_proj_b, the entries of A_log and dt_bias, and the
//     columns of out_proj;
//   - in_proj_qkv (attn_qkv) and in_proj_z (attn_gate) are separate
//     tensors; q_proj keeps its per-head [query | gate] rows (attn_q,
//     viewed with stride 2·head_dim by build_layer_attn); no Q/K
//     permutation (NEOX-style rotation of the first rope.dimension_count
//     dimensions);
//   - experts stacked per layer into 3-D tensors ffn_{gate,up,down}_exps
//     (ne [in, out, experts]), the router ffn_gate_inp, the shared expert
//     ffn_{gate,up,down}_shexp and its gate ffn_gate_inp_shexp (ne
//     [hidden, 1]).
//
// The reader undoes the reorders exactly (moving values) and presents the
// Hugging Face tensors; the two float32 transforms cannot be undone
// exactly, so the file's values are used as stored: a norm's gain 1 + w
// is the stored float32 s (Float64 gives s − 1, exact in float64 for
// |s| ≥ 2^-29, so 1 + (s − 1) = s), and A = exp(A_log) is −s
// (DecayRate); Float64 gives A_log as log(−s) for consumers without
// DecayRate.

// q35Layout is what a qwen35 file's reader needs beyond the Spec.
type q35Layout struct {
	spec           *arch.Spec
	nk, nv, dk, dv int
}

// q35Offset lists the Qwen3_5RMSNorm weights (stored as 1 + w).
var q35Offset = []string{"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight"}

// q35Names maps the Hugging Face names inside a decoder layer onto llama.cpp's.
var q35Names = [...]struct{ hf, g string }{
	{"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "post_attention_norm.weight"},
	{"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
	{"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
	{"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
	{"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"}, {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
	{"linear_attn.in_proj_b.weight", "ssm_beta.weight"}, {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
	{"linear_attn.out_proj.weight", "ssm_out.weight"}, {"linear_attn.norm.weight", "ssm_norm.weight"},
	{"linear_attn.conv1d.weight", "ssm_conv1d.weight"}, {"linear_attn.A_log", "ssm_a"},
	{"linear_attn.dt_bias", "ssm_dt.bias"},
	{"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.down_proj.weight", "ffn_down.weight"},
	{"mlp.gate.weight", "ffn_gate_inp.weight"},
	{"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"}, {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
	{"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"}, {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
}

// q35Name maps a Hugging Face tensor name under prefix ("model." or
// "model.language_model.") onto its qwen35 GGUF name; expert ≥ 0 names
// the expert's slice of a stacked 3-D tensor. ok is false for names
// without one.
func q35Name(hf, prefix string) (g string, expert int, ok bool) {
	switch hf {
	case prefix + "embed_tokens.weight":
		return "token_embd.weight", -1, true
	case prefix + "norm.weight":
		return "output_norm.weight", -1, true
	case arch.LMHeadName:
		return "output.weight", -1, true
	}
	rest, ok := strings.CutPrefix(hf, prefix+"layers.")
	if !ok {
		return "", -1, false
	}
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return "", -1, false
	}
	layer, rest := rest[:i], rest[i+1:]
	if _, err := strconv.Atoi(layer); err != nil {
		return "", -1, false
	}
	if e, ok := strings.CutPrefix(rest, "mlp.experts."); ok {
		j := strings.IndexByte(e, '.')
		n, err := strconv.Atoi(e[:max(j, 0)])
		if j <= 0 || err != nil || n < 0 {
			return "", -1, false
		}
		switch e[j+1:] {
		case "gate_proj.weight":
			return "blk." + layer + ".ffn_gate_exps.weight", n, true
		case "up_proj.weight":
			return "blk." + layer + ".ffn_up_exps.weight", n, true
		case "down_proj.weight":
			return "blk." + layer + ".ffn_down_exps.weight", n, true
		}
		return "", -1, false
	}
	for _, p := range q35Names {
		if rest == p.hf {
			return "blk." + layer + "." + p.g, -1, true
		}
	}
	return "", -1, false
}

// q35Peek is peekHF for qwen35 files: an expert's weight is its slice of
// the stacked tensor (same name, for Usage).
func (m *Model) q35Peek(hf string) (TensorInfo, *File, error) {
	g, e, ok := q35Name(hf, "model.")
	ti, found := m.tensors[g]
	if !ok || !found {
		return TensorInfo{}, nil, fmt.Errorf("%s: no tensor for %q in the GGUF file", m.Path, hf)
	}
	if e < 0 {
		if len(ti.Dims) == 1 && strings.HasSuffix(g, ".ffn_gate_inp_shexp.weight") {
			// ggml writes [hidden, 1] as ne [hidden] (ggml_n_dims):
			// llama_model_quantize's files hold it so.
			ti.Dims = []int64{ti.Dims[0], 1}
		}
		return ti, m.owner[g], nil
	}
	if len(ti.Dims) != 3 || int64(e) >= ti.Dims[2] {
		return TensorInfo{}, nil, fmt.Errorf("%w: %s: tensor %q has ne %v, no expert %d", ErrFormat, ti.File, g, ti.Dims, e)
	}
	size, err := rowBytes(ti.Type, ti.Dims[0]*ti.Dims[1])
	if err != nil {
		return TensorInfo{}, nil, fmt.Errorf("%w: %s: tensor %q: %w", ErrFormat, ti.File, g, err)
	}
	sub := ti
	sub.Dims = []int64{ti.Dims[0], ti.Dims[1]}
	sub.Offset += int64(e) * size
	sub.Size = size
	return sub, m.owner[g], nil
}

// vHeads returns where each element of n = nv·d consecutive Hugging Face
// values (value head h = g·r + s, d elements each) is stored after
// llama.cpp's grouped-to-tiled reorder: out[h·d + i] = base + (s·nk + g)·d + i.
func vHeads(nk, nv, d, base int) []int {
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

// identity returns 0 … n-1.
func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// order returns a Linear's row and column orders (nil: as stored).
func (q *q35Layout) order(module string) (rows, cols []int) {
	if q.nv == q.nk || !strings.Contains(module, ".linear_attn.") {
		return nil, nil
	}
	switch {
	case strings.HasSuffix(module, ".in_proj_qkv"):
		return append(identity(2*q.nk*q.dk), vHeads(q.nk, q.nv, q.dv, 2*q.nk*q.dk)...), nil
	case strings.HasSuffix(module, ".in_proj_z"):
		return vHeads(q.nk, q.nv, q.dv, 0), nil
	case strings.HasSuffix(module, ".in_proj_a"), strings.HasSuffix(module, ".in_proj_b"):
		return vHeads(q.nk, q.nv, 1, 0), nil
	case strings.HasSuffix(module, ".out_proj"):
		return nil, vHeads(q.nk, q.nv, q.dv, 0)
	}
	return nil, nil
}

// fix turns a decoded qwen35 tensor into the Hugging Face one: value
// heads back in grouped order, conv1d as [C, 1, K], an offset norm as
// s − 1, A_log as log(−s) (see DecayRate for the exact form).
func (q *q35Layout) fix(ti TensorInfo, hf string, v []float64, shape []int) ([]float64, []int, error) {
	switch {
	case strings.HasSuffix(hf, ".linear_attn.conv1d.weight"):
		c, k := shape[0], shape[1]
		if q.nv != q.nk {
			reorder(v, c, k, append(identity(2*q.nk*q.dk), vHeads(q.nk, q.nv, q.dv, 2*q.nk*q.dk)...), nil)
		}
		return v, []int{c, 1, k}, nil
	case strings.HasSuffix(hf, ".linear_attn.dt_bias"):
		return q.vec(v), shape, nil
	case strings.HasSuffix(hf, ".linear_attn.A_log"):
		for i, s := range v {
			if !(s < 0) || math.IsInf(s, 0) {
				return nil, nil, fmt.Errorf("%w: %s: tensor %q element %d = %v: llama.cpp stores −exp(A_log), which is negative and finite", ErrFormat, ti.File, ti.Name, i, s)
			}
			v[i] = math.Log(-s)
		}
		return q.vec(v), shape, nil
	case hf == q.spec.FinalNormTensor() || hasAnySuffix(hf, q35Offset):
		for i, s := range v {
			v[i] = s - 1
		}
	}
	return v, shape, nil
}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, "."+x) {
			return true
		}
	}
	return false
}

// vec puts a per-value-head vector back in grouped order.
func (q *q35Layout) vec(v []float64) []float64 {
	if q.nv == q.nk {
		return v
	}
	out := make([]float64, len(v))
	for i, s := range vHeads(q.nk, q.nv, 1, 0) {
		out[i] = v[s]
	}
	return out
}

// DecayRate returns A = exp(A_log) of a Gated DeltaNet layer exactly as a
// qwen35 file stores it (−ssm_a, float32 → float64, value heads in
// Hugging Face order), with ok true; ok is false for other files, whose
// A_log Float64 returns as stored. hf is the A_log tensor's name.
func (m *Model) DecayRate(hf string) ([]float64, bool, error) {
	if m.q35 == nil || !strings.HasSuffix(hf, ".linear_attn.A_log") {
		return nil, false, nil
	}
	ti, f, err := m.lookupHF(hf)
	if err != nil {
		return nil, false, err
	}
	v := make([]float64, ti.Numel())
	if err := m.decodeRange(ti, f, 0, ti.Numel(), v); err != nil {
		return nil, false, err
	}
	for i, s := range v {
		if !(s < 0) || math.IsInf(s, 0) {
			return nil, false, fmt.Errorf("%w: %s: tensor %q element %d = %v: llama.cpp stores −exp(A_log), which is negative and finite", ErrFormat, ti.File, ti.Name, i, s)
		}
		v[i] = -s
	}
	return m.q35.vec(v), true, nil
}

// Shape returns a tensor's Hugging Face shape by its Hugging Face name
// (the reverse of ggml's ne; qwen35's conv1d as [C, 1, K]), without
// marking it read.
func (m *Model) Shape(hf string) ([]int, bool) {
	ti, _, err := m.peekHF(hf)
	if err != nil {
		return nil, false
	}
	shape := make([]int, len(ti.Dims))
	for i, d := range ti.Dims {
		shape[len(shape)-1-i] = int(d)
	}
	if m.q35 != nil && strings.HasSuffix(hf, ".linear_attn.conv1d.weight") && len(shape) == 2 {
		shape = []int{shape[0], 1, shape[1]}
	}
	return shape, true
}

// resolveQwen35 builds Config and Spec of a qwen35/qwen35moe file from its
// metadata and checks its tensors.
func (m *Model) resolveQwen35(a string) error {
	path := m.Files[0].Path
	moe := a == "qwen35moe"
	typ := "qwen3_5_text"
	if moe {
		typ = "qwen3_5_moe_text"
	}
	cfg := map[string]any{"model_type": typ, "hidden_act": "silu", "torch_dtype": "float32", "attention_bias": false}
	req := func(key, hf string) (int64, error) {
		n, err := m.metaInt(a+"."+key, -1)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+"."+key)
		}
		if err == nil && hf != "" {
			cfg[hf] = n
		}
		return n, err
	}
	ints := []struct{ key, hf string }{
		{"embedding_length", "hidden_size"}, {"block_count", "num_hidden_layers"},
		{"attention.head_count", "num_attention_heads"}, {"attention.key_length", "head_dim"},
		{"ssm.conv_kernel", "linear_conv_kernel_dim"}, {"ssm.state_size", "linear_key_head_dim"},
		{"ssm.group_count", "linear_num_key_heads"}, {"ssm.time_step_rank", "linear_num_value_heads"},
		{"ssm.inner_size", ""},
	}
	if moe {
		ints = append(ints, struct{ key, hf string }{"expert_count", "num_experts"}, struct{ key, hf string }{"expert_used_count", "num_experts_per_tok"},
			struct{ key, hf string }{"expert_feed_forward_length", "moe_intermediate_size"}, struct{ key, hf string }{"expert_shared_feed_forward_length", "shared_expert_intermediate_size"})
	} else {
		ints = append(ints, struct{ key, hf string }{"feed_forward_length", "intermediate_size"})
	}
	vals := map[string]int64{}
	for _, k := range ints {
		n, err := req(k.key, k.hf)
		if err != nil {
			return err
		}
		vals[k.key] = n
	}
	heads := vals["attention.head_count"]
	kv, err := m.metaInt(a+".attention.head_count_kv", heads)
	if err != nil {
		return err
	}
	cfg["num_key_value_heads"] = kv
	hd := vals["attention.key_length"]
	if vl, err := m.metaInt(a+".attention.value_length", hd); err != nil {
		return err
	} else if vl != hd {
		return fmt.Errorf("%w: %s: metadata %q = %d differs from key_length %d", ErrUnsupported, path, a+".attention.value_length", vl, hd)
	}
	nv, inner := vals["ssm.time_step_rank"], vals["ssm.inner_size"]
	if inner%nv != 0 {
		return fmt.Errorf("%w: %s: metadata %q = %d is not a multiple of %q = %d", ErrFormat, path, a+".ssm.inner_size", inner, a+".ssm.time_step_rank", nv)
	}
	cfg["linear_value_head_dim"] = inner / nv
	if n, err := m.metaInt(a+".context_length", 0); err != nil {
		return err
	} else if n > 0 {
		cfg["max_position_embeddings"] = n
	}
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
	rd, err := m.metaInt(a+".rope.dimension_count", hd)
	if err != nil {
		return err
	}
	if rd == 0 || rd > hd || rd%2 != 0 {
		return fmt.Errorf("%w: %s: metadata %q = %d: want an even rotary width in (0, %d]", ErrFormat, path, a+".rope.dimension_count", rd, hd)
	}
	// partial_rotary_factor: Spec.RotaryDim = int(head_dim · factor) must
	// give rd back (checked below).
	cfg["partial_rotary_factor"] = float64(rd) / float64(hd)
	if v, ok := m.meta(a + ".rope.dimension_sections"); ok {
		// MRoPE sections: text tokens have equal positions on every
		// section, so they do not change text RoPE; only checked.
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
	eps, err := m.metaFloat(a+".attention.layer_norm_rms_epsilon", math.NaN())
	if err != nil {
		return err
	}
	cfg["rms_norm_eps"] = eps
	theta, err := m.metaFloat(a+".rope.freq_base", 10000)
	if err != nil {
		return err
	}
	cfg["rope_theta"] = theta
	for _, k := range []struct{ key, hf string }{{"tokenizer.ggml.bos_token_id", "bos_token_id"}, {"tokenizer.ggml.eos_token_id", "eos_token_id"}} {
		if v, ok := m.meta(k.key); ok {
			if n, ok := v.Int(); ok {
				cfg[k.hf] = n
			}
		}
	}
	hidden := vals["embedding_length"]
	emb, ok := m.tensors["token_embd.weight"]
	if !ok {
		return fmt.Errorf("%w: %s: tensor \"token_embd.weight\" is missing", ErrFormat, path)
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != hidden {
		return fmt.Errorf("%w: %s: tensor \"token_embd.weight\" has ne %v, want [%d, vocab]", ErrFormat, path, emb.Dims, hidden)
	}
	cfg["vocab_size"] = emb.Dims[1]
	if n, err := m.metaInt(a+".vocab_size", emb.Dims[1]); err != nil {
		return err
	} else if n != emb.Dims[1] {
		return fmt.Errorf("%w: %s: metadata %q = %d, but token_embd.weight has %d rows", ErrFormat, path, a+".vocab_size", n, emb.Dims[1])
	}
	_, hasOutput := m.tensors["output.weight"]
	cfg["tie_word_embeddings"] = !hasOutput
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if m.Config, err = arch.ParseConfig(data, path+" (GGUF metadata)"); err != nil {
		return err
	}
	if m.Spec, err = arch.For(m.Config); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if m.Spec.RotaryDim != int(rd) {
		return fmt.Errorf("%w: %s: metadata %q = %d is not int(head_dim · partial_rotary_factor) = %d", ErrUnsupported, path, a+".rope.dimension_count", rd, m.Spec.RotaryDim)
	}
	la := m.Spec.LinearAttn
	m.q35 = &q35Layout{spec: m.Spec, nk: la.KeyHeads, nv: la.ValueHeads, dk: la.KeyDim, dv: la.ValueDim}
	return m.q35CheckTensors()
}

// q35CheckTensors is checkTensors for qwen35 files: every tensor the
// architecture reads is present with its stored shape (conv1d [K, C],
// experts stacked [in, out, experts]), and no other tensor is in the file.
func (m *Model) q35CheckTensors() error {
	used := map[string]bool{}
	for _, ts := range m.Spec.DenseWeights() {
		g, e, ok := q35Name(ts.Name, "model.")
		ti, found := m.tensors[g]
		if !ok || !found {
			return fmt.Errorf("%w: %s: tensor %q (%s) is missing", ErrFormat, m.Files[0].Path, g, ts.Name)
		}
		want := reversed(ts.Shape)
		switch {
		case e >= 0:
			want = append(want, m.Spec.MoE.Experts)
		case strings.HasSuffix(ts.Name, ".linear_attn.conv1d.weight"):
			want = []int{ts.Shape[2], ts.Shape[0]}
		}
		if strings.HasSuffix(g, ".ffn_gate_inp_shexp.weight") && len(ti.Dims) == 1 {
			want = want[:1] // ne [hidden]: ggml_n_dims drops the trailing 1
		}
		if !sameDims(ti.Dims, want) {
			return fmt.Errorf("%w: %s: tensor %q has ne %v, want %v (for %s %v)", ErrFormat, ti.File, g, ti.Dims, want, ts.Name, ts.Shape)
		}
		if len(ts.Shape) == 1 && ti.Type != F32 && ti.Type != F16 && ti.Type != BF16 {
			return fmt.Errorf("%w: %s: tensor %q: vector of type %s (norms and biases are F32, F16 or BF16)", ErrUnsupported, ti.File, g, ti.Type)
		}
		used[g] = true
	}
	if !m.inspectOnly {
		if err := m.probeTypes(); err != nil {
			return err
		}
	}
	var unused []string
	for n := range m.tensors {
		if !used[n] {
			unused = append(unused, n)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return fmt.Errorf("%w: %s: %d tensors the %s architecture does not use (refusing to ignore them): %s", ErrUnsupported, m.Files[0].Path, len(unused), m.Arch, strings.Join(unused, ", "))
	}
	return nil
}

func sameDims(ne []int64, want []int) bool {
	if len(ne) != len(want) {
		return false
	}
	for i := range ne {
		if ne[i] != int64(want[i]) {
			return false
		}
	}
	return true
}

// nameOf is the GGUF name of a Hugging Face tensor of this model's
// architecture ("" when it has none).
func (m *Model) nameOf(hf string) string {
	if m.q35 != nil {
		g, _, _ := q35Name(hf, "model.")
		return g
	}
	return ggufName(hf)
}

// Qwen35Name returns the qwen35/qwen35moe GGUF name of a Hugging Face
// tensor name of the text model (under "model."; lm_head.weight), with
// expert ≥ 0 naming an expert's slice of a stacked 3-D tensor (ne [in,
// out, experts]); ok is false for names without one.
func Qwen35Name(hf string) (g string, expert int, ok bool) { return q35Name(hf, "model.") }
