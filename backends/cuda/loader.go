package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// loader reads a model's tensors from its source (a checkpoint through
// package quant, so the kernels see exactly the tensors quant decodes, or
// a GGUF file) by arch's names.
type loader struct {
	src    source
	spec   *arch.Spec
	gemmDT device.DType
}

// vec reads a 1-D tensor (norm weight or bias) as fp32 bytes (exact for
// BF16/F16/F32 checkpoints).
func (ld *loader) vec(name string, n int) ([]byte, error) {
	return ld.tensor(name, []int{n})
}

// tensor reads a small dense tensor of the given shape as fp32 bytes (the
// Gated DeltaNet's conv1d weight [ConvDim, 1, kernel]; see vec).
func (ld *loader) tensor(name string, shape []int) ([]byte, error) {
	v, got, err := ld.src.float64s(name)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	if !slices.Equal(got, shape) {
		return nil, fmt.Errorf("cuda: %s: shape %v, want %v", name, got, shape)
	}
	return f64ToF32Bytes(v), nil
}

// norm reads an RMSNorm weight as fp32 bytes; for gemma (Spec.NormOffset)
// it uploads 1 + weight, formed in float64 and rounded once to fp32, which
// is Gemma2RMSNorm.forward's fp32 (1.0 + self.weight.float()) for every
// bf16/fp16/fp32 weight.
func (ld *loader) norm(name string, n int) ([]byte, error) {
	if !ld.spec.NormOffset {
		return ld.vec(name, n)
	}
	v, shape, err := ld.src.float64s(name)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	if len(shape) != 1 || shape[0] != n || len(v) != n {
		return nil, fmt.Errorf("cuda: %s: shape %v, want [%d]", name, shape, n)
	}
	w := make([]float64, n)
	for i, x := range v {
		w[i] = 1 + x
	}
	return f64ToF32Bytes(w), nil
}

func (ld *loader) linear(al arch.Linear) (*hostLinear, error) {
	l, err := ld.src.linear(al.Module)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", al.Module, err)
	}
	if o, i := l.Shape(); o != al.Out || i != al.In {
		return nil, fmt.Errorf("cuda: %s: weight shape [%d %d], want [%d %d]", al.Module, o, i, al.Out, al.In)
	}
	return prepareLinear(l, ld.gemmDT)
}

// vecSpec is a 1-D tensor of a layer: its name ("" when the architecture
// lacks it), length and where it goes on the device.
type vecSpec struct {
	name string
	n    int
	dst  func(*layerDev) *device.Ptr // nil: a scalar kept on the host (gemma4's layer_scalar, layerDev.scalar)
	norm bool                        // an RMSNorm weight (gemma, qwen3_5: uploaded as 1 + weight)
	// shape, when set, replaces [n] (the conv1d weight [ConvDim, 1, kernel]).
	shape []int
}

// layerVecs lists layer i's 1-D tensors (norms, then the biases by
// arch.Proj).
func (ld *loader) layerVecs(i int) []vecSpec {
	s := ld.spec
	l := s.Layer(i)
	all := []vecSpec{
		{l.AttnNorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.attnNorm }, true, nil},
		{l.MLPNorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.mlpNorm }, true, nil},
		{l.QNorm, s.LayerHeadDim(i), func(lw *layerDev) *device.Ptr { return &lw.qNorm }, true, nil},
		{l.KNorm, s.LayerHeadDim(i), func(lw *layerDev) *device.Ptr { return &lw.kNorm }, true, nil},
		{l.PostAttnNorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.postAttnNorm }, true, nil},
		{l.PostMLPNorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.postMLPNorm }, true, nil},
	}
	if s.LinearLayer(i) {
		la := s.LinearAttn
		all = append(all,
			vecSpec{l.Conv, s.ConvDim() * la.ConvKernel, func(lw *layerDev) *device.Ptr { return &lw.conv }, false, []int{s.ConvDim(), 1, la.ConvKernel}},
			vecSpec{l.ALog, la.ValueHeads, func(lw *layerDev) *device.Ptr { return &lw.aLog }, false, nil},
			vecSpec{l.DtBias, la.ValueHeads, func(lw *layerDev) *device.Ptr { return &lw.dtBias }, false, nil},
			vecSpec{l.GatedNorm, la.ValueDim, func(lw *layerDev) *device.Ptr { return &lw.gnorm }, false, nil}) // Qwen3_5RMSNormGated: no offset
	}
	if s.Gemma4 != nil { // post_per_layer_input_norm ("" without per-layer inputs); layer_scalar [1] to the host
		all = append(all, vecSpec{l.PLENorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.pleNorm }, true, nil},
			vecSpec{l.LayerScalar, 1, nil, false, nil})
		if s.Sparse(i) { // the MoE block's vectors (router.scale uploaded times hidden^-½: ld.routerScale)
			all = append(all, vecSpec{l.RouterScale, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.routerW }, false, nil},
				vecSpec{l.PerExpertScale, s.MoE.Experts, nil, false, nil},
				vecSpec{l.PreMoENorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.preMoENorm }, true, nil},
				vecSpec{l.PostMLPNorm1, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.postMLPNorm1 }, true, nil},
				vecSpec{l.PostMoENorm, s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.postMoENorm }, true, nil})
		}
	}
	for _, al := range s.LayerLinears(i) {
		p := al.Proj
		all = append(all, vecSpec{l.Bias(p), al.Out, func(lw *layerDev) *device.Ptr { return &lw.bias[p] }, false, nil})
	}
	if s.GptOss != nil { // gptoss.go
		E, I := s.MoE.Experts, s.MoE.Intermediate
		_, gub, _, db := s.GptOssExperts(i)
		all = append(all,
			vecSpec{l.Sinks, s.Heads, func(lw *layerDev) *device.Ptr { return &lw.sinks }, false, nil},
			vecSpec{gub, E * 2 * I, func(lw *layerDev) *device.Ptr { return &lw.guBias }, false, []int{E, 2 * I}},
			vecSpec{db, E * s.Hidden, func(lw *layerDev) *device.Ptr { return &lw.dnBias }, false, []int{E, s.Hidden}})
	}
	return all
}

// checkVecs checks that every 1-D tensor (norms, biases; read in pass 2)
// exists with its length, before anything is allocated; it also marks them
// as used for the unused-tensor check.
func (ld *loader) checkVecs() error {
	check := func(name string, want []int) error {
		shape, ok := ld.src.shape(name)
		if !ok {
			return fmt.Errorf("cuda: %s: missing tensor %s", ld.src.where(), name)
		}
		if !slices.Equal(shape, want) {
			return fmt.Errorf("cuda: %s: shape %v, want %v", name, shape, want)
		}
		return nil
	}
	for i := 0; i < ld.spec.Layers; i++ {
		for _, v := range ld.layerVecs(i) {
			if v.name == "" {
				continue
			}
			shape := v.shape
			if shape == nil {
				shape = []int{v.n}
			}
			if err := check(v.name, shape); err != nil {
				return err
			}
		}
	}
	return check(ld.spec.FinalNormTensor(), []int{ld.spec.Hidden})
}

// layerSize returns layer i's device bytes (the size of its arena: every
// tensor aligned to arenaAlign), its largest scratch need (a fused group
// of dequantized weights included) and which fusion groups may fuse.
func (ld *loader) layerSize(i int) (bytes, scratch int64, fuse [2]bool, err error) {
	var hs [arch.NumProj]*hostLinear // the dense linears by arch.Proj (fusion candidates)
	for _, v := range ld.layerVecs(i) {
		if v.name != "" && v.dst != nil {
			bytes += arenaBytes(int64(4 * v.n))
		}
	}
	experts, err := ld.gptOssExperts(i)
	if err != nil {
		return 0, 0, fuse, err
	}
	for _, h := range experts {
		for _, b := range h.bufs {
			bytes += arenaBytes(int64(len(b)))
		}
		if !h.direct {
			scratch = max(scratch, int64(h.out*h.in*ld.gemmDT.Size()))
		}
	}
	for _, al := range ld.spec.LayerLinears(i) {
		h, err := ld.linear(al)
		if err != nil {
			return 0, 0, fuse, err
		}
		if al.Expert < 0 {
			hs[al.Proj] = h
		}
		for _, b := range h.bufs {
			bytes += arenaBytes(int64(len(b)))
		}
		if al.Proj == arch.ProjRouter {
			bytes += arenaBytes(int64(4 * al.Out * al.In)) // router32
		}
		if !h.direct {
			scratch = max(scratch, int64(h.out*h.in*ld.gemmDT.Size()))
		}
		if h.act != nil && h.act.kind == device.AQLLMInt8 {
			scratch = max(scratch, int64(4*h.in)) // LLM.int8's column flags (forward.go)
		}
		if h.act != nil && h.act.tensor {
			scratch = max(scratch, 4) // the per-tensor amax (forward.go)
		}
	}
	for g, idx := range fuseGroups() {
		grp := make([]*hostLinear, len(idx))
		for j, k := range idx {
			grp[j] = hs[k]
		}
		if fusable(grp) {
			fuse[g] = true
			if !grp[0].direct {
				scratch = max(scratch, groupScratch(grp, ld.gemmDT))
			}
		}
	}
	return bytes, scratch, fuse, nil
}

func (ld *loader) uploadLayer(d device.Device, i int) (layerDev, error) {
	var lw layerDev
	for _, v := range ld.layerVecs(i) {
		if v.name == "" {
			continue
		}
		read := ld.vec
		if v.norm {
			read = ld.norm
		}
		if ld.spec.Gemma4 != nil && v.name == ld.spec.Layer(i).RouterScale {
			read = ld.routerScale
		}
		var b []byte
		var err error
		if v.shape != nil {
			b, err = ld.tensor(v.name, v.shape)
		} else {
			b, err = read(v.name, v.n)
		}
		if err != nil {
			return lw, err
		}
		if v.dst == nil { // to the host: layer_scalar, or router.per_expert_scale
			if v.n == 1 && v.name == ld.spec.Layer(i).LayerScalar {
				lw.scalar = math.Float32frombits(binary.LittleEndian.Uint32(b))
			} else {
				for j := 0; j < v.n; j++ {
					lw.perExpert = append(lw.perExpert, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))))
				}
			}
			continue
		}
		if *v.dst(&lw), err = allocCopy(d, b); err != nil {
			return lw, fmt.Errorf("cuda: %s: %w", v.name, err)
		}
	}
	if ld.spec.Sparse(i) {
		lw.experts = make([][arch.NumProj]*devLinear, ld.spec.MoE.Experts)
	}
	experts, err := ld.gptOssExperts(i)
	if err != nil {
		return lw, err
	}
	for k, h := range experts { // gate_up_proj, down_proj of expert 0, 1, ...
		p := arch.ProjGateUp
		if k%2 == 1 {
			p = arch.ProjDown
		}
		if lw.experts[k/2][p], err = upload(d, h); err != nil {
			return lw, err
		}
	}
	for _, al := range ld.spec.LayerLinears(i) {
		h, err := ld.linear(al)
		if err != nil {
			return lw, err
		}
		dst := &lw.lin[al.Proj]
		if al.Expert >= 0 {
			dst = &lw.experts[al.Expert][al.Proj]
		}
		if *dst, err = upload(d, h); err != nil {
			return lw, err
		}
		if al.Proj == arch.ProjRouter {
			if lw.router32, err = ld.router32(d, al); err != nil {
				return lw, err
			}
		}
	}
	return lw, nil
}

// gptOssExperts prepares gpt-oss layer i's fused experts (nil for other
// families): expert e's gate_up_proj [2·I, C] at 2e and down_proj [C, I]
// at 2e + 1, each one Linear of package quant (quant.OpenGptOssExperts).
func (ld *loader) gptOssExperts(i int) ([]*hostLinear, error) {
	s := ld.spec
	if s.GptOss == nil {
		return nil, nil
	}
	gs, ok := ld.src.(gptOssSource)
	if !ok {
		return nil, fmt.Errorf("cuda: %s: this source cannot read gpt-oss's fused experts", ld.src.where())
	}
	gu, _, dn, _ := s.GptOssExperts(i)
	gl, dl, err := gs.gptOssExperts(gu, dn, s.MoE.Experts, s.Hidden, s.MoE.Intermediate)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	out := make([]*hostLinear, 0, 2*len(gl))
	for e := range gl {
		for _, l := range []quant.Linear{gl[e], dl[e]} {
			h, err := prepareLinear(l, ld.gemmDT)
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// router32 uploads a MoE router's weight decoded to fp32 (see
// layerDev.router32), or returns 0 when its input is quantized.
func (ld *loader) router32(d device.Device, al arch.Linear) (device.Ptr, error) {
	l, err := ld.src.linear(al.Module)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", al.Module, err)
	}
	if l.InputQuantizer() != nil {
		return 0, nil
	}
	w := make([]float64, al.Out*al.In)
	if err := l.Dequantize(w); err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", al.Module, err)
	}
	p, err := allocCopy(d, f64ToF32Bytes(w))
	if err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", al.Module, err)
	}
	return p, nil
}

// embedding returns the embedding table's bytes and dtype (exact values).
func (ld *loader) embedding() ([]byte, device.DType, error) { return ld.src.embedding(ld.spec) }

// head returns the output projection: lm_head through quant, or, when
// tied, the embedding table (shared reports that: the head reads the
// embedding's device copy) or the source's own tied head (a quantized GGUF
// token_embd, read packed).
func (ld *loader) head(embRaw []byte, embDT device.DType) (h *hostLinear, shared bool, err error) {
	if !ld.spec.TiedHead {
		h, err = ld.linear(ld.spec.Head())
		if err == nil && h.act != nil && h.act.kind == device.AQLLMInt8 {
			// the head runs in row chunks, and LLM.int8's outlier columns
			// depend on every row (transformers never quantizes lm_head
			// with bitsandbytes: it is in llm_int8_skip_modules)
			return nil, false, fmt.Errorf("cuda: %s: an LLM.int8 lm_head is not evaluated on cuda/emu (its logits are computed in row chunks); use --backend reference", h.module)
		}
		if err == nil && h.act != nil && h.act.tensor {
			// the per-tensor scale is the amax of every row of the window
			return nil, false, fmt.Errorf("cuda: %s: a dynamic per-tensor activation scale on lm_head is not evaluated on cuda/emu (its logits are computed in row chunks); use --backend reference", h.module)
		}
		return h, false, err
	}
	if l, err := ld.src.tiedHead(ld.spec); err != nil {
		return nil, false, fmt.Errorf("cuda: %s: %w", arch.HeadModule, err)
	} else if l != nil {
		h, err = prepareLinear(l, ld.gemmDT)
		return h, false, err
	}
	dts := map[device.DType]string{device.F32: "F32", device.BF16: "BF16", device.F16: "F16"}
	dense := &quant.Dense{Base: quant.Base{Name: arch.HeadModule, Out: ld.spec.Vocab, In: ld.spec.Hidden, Fmt: "tied"}, DType: dts[embDT], Raw: embRaw}
	h, err = prepareLinear(dense, ld.gemmDT)
	return h, true, err
}
