package cuda

import (
	"context"
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// The Gemma 4 text decoder (gemma4_text) on the device, written from
// huggingface/transformers src/transformers/models/gemma4/modeling_gemma4.py
// (Gemma4TextModel.forward, get_per_layer_inputs, project_per_layer_inputs,
// Gemma4TextDecoderLayer.forward, Gemma4TextAttention.forward,
// Gemma4RMSNorm, Gemma4TextMLP, Gemma4TextRotaryEmbedding) and
// docs/gemma4.md; arch/gemma4.go resolves the per-layer structure. It has
// its own forward (forwardGemma4) beside the shared one because nearly
// every step differs: per-layer head sizes and key/value heads, k = v,
// the weightless value norm, KV sharing, per-layer inputs and the layer
// scalar. One kernel is new (ple_combine, kernels/gemma4.cu); the rest are
// existing kernels:
//
//   - Gemma4RMSNorm (x·pow(mean(x²)+eps, -½)·w, the weight itself): rms_norm
//     with the stored weight (Spec.NormOffset is false, so the loader uploads
//     w, not 1 + w); the with_scale=False v_norm: rms_norm with a row of ones
//     (a multiplication by 1 is exact);
//   - attention_k_eq_v (no v_proj on full layers): v = v_norm(k_proj x) is
//     rms_norm(v ← k) before k_norm runs on k in place;
//   - KV sharing: a layer read by KV-shared layers writes its keys and
//     values (after k_norm + RoPE and v_norm) into buffers of its own, which
//     those layers attend to (Gemma4TextAttention's shared_kv_states);
//   - per-layer head sizes: every buffer is sized for the widest layer and
//     each kernel is given the layer's head size and key/value heads;
//   - RoPE per layer type: two table pairs, the sliding layers' default
//     RoPE over head_dim (ds.cos, ds.sin) and the full layers' proportional
//     RoPE over global_head_dim (g4.cosF, g4.sinF), computed in float64
//     from arch's inv_freq and rounded once to fp32; the zero frequencies
//     are cos 1, sin 0 (those dimensions pass through rope unchanged);
//   - scaling = 1.0 (Spec.AttnScale), no score soft-capping; the final
//     logits are soft-capped by headChunk (Spec.FinalSoftcap);
//   - layer_scalar: scale_f32 by the stored [1] value (read on the host).

// launchPLECombine writes out[L][T][P] = (proj + tab·ts)·s from proj and
// tab [T][L·P] (ple_combine, kernels/gemma4.cu).
func launchPLECombine(d device.Device, out, proj, tab device.Ptr, T, L, P int, ts, s float32) error {
	g, b := device.GridStride(T * L * P)
	return d.Launch("ple_combine", g, b, 0, out, proj, tab, int32(T), int32(L), int32(P), ts, s)
}

// actBuf is one per-window buffer of Backend.actBuffers and its size.
type actBuf = struct {
	p *device.Ptr
	n int64
}

// gemma4Dev is what Gemma 4 adds to a device: the per-window buffers, and
// on device 0 the model-level per-layer-input weights.
type gemma4Dev struct {
	ple        device.Ptr      // [L][T][P] per_layer_inputs, layer-major
	tab, proj  device.Ptr      // [T][L·P]: gathered embed_tokens_per_layer rows, projected embedding (device 0)
	gate       device.Ptr      // [T][P]: per_layer_input_gate output
	moeX, moeY device.Ptr      // [T][C]: the MoE block's expert input and output (MoE models)
	ones       device.Ptr      // [widest head] fp32 ones: the weightless v_norm
	cosF, sinF device.Ptr      // [T][global head/2]: the full layers' RoPE tables (ds.cos, ds.sin: sliding)
	keep       [][2]device.Ptr // per layer: its K and V [T][KVH·D] when KV-shared layers read them, else 0
	// device 0: embed_tokens_per_layer as stored, per_layer_model_projection
	// (a dense Linear of Gemma4TextModel), per_layer_projection_norm (fp32).
	tabW    device.Ptr
	tabDT   device.DType
	projW   *devLinear
	normW   device.Ptr
	weights bool // device 0 holds the three above
}

func (g *gemma4Dev) ptrs() []device.Ptr {
	if g == nil {
		return nil
	}
	ps := []device.Ptr{g.ple, g.tab, g.proj, g.gate, g.moeX, g.moeY, g.ones, g.cosF, g.sinF, g.tabW, g.normW}
	for _, kv := range g.keep {
		ps = append(ps, kv[0], kv[1])
	}
	if g.projW != nil && g.projW.bufs == nil {
		ps = append(ps, g.projW.ptrs...)
	}
	return ps
}

// gemma4Host is the model-level per-layer-input weights read in pass 1.
type gemma4Host struct {
	tab   []byte
	tabDT device.DType
	proj  *hostLinear
	norm  []byte
}

func (h *gemma4Host) bytes() int64 {
	if h == nil {
		return 0
	}
	return int64(len(h.tab)) + h.proj.bytes() + int64(len(h.norm))
}

// gemma4Dims returns the widest head size, query width (heads · head size)
// and key/value width over the layers of a Gemma 4 spec.
func gemma4Dims(s *arch.Spec) (D, Q, KV int) {
	for i := 0; i < s.Layers; i++ {
		d := s.LayerHeadDim(i)
		D = max(D, d)
		Q = max(Q, s.Heads*d)
		KV = max(KV, s.LayerKVHeads(i)*d)
	}
	return D, Q, KV
}

// gemma4Kept reports which layers' keys and values KV-shared layers read.
func gemma4Kept(s *arch.Spec) []bool {
	keep := make([]bool, s.Layers)
	for i := 0; i < s.Layers; i++ {
		if src := s.Gemma4.KVSource(i); src != i && src >= 0 {
			keep[src] = true
		}
	}
	return keep
}

// gemma4Host reads embed_tokens_per_layer, per_layer_model_projection and
// per_layer_projection_norm (nil without per-layer inputs). The projection
// is an nn.Linear of Gemma4TextModel that qppl reads as a dense tensor, as
// the reference does (a checkpoint that quantizes it fails here, naming
// the tensor).
func (ld *loader) gemma4Host() (*gemma4Host, error) {
	s := ld.spec
	g := s.Gemma4
	if g.PLE == 0 {
		return nil, nil
	}
	LP := s.Layers * g.PLE
	h := &gemma4Host{}
	var err error
	// under the text decoder's prefix (model.language_model. in a multimodal checkpoint)
	tabName, projName, normName := s.Gemma4Tensor(arch.Gemma4PLEEmbedName), s.Gemma4Tensor(arch.Gemma4PLEProjName), s.Gemma4Tensor(arch.Gemma4PLENormName)
	if h.tab, h.tabDT, err = ld.src.table(tabName, g.PLEVocab, LP); err != nil {
		return nil, err
	}
	raw, dt, err := ld.src.table(projName, LP, s.Hidden)
	if err != nil {
		return nil, err
	}
	names := map[device.DType]string{device.F32: "F32", device.BF16: "BF16", device.F16: "F16"}
	module := projName[:len(projName)-len(".weight")]
	dense := &quant.Dense{Base: quant.Base{Name: module, Out: LP, In: s.Hidden, Fmt: "dense"}, DType: names[dt], Raw: raw}
	if h.proj, err = prepareLinear(dense, ld.gemmDT); err != nil {
		return nil, err
	}
	if h.norm, err = ld.vec(normName, g.PLE); err != nil {
		return nil, err
	}
	return h, nil
}

// gemma4Upload puts the per-layer-input weights on device 0.
func (b *Backend) gemma4Upload(ds *devState, h *gemma4Host) error {
	if h == nil {
		return nil
	}
	g := ds.g4
	var err error
	if g.tabW, err = allocCopy(ds.d, h.tab); err != nil {
		return fmt.Errorf("cuda: %s: %w", arch.Gemma4PLEEmbedName, err)
	}
	g.tabDT = h.tabDT
	if g.projW, err = upload(ds.d, h.proj); err != nil {
		return err
	}
	if g.normW, err = allocCopy(ds.d, h.norm); err != nil {
		return fmt.Errorf("cuda: %s: %w", arch.Gemma4PLENormName, err)
	}
	g.weights = true
	return nil
}

// gemma4Buffers lists the per-window buffers Gemma 4 adds (ds.g4 is
// created when missing).
func (b *Backend) gemma4Buffers(ds *devState, T int) []actBuf {
	s := b.spec
	g := s.Gemma4
	if ds.g4 == nil {
		ds.g4 = &gemma4Dev{}
	}
	if ds.g4.keep == nil {
		ds.g4.keep = make([][2]device.Ptr, s.Layers)
	}
	D, _, _ := gemma4Dims(s)
	t, P, LP := int64(T), int64(g.PLE), int64(s.Layers*g.PLE)
	bufs := []actBuf{{&ds.g4.ones, int64(D) * 4},
		{&ds.g4.cosF, t * int64(g.GlobalHeadDim/2) * 4}, {&ds.g4.sinF, t * int64(g.GlobalHeadDim/2) * 4}}
	if P > 0 {
		bufs = append(bufs, actBuf{&ds.g4.ple, t * LP * 4}, actBuf{&ds.g4.tab, t * LP * 4}, actBuf{&ds.g4.proj, t * LP * 4},
			actBuf{&ds.g4.gate, t * P * 4})
	}
	if s.MoE != nil {
		bufs = append(bufs, actBuf{&ds.g4.moeX, t * int64(s.Hidden) * 4}, actBuf{&ds.g4.moeY, t * int64(s.Hidden) * 4})
	}
	for i, k := range gemma4Kept(s) {
		if k {
			n := t * int64(s.LayerKVHeads(i)*s.LayerHeadDim(i)) * 4
			bufs = append(bufs, actBuf{&ds.g4.keep[i][0], n}, actBuf{&ds.g4.keep[i][1], n})
		}
	}
	return bufs
}

// gemma4Tables fills the ones row and uploads both RoPE table pairs.
func (b *Backend) gemma4Tables(ds *devState, T int) error {
	s := b.spec
	g := s.Gemma4
	D, _, _ := gemma4Dims(s)
	if err := device.LaunchFill(ds.d, ds.g4.ones, D, 1); err != nil {
		return err
	}
	for _, full := range []bool{false, true} {
		for i := 0; i < s.Layers; i++ {
			if g.Full[i] != full {
				continue
			}
			cs, sn := ds.cos, ds.sin
			if full {
				cs, sn = ds.g4.cosF, ds.g4.sinF
			}
			if err := b.ropeTables(ds.d, cs, sn, s.LayerInvFreq(i), T, s.LayerHeadDim(i), 1); err != nil {
				return err
			}
			break // the tables depend on the layer type only
		}
	}
	return nil
}

// gemma4Check refuses what the Gemma 4 path does not compute: a quantized
// KV cache, and global heads wider than the attention kernel on a device
// without batched GEMMs.
func gemma4Check(s *arch.Spec, devs []device.Device, kv [][2][]float32) error {
	if kv != nil {
		return fmt.Errorf("cuda: %w: a quantized KV cache (kv_cache_scheme) is not supported for %s yet", arch.ErrUnsupported, s.Name)
	}
	if D, _, _ := gemma4Dims(s); D > device.AttnMaxHead {
		for _, d := range devs {
			if _, ok := d.(device.BatchedGemmer); !ok {
				return fmt.Errorf("cuda: head size %d (global_head_dim) exceeds the attention kernel's %d and %s has no batched GEMMs", D, device.AttnMaxHead, d.Name())
			}
		}
	}
	return nil
}

// forwardGemma4 is forward for the Gemma 4 text decoder: the final norm's
// output is left in the head device's h buffer.
func (b *Backend) forwardGemma4(ctx context.Context, ids []int32, probe probeFunc) error {
	s := b.spec
	g := s.Gemma4
	T, C, L, P := len(ids), s.Hidden, s.Layers, g.PLE
	eps := float32(s.Eps)
	pr := func(ds *devState, layer int, site string, p device.Ptr, w int) error {
		if probe == nil {
			return nil
		}
		return probe(ds, layer, site, p, w)
	}
	ds := b.devs[0]
	d := ds.d
	if err := d.CopyIn(ds.ids, i32Bytes(ids)); err != nil {
		return err
	}
	if err := device.LaunchEmbedGather(d, ds.x, ds.embed, ds.embedDT, ds.ids, T, C, s.Vocab); err != nil {
		return err
	}
	if err := pr(ds, -1, arch.SiteEmbed, ds.x, C); err != nil {
		return err
	}
	// Gemma4TextScaledWordEmbedding: · sqrt(hidden) (fp32 here, float64 in
	// the reference; transformers rounds it to the weight's dtype)
	if err := device.LaunchScale(d, ds.x, T*C, float32(math.Sqrt(float64(C)))); err != nil {
		return err
	}
	if P > 0 { // per_layer_inputs (get_per_layer_inputs, project_per_layer_inputs)
		g4 := ds.g4
		if err := device.LaunchEmbedGather(d, g4.tab, g4.tabW, g4.tabDT, ds.ids, T, L*P, g.PLEVocab); err != nil {
			return err
		}
		ds.xaCastOf = 0
		if err := b.linear(ds, g4.projW, ds.x, T, g4.proj, 0); err != nil {
			return err
		}
		if err := device.LaunchScale(d, g4.proj, T*L*P, float32(1/math.Sqrt(float64(C)))); err != nil { // per_layer_model_projection_scale
			return err
		}
		if err := device.LaunchRMSNorm(d, g4.proj, g4.proj, g4.normW, T*L, P, eps); err != nil { // per_layer_projection_norm
			return err
		}
		if err := launchPLECombine(d, g4.ple, g4.proj, g4.tab, T, L, P, float32(math.Sqrt(float64(P))), float32(1/math.Sqrt(2))); err != nil {
			return err
		}
	}
	keep := gemma4Kept(s)
	cur := ds
	xfer := func(from, to *devState, src, dst device.Ptr, n int) error {
		buf := make([]byte, n)
		if err := from.d.CopyOut(buf, src); err != nil {
			return err
		}
		return to.d.CopyIn(dst, buf)
	}
	// move carries the residual stream, the per-layer inputs and the kept
	// keys and values written so far to the next device (through the host).
	move := func(to *devState, next int) error {
		if to == cur {
			return nil
		}
		if err := xfer(cur, to, cur.x, to.x, T*C*4); err != nil {
			return err
		}
		if P > 0 {
			if err := xfer(cur, to, cur.g4.ple, to.g4.ple, T*L*P*4); err != nil {
				return err
			}
		}
		for j := 0; j < next; j++ {
			if keep[j] {
				n := T * s.LayerKVHeads(j) * s.LayerHeadDim(j) * 4
				for k := 0; k < 2; k++ {
					if err := xfer(cur, to, cur.g4.keep[j][k], to.g4.keep[j][k], n); err != nil {
						return err
					}
				}
			}
		}
		cur = to
		return nil
	}
	for _, ds := range b.devs {
		for li := ds.first; li < ds.end; li++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := move(ds, li); err != nil {
				return err
			}
			if err := b.gemma4Layer(ds, li, T, pr); err != nil {
				return fmt.Errorf("layer %d: %w", li, err)
			}
		}
	}
	hd := b.devs[b.headDev]
	if err := move(hd, L); err != nil {
		return err
	}
	hd.xaCastOf = 0
	if err := device.LaunchRMSNorm(hd.d, hd.h, hd.x, hd.finalNorm, T, C, eps); err != nil {
		return err
	}
	return pr(hd, -1, arch.SiteFinalNorm, hd.h, C)
}

// gemma4Layer runs decoder layer li (Gemma4TextDecoderLayer.forward) on
// ds.x in place.
func (b *Backend) gemma4Layer(ds *devState, li, T int, pr probeFunc) error {
	s := b.spec
	g := s.Gemma4
	lw := &ds.layers[li-ds.first]
	d := ds.d
	C, H, P := s.Hidden, s.Heads, g.PLE
	D, KVH, I := s.LayerHeadDim(li), s.LayerKVHeads(li), s.LayerIntermediate(li)
	eps := float32(s.Eps)
	norm := func(out, in, w device.Ptr, rows, cols int) error {
		return device.LaunchRMSNorm(d, out, in, w, rows, cols, eps)
	}
	if err := norm(ds.h, ds.x, lw.attnNorm, T, C); err != nil { // input_layernorm
		return err
	}
	ds.xaCastOf = 0
	if err := pr(ds, li, arch.SiteAttnNorm, ds.h, C); err != nil {
		return err
	}

	// Gemma4TextAttention
	cs, sn := ds.cos, ds.sin
	if g.Full[li] {
		cs, sn = ds.g4.cosF, ds.g4.sinF
	}
	k, v := ds.k, ds.v
	if kv := ds.g4.keep[li]; kv[0] != 0 { // read by KV-shared layers: written where they find it
		k, v = kv[0], kv[1]
	}
	src := g.KVSource(li)
	if src != li {
		k, v = ds.g4.keep[src][0], ds.g4.keep[src][1]
	}
	if src == li && lw.fuse[fuseQKV] && fitsElems(T, (H+2*KVH)*D) { // q|k|v as one GEMM (fuse.go)
		if err := b.linearFused(ds, []*devLinear{lw.lin[arch.ProjQ], lw.lin[arch.ProjK], lw.lin[arch.ProjV]}, ds.h, T, ds.qkv); err != nil {
			return err
		}
		if err := device.LaunchSplitQKV(d, ds.q, k, v, ds.qkv, lw.bias[arch.ProjQ], lw.bias[arch.ProjK], lw.bias[arch.ProjV], T, H*D, KVH*D); err != nil {
			return err
		}
	} else {
		if err := b.linear(ds, lw.lin[arch.ProjQ], ds.h, T, ds.q, lw.bias[arch.ProjQ]); err != nil {
			return err
		}
		if src == li {
			if err := b.linear(ds, lw.lin[arch.ProjK], ds.h, T, k, lw.bias[arch.ProjK]); err != nil {
				return err
			}
			if w := lw.lin[arch.ProjV]; w != nil {
				if err := b.linear(ds, w, ds.h, T, v, lw.bias[arch.ProjV]); err != nil {
					return err
				}
			}
		}
	}
	if err := norm(ds.q, ds.q, lw.qNorm, T*H, D); err != nil { // q_norm
		return err
	}
	if err := device.LaunchRope(d, ds.q, cs, sn, T, H, D); err != nil {
		return err
	}
	if src == li {
		vin := v // v_norm(v_proj x), or with attention_k_eq_v v_norm(k_proj x) before k_norm
		if lw.lin[arch.ProjV] == nil {
			vin = k
		}
		if err := norm(v, vin, ds.g4.ones, T*KVH, D); err != nil {
			return err
		}
		if err := norm(k, k, lw.kNorm, T*KVH, D); err != nil { // k_norm
			return err
		}
		if err := device.LaunchRope(d, k, cs, sn, T, KVH, D); err != nil {
			return err
		}
	}
	if err := b.attendKV(ds, T, s.Window(li), KVH, D, k, v, 0); err != nil {
		return err
	}
	if err := b.linear(ds, lw.lin[arch.ProjO], ds.att, T, ds.proj, lw.bias[arch.ProjO]); err != nil {
		return err
	}
	if err := norm(ds.proj, ds.proj, lw.postAttnNorm, T, C); err != nil { // post_attention_layernorm
		return err
	}
	if err := pr(ds, li, arch.SiteAttnOut, ds.proj, C); err != nil {
		return err
	}
	if err := device.LaunchAddInplace(d, ds.x, ds.proj, T*C); err != nil {
		return err
	}

	// Gemma4TextMLP: down(gelu_tanh(gate x) · up x), width I
	if err := norm(ds.h, ds.x, lw.mlpNorm, T, C); err != nil { // pre_feedforward_layernorm
		return err
	}
	ds.xaCastOf = 0
	if err := pr(ds, li, arch.SiteMLPNorm, ds.h, C); err != nil {
		return err
	}
	if w := lw.lin[arch.ProjGate]; lw.fuse[fuseGU] && fitsElems(T, 2*w.out) {
		if err := b.linearFused(ds, []*devLinear{w, lw.lin[arch.ProjUp]}, ds.h, T, ds.gu); err != nil {
			return err
		}
		if err := device.LaunchGeluTanhMulCat(d, ds.gate, ds.gu, T, I); err != nil {
			return err
		}
	} else {
		if err := b.linear(ds, w, ds.h, T, ds.gate, 0); err != nil {
			return err
		}
		if err := b.linear(ds, lw.lin[arch.ProjUp], ds.h, T, ds.up, 0); err != nil {
			return err
		}
		if err := device.LaunchGeluTanhMul(d, ds.gate, ds.gate, ds.up, T*I); err != nil {
			return err
		}
	}
	if err := b.linear(ds, lw.lin[arch.ProjDown], ds.gate, T, ds.proj, 0); err != nil {
		return err
	}
	if lw.experts != nil { // enable_moe_block: ds.proj = h1 + h2
		if err := b.gemma4Experts(ds, lw, li, T, pr); err != nil {
			return err
		}
	}
	if err := norm(ds.proj, ds.proj, lw.postMLPNorm, T, C); err != nil { // post_feedforward_layernorm
		return err
	}
	if err := pr(ds, li, arch.SiteMLPOut, ds.proj, C); err != nil {
		return err
	}
	if err := device.LaunchAddInplace(d, ds.x, ds.proj, T*C); err != nil {
		return err
	}

	if P > 0 { // x += post_per_layer_input_norm(per_layer_projection(gelu_tanh(per_layer_input_gate x) · ple_li))
		ds.xaCastOf = 0
		if err := b.linear(ds, lw.lin[arch.ProjPLEGate], ds.x, T, ds.g4.gate, 0); err != nil {
			return err
		}
		ple := ds.g4.ple + device.Ptr(int64(li)*int64(T)*int64(P)*4)
		if err := device.LaunchGeluTanhMul(d, ds.g4.gate, ds.g4.gate, ple, T*P); err != nil {
			return err
		}
		if err := b.linear(ds, lw.lin[arch.ProjPLEProj], ds.g4.gate, T, ds.proj, 0); err != nil {
			return err
		}
		if err := norm(ds.proj, ds.proj, lw.pleNorm, T, C); err != nil {
			return err
		}
		if err := device.LaunchAddInplace(d, ds.x, ds.proj, T*C); err != nil {
			return err
		}
	}
	if err := device.LaunchScale(d, ds.x, T*C, lw.scalar); err != nil { // hidden_states *= layer_scalar
		return err
	}
	ds.xaCastOf = 0
	return pr(ds, li, arch.SiteLayerOut, ds.x, C)
}

// routerScale reads a Gemma 4 router.scale [n] and returns scale · n^-½
// as fp32 bytes (formed in float64, rounded once): the weight of the
// router's rms_norm, which is Gemma4TextRouter.forward's weightless norm
// followed by · scale · scalar_root_size.
func (ld *loader) routerScale(name string, n int) ([]byte, error) {
	v, shape, err := ld.src.float64s(name)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	if len(shape) != 1 || shape[0] != n || len(v) != n {
		return nil, fmt.Errorf("cuda: %s: shape %v, want [%d]", name, shape, n)
	}
	w := make([]float64, n)
	r := 1 / math.Sqrt(float64(n))
	for i, x := range v {
		w[i] = x * r
	}
	return f64ToF32Bytes(w), nil
}

// gemma4Experts adds a Gemma 4 MoE block (Gemma4TextDecoderLayer.forward
// with enable_moe_block) to the dense MLP's output in ds.proj, the
// residual r being ds.x:
//
//	h1 = post_feedforward_layernorm_1(ds.proj)
//	z = norm(r)·scale·hidden^-½      (rms_norm with the weight scale·hidden^-½)
//	top-k of softmax(router.proj z), renormalised, · per_expert_scale   (routeExperts, on the host)
//	h2 = post_feedforward_layernorm_2(Σ w_e·expert_e(pre_feedforward_layernorm_2(r)))
//	ds.proj = h1 + h2
func (b *Backend) gemma4Experts(ds *devState, lw *layerDev, li, T int, pr probeFunc) error {
	s := b.spec
	d := ds.d
	C := s.Hidden
	eps := float32(s.Eps)
	if err := device.LaunchRMSNorm(d, ds.proj, ds.proj, lw.postMLPNorm1, T, C, eps); err != nil {
		return err
	}
	if err := device.LaunchRMSNorm(d, ds.h, ds.x, lw.routerW, T, C, eps); err != nil {
		return err
	}
	if err := device.LaunchRMSNorm(d, ds.g4.moeX, ds.x, lw.preMoENorm, T, C, eps); err != nil {
		return err
	}
	ds.xaCastOf = 0
	probe := func(p device.Ptr) error { return pr(ds, li, arch.SiteRouter, p, s.MoE.Experts) }
	if err := b.routeExperts(ds, lw, T, ds.h, ds.g4.moeX, ds.g4.moeY, lw.perExpert, probe); err != nil {
		return err
	}
	if err := device.LaunchRMSNorm(d, ds.g4.moeY, ds.g4.moeY, lw.postMoENorm, T, C, eps); err != nil {
		return err
	}
	return device.LaunchAddInplace(d, ds.proj, ds.g4.moeY, T*C)
}
