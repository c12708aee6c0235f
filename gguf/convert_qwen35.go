package gguf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// isQwen35Family reports the Qwen3.5 families (qwen3_5, qwen3_5_moe and
// their text-only forms).
func isQwen35Family(name string) bool {
	switch name {
	case "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text":
		return true
	}
	return false
}

// convertQwen35 is Convert for Qwen3.5 and Qwen3.5-MoE: architecture
// qwen35 / qwen35moe as llama.cpp's conversion/qwen.py writes it (see
// qwen35.go): offset norms stored as float32(1 + w) and A_log as
// float32(−exp(A_log)) (both formed in float64 and rounded once; torch's
// float32 exp may differ from the correctly rounded value in the last
// bit), conv1d squeezed, value heads tiled, experts stacked. F32 only.
// The vision tower and multi-token-prediction tensors (the family's
// ignored prefixes) are not written, as llama.cpp's text conversion
// without MTP does.
func convertQwen35(m *checkpoint.Model, spec *arch.Spec, o ConvertOptions) ([]KV, []WriteTensor, error) {
	if o.FileType != "" || o.Type != F32 {
		t := o.FileType
		if t == "" {
			t = o.Type.String()
		}
		return nil, nil, fmt.Errorf("%w: %s: convert: %s is written as F32 only (got %s); quantize the F32 file with llama-quantize", ErrUnsupported, m.Dir, spec.Family.Name, t)
	}
	cfg := spec.Config
	la := spec.LinearAttn
	moe := spec.MoE != nil
	a := "qwen35"
	if moe {
		a = "qwen35moe"
	}
	if la.KeyDim != la.ValueDim {
		return nil, nil, fmt.Errorf("%w: %s: convert: linear_key_head_dim %d ≠ linear_value_head_dim %d: llama.cpp's %s graph sizes the value heads by ssm.state_size", ErrUnsupported, m.Dir, la.KeyDim, la.ValueDim, a)
	}
	interval := 0
	for k := 1; k <= spec.Layers+1 && interval == 0; k++ {
		ok := true
		for i := 0; i < spec.Layers; i++ {
			if spec.LinearLayer(i) != ((i+1)%k != 0) {
				ok = false
				break
			}
		}
		if ok {
			interval = k
		}
	}
	if interval == 0 {
		return nil, nil, fmt.Errorf("%w: %s: convert: layer_types is not every full_attention_interval-th layer full attention, which is all llama.cpp's %s metadata can say", ErrUnsupported, m.Dir, a)
	}
	if spec.QKVBias || spec.OBias {
		return nil, nil, fmt.Errorf("%w: %s: convert: attention_bias: llama.cpp's %s graph has no attention biases", ErrUnsupported, m.Dir, a)
	}
	sections, err := mropeSections(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: convert: %w", m.Dir, err)
	}
	name := o.Name
	if name == "" {
		name = filepath.Base(m.Dir)
	}
	ft, err := FileTypeByName("F32")
	if err != nil {
		return nil, nil, err
	}
	u32 := func(k string, v int) KV { return KV{a + "." + k, Uint32Value(uint32(v))} }
	kvs := []KV{
		{"general.architecture", StringValue(a)},
		{"general.name", StringValue(name)},
		u32("block_count", spec.Layers),
		u32("context_length", cfg.MaxPositionEmbeddings),
		u32("embedding_length", spec.Hidden),
		u32("attention.head_count", spec.Heads),
		u32("attention.head_count_kv", spec.KVHeads),
		{a + ".rope.freq_base", Float32Value(float32(cfg.RopeTheta))},
		{a + ".attention.layer_norm_rms_epsilon", Float32Value(float32(cfg.RMSNormEps))},
		u32("attention.key_length", spec.HeadDim),
		u32("attention.value_length", spec.HeadDim),
		u32("rope.dimension_count", spec.RotaryDim),
		{a + ".rope.dimension_sections", Int32Array(sections)},
		u32("ssm.conv_kernel", la.ConvKernel),
		u32("ssm.state_size", la.KeyDim),
		u32("ssm.group_count", la.KeyHeads),
		u32("ssm.time_step_rank", la.ValueHeads),
		u32("ssm.inner_size", la.ValueHeads*la.ValueDim),
		u32("full_attention_interval", interval),
		u32("vocab_size", spec.Vocab),
		{"general.file_type", Uint32Value(ft.ID)},
		{"general.quantization_version", Uint32Value(2)},
	}
	if moe {
		kvs = append(kvs, u32("expert_count", spec.MoE.Experts), u32("expert_used_count", spec.MoE.TopK),
			u32("expert_feed_forward_length", spec.MoE.Intermediate), u32("expert_shared_feed_forward_length", spec.MoE.SharedIntermediate))
	} else {
		kvs = append(kvs, u32("feed_forward_length", spec.Intermediate))
	}
	tk, err := tokenizerKVs(filepath.Join(m.Dir, "tokenizer.json"), spec.Vocab, cfg)
	if err != nil {
		return nil, nil, err
	}
	kvs = append(kvs, tk...)

	prefix := spec.Prefix
	if prefix == "" {
		prefix = "model."
	}
	q := &q35Layout{spec: spec, nk: la.KeyHeads, nv: la.ValueHeads, dk: la.KeyDim, dv: la.ValueDim}
	used := map[string]bool{}
	read := func(hf string) ([]float64, []int, error) {
		v, shape, err := m.ReadFloat64(hf)
		if err != nil {
			return nil, nil, err
		}
		used[hf] = true
		for i, x := range v {
			if float64(float32(x)) != x && !math.IsNaN(x) {
				return nil, nil, fmt.Errorf("%s: convert: tensor %q element %d = %v is not a float32", m.Dir, hf, i, x)
			}
		}
		return v, shape, nil
	}
	f32 := func(v []float64) []byte {
		out := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(x)))
		}
		return out
	}
	var ts []WriteTensor
	// stored applies the converter's transforms to a Hugging Face tensor.
	stored := func(hf string, v []float64, shape []int) ([]float64, []int64, error) {
		local := "model." + strings.TrimPrefix(hf, prefix)
		dims := make([]int64, len(shape))
		for i, d := range shape {
			dims[len(shape)-1-i] = int64(d)
		}
		switch {
		case strings.HasSuffix(hf, ".linear_attn.A_log"):
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = -math.Exp(x)
			}
			v = out
		case hf == spec.FinalNormTensor() || hasAnySuffix(hf, q35Offset):
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = 1 + x
			}
			v = out
		case strings.HasSuffix(hf, ".linear_attn.conv1d.weight"):
			dims = []int64{int64(shape[2]), int64(shape[0])}
		}
		// Move Hugging Face element i to its stored place: the reader's
		// orders say where each Hugging Face row/column/entry is stored.
		var rows, cols []int
		switch {
		case strings.HasSuffix(hf, ".linear_attn.conv1d.weight"):
			rows = append(identity(2*q.nk*q.dk), vHeads(q.nk, q.nv, q.dv, 2*q.nk*q.dk)...)
		case strings.HasSuffix(hf, ".linear_attn.A_log"), strings.HasSuffix(hf, ".linear_attn.dt_bias"):
			rows = vHeads(q.nk, q.nv, 1, 0)
		case strings.HasSuffix(hf, ".weight") && len(shape) == 2:
			rows, cols = q.order(strings.TrimSuffix(local, ".weight"))
		}
		if q.nv != q.nk && (rows != nil || cols != nil) {
			r, c := len(v), 1
			if len(shape) >= 2 {
				r, c = shape[0], len(v)/shape[0]
			}
			out := make([]float64, len(v))
			for i := 0; i < r; i++ {
				si := i
				if rows != nil {
					si = rows[i]
				}
				for j := 0; j < c; j++ {
					sj := j
					if cols != nil {
						sj = cols[j]
					}
					out[si*c+sj] = v[i*c+j]
				}
			}
			v = out
		}
		return v, dims, nil
	}
	add := func(hf string) error {
		v, shape, err := read(hf)
		if err != nil {
			return err
		}
		g, _, ok := q35Name("model."+strings.TrimPrefix(hf, prefix), "model.")
		if hf == arch.LMHeadName {
			g, ok = "output.weight", true
		}
		if !ok {
			return fmt.Errorf("%w: %s: convert: tensor %q has no %s name", ErrUnsupported, m.Dir, hf, a)
		}
		sv, dims, err := stored(hf, v, shape)
		if err != nil {
			return err
		}
		ts = append(ts, WriteTensor{Name: g, Dims: dims, Type: F32, Data: f32(sv)})
		return nil
	}
	if err := add(spec.EmbedTensor()); err != nil {
		return nil, nil, err
	}
	for i := 0; i < spec.Layers; i++ {
		l := spec.Layer(i)
		for _, n := range []string{l.AttnNorm, l.MLPNorm, l.QNorm, l.KNorm, l.Conv, l.ALog, l.DtBias, l.GatedNorm} {
			if n != "" {
				if err := add(n); err != nil {
					return nil, nil, err
				}
			}
		}
		var experts [3][]byte // gate, up, down stacked
		var expertShape [3][]int
		for _, lin := range spec.LayerLinears(i) {
			if lin.Expert < 0 {
				if err := add(lin.Module + ".weight"); err != nil {
					return nil, nil, err
				}
				continue
			}
			v, shape, err := read(lin.Module + ".weight")
			if err != nil {
				return nil, nil, err
			}
			k := map[arch.Proj]int{arch.ProjGate: 0, arch.ProjUp: 1, arch.ProjDown: 2}[lin.Proj]
			experts[k] = append(experts[k], f32(v)...)
			expertShape[k] = shape
		}
		if spec.Sparse(i) {
			for k, n := range []string{"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"} {
				s := expertShape[k]
				ts = append(ts, WriteTensor{Name: fmt.Sprintf("blk.%d.%s.weight", i, n), Dims: []int64{int64(s[1]), int64(s[0]), int64(spec.MoE.Experts)}, Type: F32, Data: experts[k]})
			}
		}
	}
	if err := add(spec.FinalNormTensor()); err != nil {
		return nil, nil, err
	}
	if !spec.TiedHead {
		if err := add(arch.LMHeadName); err != nil {
			return nil, nil, err
		}
	}
	var unused []string
	for _, n := range m.Names() {
		if used[n] || ignoredName(n, spec.Ignored) {
			continue
		}
		unused = append(unused, n)
	}
	if len(unused) > 0 {
		return nil, nil, fmt.Errorf("%w: %s: convert: %d tensors the %s architecture does not use: %s", ErrUnsupported, m.Dir, len(unused), cfg.ModelType, strings.Join(unused, ", "))
	}
	return kvs, ts, nil
}

func ignoredName(n string, ps []checkpoint.IgnoredPrefix) bool {
	for _, p := range ps {
		if strings.HasPrefix(n, p.Prefix) {
			return true
		}
	}
	return false
}

// mropeSections returns rope.dimension_sections: the config's
// mrope_section (rope_parameters or rope_scaling, top level or
// text_config) padded to 4, or llama.cpp's default [11, 11, 10, 0]
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
	s := find(cfg.Raw)
	if s == nil {
		if b, ok := cfg.Raw["text_config"]; ok {
			var tc map[string]json.RawMessage
			if json.Unmarshal(b, &tc) == nil {
				s = find(tc)
			}
		}
	}
	if s == nil {
		return []int32{11, 11, 10, 0}, nil
	}
	if len(s) > 4 {
		return nil, fmt.Errorf("%w: mrope_section %v has more than 4 sections", ErrUnsupported, s)
	}
	return append(s, make([]int32, 4-len(s))...), nil
}
