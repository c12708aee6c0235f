package gguf

import (
	"os"
	"sort"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/quant"
)

// Inspect returns compare_q's bits-per-weight accounting of the model
// (methodology.md §1.5), as quant.Inspect does for safetensors: decoder
// bpw over every Linear of the decoder layers, head bpw (output.weight, or
// token_embd.weight when the head is tied), vram_bits = head_numel·head_bpw
// + Σ layer bits; norms and biases are not counted. Module formats are
// "gguf-<type>" (gguf-q4_k); a Q4_K_M file reports "mixed: gguf-q4_k,
// gguf-q6_k".
func (m *Model) Inspect() (*quant.Report, error) {
	r := &quant.Report{Method: "gguf"}
	formats := map[string]bool{}
	for i := 0; i < m.Spec.Layers; i++ {
		for _, al := range m.Spec.LayerLinears(i) {
			l, err := m.Linear(al.Module)
			if err != nil {
				return nil, err
			}
			out, in := l.Shape()
			mi := quant.ModuleInfo{Module: al.Module, Layer: i, Format: l.Format(), Out: out, In: in, Bytes: l.StoredBytes()}
			mi.BPW = float64(mi.Bytes) * 8 / float64(out*in)
			r.LayerBytes += mi.Bytes
			r.LayerWeights += int64(out) * int64(in)
			formats[mi.Format] = true
			r.Modules = append(r.Modules, mi)
		}
		if err := m.inspectGptOss(r, formats, i); err != nil {
			return nil, err
		}
	}
	head, module := arch.LMHeadName, "lm_head"
	if m.Spec.TiedHead {
		head, module = arch.EmbedName, "model.embed_tokens"
		r.HeadTied = true
	}
	ti, _, err := m.peekHF(head)
	if err != nil {
		return nil, err
	}
	r.Head, r.HeadFormat, r.HeadBytes, r.HeadWeights = module, "gguf-"+strings.ToLower(ti.Type.String()), ti.Size, ti.Numel()
	r.Modules = append(r.Modules, quant.ModuleInfo{Module: module, Layer: -1, Format: r.HeadFormat, Out: int(ti.Rows()), In: int(ti.Dims[0]),
		Bytes: ti.Size, BPW: float64(ti.Size) * 8 / float64(ti.Numel())})
	if r.LayerWeights > 0 {
		r.BPWLayer = float64(r.LayerBytes) * 8 / float64(r.LayerWeights)
	}
	r.BPWHead = float64(r.HeadBytes) * 8 / float64(r.HeadWeights)
	r.VRAMBits = float64(r.HeadWeights)*r.BPWHead + float64(r.LayerBytes)*8
	r.VRAMGB = r.VRAMBits / 8 / (1 << 30)
	var fmts []string
	for f := range formats {
		fmts = append(fmts, f)
	}
	sort.Strings(fmts)
	switch len(fmts) {
	case 0:
		r.Format = "none"
	case 1:
		r.Format = fmts[0]
	default:
		r.Format = "mixed: " + strings.Join(fmts, ", ")
	}
	for _, f := range m.Files {
		for _, t := range f.Tensors {
			r.TensorBytes += t.Size
		}
		if st, err := os.Stat(f.Path); err == nil {
			r.FileBytes += st.Size()
		}
	}
	return r, nil
}

// TypeShare is one ggml type's share of a model's tensors.
type TypeShare struct {
	Type    Type
	Tensors int
	Weights int64
	Bytes   int64
}

// TypeBreakdown returns, per ggml type, how many tensors, weights and bytes
// of the decoder layers' Linears (layers) and of the whole file (all) use
// it, ordered by type id.
func (m *Model) TypeBreakdown() (layers, all []TypeShare) {
	lin := map[string]bool{}
	for i := 0; i < m.Spec.Layers; i++ {
		for _, al := range m.Spec.LayerLinears(i) {
			g, _ := m.GGUFName(al.Module + ".weight")
			lin[g] = true
		}
		if m.Spec.GptOss != nil {
			gu, _, dn, _ := m.Spec.GptOssExperts(i)
			for _, hf := range []string{gu + ".gate[0].weight", gu + ".up[0].weight", dn + "[0].weight"} {
				g, _ := m.GGUFName(hf)
				lin[g] = true
			}
		}
	}
	acc := func(dst map[Type]*TypeShare, ti TensorInfo) {
		s := dst[ti.Type]
		if s == nil {
			s = &TypeShare{Type: ti.Type}
			dst[ti.Type] = s
		}
		s.Tensors++
		s.Weights += ti.Numel()
		s.Bytes += ti.Size
	}
	lm, am := map[Type]*TypeShare{}, map[Type]*TypeShare{}
	for _, ti := range m.tensors {
		acc(am, ti)
		if lin[ti.Name] {
			acc(lm, ti)
		}
	}
	flat := func(mp map[Type]*TypeShare) []TypeShare {
		var out []TypeShare
		for _, s := range mp {
			out = append(out, *s)
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Type < out[b].Type })
		return out
	}
	return flat(lm), flat(am)
}

// inspectGptOss adds gpt-oss's fused experts of layer i to r as the
// safetensors report lists them (quant: one module per fused tensor,
// gate_up_proj [E·2·I, hidden], down_proj [E·hidden, I]), their bytes
// those of the GGUF slices (ffn_gate_exps and ffn_up_exps, ffn_down_exps).
func (m *Model) inspectGptOss(r *quant.Report, formats map[string]bool, i int) error {
	s := m.Spec
	if s.GptOss == nil {
		return nil
	}
	E, I, C := s.MoE.Experts, s.MoE.Intermediate, s.Hidden
	gu, _, dn, _ := s.GptOssExperts(i)
	gl, dl, err := m.GptOssExperts(gu, dn, E, C, I)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		module  string
		ls      []quant.Linear
		out, in int
	}{{dn, dl, E * C, I}, {gu, gl, E * 2 * I, C}} {
		mi := quant.ModuleInfo{Module: x.module, Layer: i, Out: x.out, In: x.in}
		fs := map[string]bool{}
		for _, l := range x.ls {
			mi.Bytes += l.StoredBytes()
			fs[l.Format()] = true
			if il, ok := l.(*interleaved); ok {
				fs[il.up.Format()] = true
			}
		}
		var names []string
		for f := range fs {
			names = append(names, f)
			formats[f] = true
		}
		sort.Strings(names)
		mi.Format = strings.Join(names, "+")
		mi.BPW = float64(mi.Bytes) * 8 / float64(x.out*x.in)
		r.LayerBytes += mi.Bytes
		r.LayerWeights += int64(x.out) * int64(x.in)
		r.Modules = append(r.Modules, mi)
	}
	return nil
}
