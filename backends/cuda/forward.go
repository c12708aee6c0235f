package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
)

// probeFunc receives a device buffer holding T rows of width fp32 values.
type probeFunc func(ds *devState, layer int, site string, p device.Ptr, width int) error

// linear computes out[rows][l.out] = in[rows][l.in]·Wᵀ (+ bias), where the
// input is first cast to the GEMM dtype, or fake-quantized when the
// checkpoint prescribes activation quantization, and W is the stored dense
// weight or its dequantization into the device's scratch.
// Reference: reference.linear (quant.ActQuantizer, Dequantize, Dgemm).
func (b *Backend) linear(ds *devState, l *devLinear, in device.Ptr, rows int, out, bias device.Ptr) error {
	d := ds.d
	post, err := b.linearInput(ds, l, in, rows)
	if err != nil {
		return err
	}
	w, err := l.weight(d, ds.scratch, b.gemmDT)
	if err != nil {
		return err
	}
	if err := d.Gemm(device.Gemm{M: rows, N: l.out, K: l.in, A: ds.xa, B: w, C: out, AType: b.gemmDT, BType: b.gemmDT}); err != nil {
		return fmt.Errorf("%s: %w", l.module, err)
	}
	if post != 1 {
		if err := device.LaunchScale(d, out, rows*l.out, post); err != nil {
			return err
		}
	}
	if bias != 0 {
		if err := device.LaunchAddBiasRows(d, out, bias, rows, l.out); err != nil {
			return err
		}
	}
	return nil
}

// linearInput prepares ds.xa, the GEMM input of l: in cast to the GEMM
// dtype, or fake-quantized when the checkpoint prescribes activation
// quantization (a plain cast is reused while ds.xaCastOf says xa holds it).
// It returns the factor the GEMM output must be multiplied by (1: none;
// actParams.gemmInput).
func (b *Backend) linearInput(ds *devState, l *devLinear, in device.Ptr, rows int) (float32, error) {
	d := ds.d
	n := rows * l.in
	if a := l.act; a != nil && a.kind == device.AQLLMInt8 {
		// the column flags live in the dequantization scratch, which the
		// weight only fills after this (the loader sizes it for them)
		if err := device.LaunchLLMInt8Cols(d, ds.scratch, in, rows, l.in, a.threshold); err != nil {
			return 0, fmt.Errorf("%s input: %w", l.module, err)
		}
		if err := device.LaunchLLMInt8Quant(d, ds.xa, b.gemmDT, in, ds.scratch, rows, l.in); err != nil {
			return 0, fmt.Errorf("%s input: %w", l.module, err)
		}
		ds.xaCastOf = 0
		return 1, nil
	} else if a != nil && a.tensor {
		// the amax lives in the dequantization scratch, which the weight
		// only fills after this (the loader sizes it for it)
		if err := device.LaunchActAmax(d, ds.scratch, in, n); err != nil {
			return 0, fmt.Errorf("%s input: %w", l.module, err)
		}
		if err := device.LaunchActQuantTensor(d, ds.xa, b.gemmDT, in, rows, l.in, a.kind, ds.scratch); err != nil {
			return 0, fmt.Errorf("%s input: %w", l.module, err)
		}
		ds.xaCastOf = 0
		return 1, nil
	} else if a != nil {
		kind, post := a.gemmInput()
		err := device.LaunchActQuant(d, ds.xa, b.gemmDT, in, rows, l.in, kind, a.gsize, a.dynamic, a.sym, a.scale, a.zp, a.gscale)
		if err != nil {
			return 0, fmt.Errorf("%s input: %w", l.module, err)
		}
		ds.xaCastOf = 0
		return post, nil
	}
	if ds.xaCastOf != in {
		if err := device.LaunchCastAct(d, ds.xa, in, n, b.gemmDT); err != nil {
			return 0, err
		}
		ds.xaCastOf = in
	}
	return 1, nil
}

// forward runs the decoder over ids, leaving the final-norm output in the
// head device's h buffer. It mirrors reference.forward op for op:
//
//	x = embed(ids)
//	for each layer: h = rmsnorm(x)·w; q,k,v = h·Wᵀ (+b); [qwen3: q,k = rmsnorm per head];
//	                rope(q,k); a = attention(q,k,v); x += a·Woᵀ (+b);
//	                h = rmsnorm(x)·w; x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ
//	h = rmsnorm(x)·w_final
//
// gemma adds: x ·= sqrt(hidden) after the embedding, (1 + w) norm weights
// (uploaded so), post-attention/feed-forward norms on each block's output
// before its residual add, gelu_tanh instead of silu, the local RoPE tables
// on gemma3's sliding layers, query_pre_attn_scalar and soft-capped scores
// (attention.go) and soft-capped logits (headChunk).
func (b *Backend) forward(ctx context.Context, ids []int32, probe probeFunc) error {
	if b.spec.Gemma4 != nil { // its own forward (gemma4.go)
		return b.forwardGemma4(ctx, ids, probe)
	}
	s := b.spec
	T, C, I := len(ids), s.Hidden, s.Intermediate
	eps := float32(s.Eps)
	ds := b.devs[0]
	if err := ds.d.CopyIn(ds.ids, i32Bytes(ids)); err != nil {
		return err
	}
	if err := device.LaunchEmbedGather(ds.d, ds.x, ds.embed, ds.embedDT, ds.ids, T, C, s.Vocab); err != nil {
		return err
	}
	if probe != nil {
		if err := probe(ds, -1, arch.SiteEmbed, ds.x, C); err != nil {
			return err
		}
	}
	if s.EmbedScale { // gemma: x · sqrt(hidden), the factor in fp32 (arch/gemma2.go)
		if err := device.LaunchScale(ds.d, ds.x, T*C, float32(math.Sqrt(float64(C)))); err != nil {
			return err
		}
	}
	pr := func(ds *devState, layer int, site string, p device.Ptr, w int) error {
		if probe == nil {
			return nil
		}
		return probe(ds, layer, site, p, w)
	}
	cur := ds
	move := func(to *devState) error { // hidden state to another device, through the host
		if to == cur {
			return nil
		}
		buf := make([]byte, T*C*4)
		if err := cur.d.CopyOut(buf, cur.x); err != nil {
			return err
		}
		if err := to.d.CopyIn(to.x, buf); err != nil {
			return err
		}
		cur = to
		return nil
	}
	for _, ds := range b.devs {
		for li := ds.first; li < ds.end; li++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := move(ds); err != nil {
				return err
			}
			lw := &ds.layers[li-ds.first]
			d := ds.d
			ds.xaCastOf = 0
			norm := func(out, in, w device.Ptr, rows, cols int) error {
				return device.LaunchRMSNorm(d, out, in, w, rows, cols, eps)
			}
			if err := norm(ds.h, ds.x, lw.attnNorm, T, C); err != nil {
				return err
			}
			if err := pr(ds, li, arch.SiteAttnNorm, ds.h, C); err != nil {
				return err
			}
			if lw.conv != 0 { // qwen3_5: a Gated DeltaNet layer
				if err := b.deltaNet(ds, lw, T); err != nil {
					return fmt.Errorf("layer %d: %w", li, err)
				}
			} else if err := b.selfAttention(ds, lw, li, T); err != nil {
				return err
			}
			if err := pr(ds, li, arch.SiteAttnOut, ds.proj, C); err != nil {
				return err
			}
			if err := device.LaunchAddInplace(d, ds.x, ds.proj, T*C); err != nil {
				return err
			}
			if err := norm(ds.h, ds.x, lw.mlpNorm, T, C); err != nil {
				return err
			}
			ds.xaCastOf = 0
			if err := pr(ds, li, arch.SiteMLPNorm, ds.h, C); err != nil {
				return err
			}
			if s.GptOss != nil {
				if err := b.gptOssMixture(ds, lw, T, func(p device.Ptr) error { return pr(ds, li, arch.SiteRouter, p, s.MoE.Experts) }); err != nil {
					return fmt.Errorf("layer %d: %w", li, err)
				}
			} else if lw.experts != nil {
				if err := b.mixture(ds, lw, T, func(p device.Ptr) error { return pr(ds, li, arch.SiteRouter, p, s.MoE.Experts) }); err != nil {
					return fmt.Errorf("layer %d: %w", li, err)
				}
			} else {
				if f := lw.lin[arch.ProjGateUp]; f != nil { // phi3: gate, up = chunk(gate_up_proj(h), 2)
					if err := b.linearParts(ds, f, ds.h, T, fusedPart{ds.gate, I}, fusedPart{ds.up, I}); err != nil {
						return fmt.Errorf("layer %d: %w", li, err)
					}
					if err := b.gateMul(d, ds.gate, ds.gate, ds.up, T*I); err != nil {
						return err
					}
				} else if w := lw.lin[arch.ProjGate]; lw.fuse[fuseGU] && fitsElems(T, 2*w.out) { // one GEMM, then silu(gate)·up from its rows
					if err := b.linearFused(ds, []*devLinear{w, lw.lin[arch.ProjUp]}, ds.h, T, ds.gu); err != nil {
						return fmt.Errorf("layer %d: %w", li, err)
					}
					if err := b.gateMulCat(d, ds.gate, ds.gu, T, w.out); err != nil {
						return err
					}
				} else {
					if err := b.linear(ds, lw.lin[arch.ProjGate], ds.h, T, ds.gate, 0); err != nil {
						return fmt.Errorf("layer %d: %w", li, err)
					}
					if err := b.linear(ds, lw.lin[arch.ProjUp], ds.h, T, ds.up, 0); err != nil {
						return fmt.Errorf("layer %d: %w", li, err)
					}
					if err := b.gateMul(d, ds.gate, ds.gate, ds.up, T*I); err != nil {
						return err
					}
				}
				if err := b.linear(ds, lw.lin[arch.ProjDown], ds.gate, T, ds.proj, 0); err != nil {
					return fmt.Errorf("layer %d: %w", li, err)
				}
			}
			if lw.postMLPNorm != 0 { // gemma: post_feedforward_layernorm
				if err := norm(ds.proj, ds.proj, lw.postMLPNorm, T, C); err != nil {
					return err
				}
			}
			if err := pr(ds, li, arch.SiteMLPOut, ds.proj, C); err != nil {
				return err
			}
			if err := device.LaunchAddInplace(d, ds.x, ds.proj, T*C); err != nil {
				return err
			}
			if err := pr(ds, li, arch.SiteLayerOut, ds.x, C); err != nil {
				return err
			}
		}
	}
	hd := b.devs[b.headDev]
	if err := move(hd); err != nil {
		return err
	}
	hd.xaCastOf = 0
	if err := device.LaunchRMSNorm(hd.d, hd.h, hd.x, hd.finalNorm, T, C, eps); err != nil {
		return err
	}
	return pr(hd, -1, arch.SiteFinalNorm, hd.h, C)
}

// selfAttention computes layer li's softmax attention of the normed rows
// ds.h into ds.proj (o_proj's output, after gemma's post norm).
// Reference: reference.selfAttention.
func (b *Backend) selfAttention(ds *devState, lw *layerDev, li, T int) error {
	s := b.spec
	C, H, KVH, D := s.Hidden, s.Heads, s.KVHeads, s.HeadDim
	d := ds.d
	norm := func(out, in, w device.Ptr, rows, cols int) error {
		return device.LaunchRMSNorm(d, out, in, w, rows, cols, float32(s.Eps))
	}
	if s.AttnOutputGate { // qwen3_5: q_proj → per head [query | gate]
		if err := b.linear(ds, lw.lin[arch.ProjQ], ds.h, T, ds.qg, lw.bias[arch.ProjQ]); err != nil {
			return fmt.Errorf("layer %d: %w", li, err)
		}
		if err := launchSplitQGate(d, ds.q, ds.qgate, ds.qg, T, H, D); err != nil {
			return err
		}
		for _, p := range []struct {
			proj arch.Proj
			out  device.Ptr
		}{{arch.ProjK, ds.k}, {arch.ProjV, ds.v}} {
			if err := b.linear(ds, lw.lin[p.proj], ds.h, T, p.out, lw.bias[p.proj]); err != nil {
				return fmt.Errorf("layer %d: %w", li, err)
			}
		}
	} else if f := lw.lin[arch.ProjQKV]; f != nil { // phi3: one fused projection
		if err := b.linearParts(ds, f, ds.h, T, fusedPart{ds.q, H * D}, fusedPart{ds.k, KVH * D}, fusedPart{ds.v, KVH * D}); err != nil {
			return fmt.Errorf("layer %d: %w", li, err)
		}
	} else if lw.fuse[fuseQKV] && fitsElems(T, (H+2*KVH)*D) { // one GEMM, then split (fuse.go)
		if err := b.linearFused(ds, []*devLinear{lw.lin[arch.ProjQ], lw.lin[arch.ProjK], lw.lin[arch.ProjV]}, ds.h, T, ds.qkv); err != nil {
			return fmt.Errorf("layer %d: %w", li, err)
		}
		if err := device.LaunchSplitQKV(d, ds.q, ds.k, ds.v, ds.qkv, lw.bias[arch.ProjQ], lw.bias[arch.ProjK], lw.bias[arch.ProjV],
			T, H*D, KVH*D); err != nil {
			return err
		}
	} else {
		for _, p := range []struct {
			proj arch.Proj
			out  device.Ptr
		}{{arch.ProjQ, ds.q}, {arch.ProjK, ds.k}, {arch.ProjV, ds.v}} {
			if err := b.linear(ds, lw.lin[p.proj], ds.h, T, p.out, lw.bias[p.proj]); err != nil {
				return fmt.Errorf("layer %d: %w", li, err)
			}
		}
	}
	if lw.qNorm != 0 {
		if err := norm(ds.q, ds.q, lw.qNorm, T*H, D); err != nil {
			return err
		}
		if err := norm(ds.k, ds.k, lw.kNorm, T*KVH, D); err != nil {
			return err
		}
	}
	cs, sn := ds.cos, ds.sin
	if s.LocalRope(li) { // gemma3: sliding layers use rotary_emb_local
		cs, sn = ds.cosL, ds.sinL
	}
	if s.RotaryDim != D { // qwen3_5: partial rotary
		R := (s.RotaryDim + 1) / 2
		if err := launchRopePartial(d, ds.q, cs, sn, T, H, D, R); err != nil {
			return err
		}
		if err := launchRopePartial(d, ds.k, cs, sn, T, KVH, D, R); err != nil {
			return err
		}
	} else {
		if err := device.LaunchRope(d, ds.q, cs, sn, T, H, D); err != nil {
			return err
		}
		if err := device.LaunchRope(d, ds.k, cs, sn, T, KVH, D); err != nil {
			return err
		}
	}
	if b.kv != nil { // the FP8 KV cache: K after RoPE (and k-norm), V as projected
		if err := b.kvCache(ds, li, T); err != nil {
			return err
		}
	}
	if err := b.attend(ds, T, b.spec.Window(li), lw.sinks); err != nil {
		return fmt.Errorf("layer %d: %w", li, err)
	}
	if s.AttnOutputGate { // attn_output · sigmoid(gate)
		if err := launchSigmoidMul(d, ds.att, ds.qgate, T*H*D); err != nil {
			return err
		}
	}
	if err := b.linear(ds, lw.lin[arch.ProjO], ds.att, T, ds.proj, lw.bias[arch.ProjO]); err != nil {
		return fmt.Errorf("layer %d: %w", li, err)
	}
	if lw.postAttnNorm != 0 { // gemma: post_attention_layernorm before the residual add
		if err := norm(ds.proj, ds.proj, lw.postAttnNorm, T, C); err != nil {
			return err
		}
	}
	return nil
}

// headChunk computes logits rows [r0, r1) of the head device's h into its
// logits buffer: logits = rows(h)·W_headᵀ.
func (b *Backend) headChunk(r0, r1 int) error {
	hd := b.devs[b.headDev]
	C := b.spec.Hidden
	in := hd.h + device.Ptr(r0*C*4)
	hd.xaCastOf = 0
	if err := b.linear(hd, hd.head, in, r1-r0, hd.logits, 0); err != nil {
		return err
	}
	if c := b.spec.FinalSoftcap; c > 0 { // gemma2: logits = tanh(logits/cap)·cap
		return device.LaunchSoftcap(hd.d, hd.logits, (r1-r0)*b.spec.Vocab, float32(c))
	}
	return nil
}

// gateMul writes out = act(gate) ⊙ up over n elements with the family's
// MLP activation: silu, or gemma's gelu_pytorch_tanh (Spec.GeluTanh).
func (b *Backend) gateMul(d device.Device, out, gate, up device.Ptr, n int) error {
	if b.spec.GeluTanh {
		return device.LaunchGeluTanhMul(d, out, gate, up, n)
	}
	return device.LaunchSiluMul(d, out, gate, up, n)
}

// gateMulCat is gateMul on fused gate|up rows gu[T][2I].
func (b *Backend) gateMulCat(d device.Device, out, gu device.Ptr, T, I int) error {
	if b.spec.GeluTanh {
		return device.LaunchGeluTanhMulCat(d, out, gu, T, I)
	}
	return device.LaunchSiluMulCat(d, out, gu, T, I)
}

// maxKernelElems bounds the element count of one activation buffer: the
// elementwise kernels (embed_gather, cast_act, add_inplace, silu_mul, rope,
// add_bias_rows) index it with a 32-bit int in a grid-stride loop whose
// step is at most device.GridStride's 4096 blocks × 256 threads, and that index must
// not overflow.
const maxKernelElems = math.MaxInt32 - 4096*256

// fitsElems reports whether a [T][width] buffer is within the 32-bit
// indexing of the elementwise kernels (a fused GEMM's wider output falls
// back to separate GEMMs when it is not).
func fitsElems(T, width int) bool { return int64(T)*int64(width) <= maxKernelElems }

// checkElems refuses windows whose activation buffers the 32-bit kernels
// cannot index (e.g. 131,072 tokens × an intermediate size of 28,672).
func checkElems(s *arch.Spec, T int) error {
	widest := max(s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.MLPWidth())
	if g := s.Gemma4; g != nil { // per-layer head sizes, per-layer inputs [T][layers·P]
		_, q, kv := gemma4Dims(s)
		widest = max(widest, q, kv, s.Layers*g.PLE)
	}
	if n := int64(T) * int64(widest); n > maxKernelElems {
		return fmt.Errorf("%d tokens × width %d = %d activations per buffer exceed the kernels' 32-bit indexing (%d); use a shorter context", T, widest, n, maxKernelElems)
	}
	return nil
}

// check validates a window.
func (b *Backend) check(w backends.Window) error {
	if b.closed {
		return fmt.Errorf("%s: backend is closed", b.opt.Name)
	}
	if b.broken != nil {
		return fmt.Errorf("%s: backend unusable after a failed buffer reallocation: %w", b.opt.Name, b.broken)
	}
	if err := w.Validate(b.spec.Vocab); err != nil {
		return fmt.Errorf("%s: %w", b.opt.Name, err)
	}
	T := len(w.Tokens)
	if err := b.spec.CheckContext(T); err != nil {
		return fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	if err := b.spec.CheckTokens(w.Tokens); err != nil { // gemma4's multimodal placeholders
		return fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	if err := checkElems(b.spec, T); err != nil {
		return fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	if err := b.grow(T); err != nil {
		return fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	return nil
}

// Score implements backends.Backend: per-position NLL (and KL, top-k) from
// the fused logits_stats kernel; only 4 bytes per target (plus 4 for KL
// and 4 per top-k id) come back from the device.
func (b *Backend) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return backends.Scores{}, err
	}
	if err := b.check(w); err != nil {
		return backends.Scores{}, err
	}
	V := b.spec.Vocab
	if err := req.Validate(V); err != nil {
		return backends.Scores{}, fmt.Errorf("%s: %w", b.opt.Name, err)
	}
	sc := backends.NewScores(w, req)
	lo, hi := req.LogitsRange(w)
	if lo >= hi {
		return sc, nil
	}
	if err := b.forward(ctx, w.Tokens, nil); err != nil {
		return backends.Scores{}, fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	hd := b.devs[b.headDev]
	d := hd.d
	if req.TopK > hd.topCap {
		if hd.top != 0 {
			if err := d.Free(hd.top); err != nil {
				return backends.Scores{}, err
			}
		}
		hd.top, hd.topCap = 0, 0 // a failed Alloc below must not leave a capacity without a buffer
		p, err := d.Alloc(int64(b.opt.HeadRows) * int64(req.TopK) * 4)
		if err != nil {
			return backends.Scores{}, fmt.Errorf("%s: top-%d buffer: %w", b.opt.Name, req.TopK, err)
		}
		hd.top, hd.topCap = p, req.TopK
	}
	R := b.opt.HeadRows
	row := make([]float64, V)
	for r0 := lo; r0 < hi; r0 += R {
		if err := ctx.Err(); err != nil {
			return backends.Scores{}, err
		}
		r1 := min(r0+R, hi)
		n := r1 - r0
		if err := b.headChunk(r0, r1); err != nil {
			return backends.Scores{}, fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
		}
		targets := make([]int32, n)
		for i := range targets {
			pos := r0 + i
			targets[i] = -1
			if _, ok := w.Target(pos); ok {
				targets[i] = w.Tokens[pos+1]
			}
		}
		if err := d.CopyIn(hd.targets, i32Bytes(targets)); err != nil {
			return backends.Scores{}, err
		}
		baseKind := int32(device.BaseNone)
		if req.Base != nil {
			baseKind = device.BaseF32
			buf := make([]byte, n*V*4)
			for i := 0; i < n; i++ {
				pos := r0 + i
				ki := req.KLIndex(w, pos)
				if err := req.Base.LogProbs(ki, row); err != nil {
					return backends.Scores{}, fmt.Errorf("%s: window %d: base log-probs of KL position %d: %w", b.opt.Name, w.Index, ki, err)
				}
				for c, v := range row {
					if math.IsNaN(v) || v > 0 {
						return backends.Scores{}, fmt.Errorf("%s: window %d: invalid base log-prob %v at KL position %d id %d", b.opt.Name, w.Index, v, ki, c)
					}
					binary.LittleEndian.PutUint32(buf[4*(i*V+c):], math.Float32bits(float32(v)))
				}
				if !req.KLAllPositions {
					sc.BaseNLL[ki] = -row[w.Tokens[pos+1]]
				}
			}
			if err := d.CopyIn(hd.base, buf); err != nil {
				return backends.Scores{}, err
			}
		}
		var baseP device.Ptr
		if baseKind != device.BaseNone {
			baseP = hd.base
		}
		if err := device.LaunchLogitsStats(d, hd.logits, n, V, hd.targets, hd.nll, baseP, baseKind, 0, hd.kl, req.TopK, hd.top); err != nil {
			return backends.Scores{}, err
		}
		nll := make([]byte, n*4)
		if err := d.CopyOut(nll, hd.nll); err != nil {
			return backends.Scores{}, err
		}
		var kl, top []byte
		if req.Base != nil {
			kl = make([]byte, n*4)
			if err := d.CopyOut(kl, hd.kl); err != nil {
				return backends.Scores{}, err
			}
		}
		if req.TopK > 0 {
			top = make([]byte, n*req.TopK*4)
			if err := d.CopyOut(top, hd.top); err != nil {
				return backends.Scores{}, err
			}
		}
		for i := 0; i < n; i++ {
			pos := r0 + i
			if ti, _ := w.Target(pos); targets[i] >= 0 {
				sc.NLL[ti] = float64(math.Float32frombits(binary.LittleEndian.Uint32(nll[4*i:])))
				for k := 0; k < req.TopK; k++ {
					sc.Top[ti*req.TopK+k] = int32(binary.LittleEndian.Uint32(top[4*(i*req.TopK+k):]))
				}
			}
			if req.Base != nil {
				sc.KL[req.KLIndex(w, pos)] = float64(math.Float32frombits(binary.LittleEndian.Uint32(kl[4*i:])))
			}
		}
	}
	for i, v := range sc.NLL {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return backends.Scores{}, fmt.Errorf("%s: window %d target position %d: NLL is %v", b.opt.Name, w.Index, w.First+i, v)
		}
	}
	return sc, nil
}

// LogProbs implements backends.LogProber: logits rows are normalized on
// the device (kernel log_softmax_rows: fp32 log-sum-exp, the one of
// logits_stats) and copied back as fp32 log-probs (this path moves 4·V
// bytes per position, inherent to saving a base model's distribution; no
// per-value work is left on the host but the conversion to float64).
func (b *Backend) LogProbs(ctx context.Context, w backends.Window, from int, emit func(pos int, lp []float64) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.check(w); err != nil {
		return err
	}
	T, V := len(w.Tokens), b.spec.Vocab
	if err := w.CheckFrom(from); err != nil {
		return fmt.Errorf("%s: %w", b.opt.Name, err)
	}
	if from == T {
		return nil
	}
	if err := b.forward(ctx, w.Tokens, nil); err != nil {
		return fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	hd := b.devs[b.headDev]
	R := b.opt.HeadRows
	buf := make([]byte, R*V*4)
	lp := make([]float64, V)
	for r0 := from; r0 < T; r0 += R {
		r1 := min(r0+R, T)
		if err := b.headChunk(r0, r1); err != nil {
			return err
		}
		if err := device.LaunchLogSoftmaxRows(hd.d, hd.logits, r1-r0, V); err != nil {
			return err
		}
		if err := hd.d.CopyOut(buf[:(r1-r0)*V*4], hd.logits); err != nil {
			return err
		}
		for i := 0; i < r1-r0; i++ {
			for c := 0; c < V; c++ {
				lp[c] = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(i*V+c):])))
			}
			if err := emit(r0+i, lp); err != nil {
				return err
			}
		}
	}
	return nil
}

// Probe implements backends.Prober with the sites of package arch.
func (b *Backend) Probe(ctx context.Context, w backends.Window, at []backends.Point) (map[backends.Point][]float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(w); err != nil {
		return nil, err
	}
	want := map[backends.Point]bool{}
	for _, p := range at {
		ok := false
		switch p.Site {
		case arch.SiteEmbed, arch.SiteFinalNorm:
			ok = p.Layer == -1
		case arch.SiteAttnNorm, arch.SiteAttnOut, arch.SiteMLPNorm, arch.SiteMLPOut, arch.SiteLayerOut:
			ok = p.Layer >= 0 && p.Layer < b.spec.Layers
		case arch.SiteRouter:
			ok = p.Layer >= 0 && p.Layer < b.spec.Layers && b.spec.Sparse(p.Layer)
		}
		if !ok {
			return nil, fmt.Errorf("%s: unknown probe point layer %d site %q", b.opt.Name, p.Layer, p.Site)
		}
		want[p] = true
	}
	T := len(w.Tokens)
	out := map[backends.Point][]float64{}
	probe := func(ds *devState, layer int, site string, p device.Ptr, width int) error {
		pt := backends.Point{Layer: layer, Site: site}
		if !want[pt] {
			return nil
		}
		buf := make([]byte, T*width*4)
		if err := ds.d.CopyOut(buf, p); err != nil {
			return err
		}
		v := make([]float64, T*width)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
		}
		out[pt] = v
		return nil
	}
	if err := b.forward(ctx, w.Tokens, probe); err != nil {
		return nil, fmt.Errorf("%s: window %d: %w", b.opt.Name, w.Index, err)
	}
	return out, nil
}

// kvCache rounds layer li's keys and values through its FP8 KV cache
// (per tensor: one launch each; per head: one per key/value head).
func (b *Backend) kvCache(ds *devState, li, T int) error {
	KVH, D := b.spec.KVHeads, b.spec.HeadDim
	for j, x := range []device.Ptr{ds.k, ds.v} {
		s := b.kv[li][j]
		if len(s) == 1 {
			if err := device.LaunchKVQuant(ds.d, x, T, KVH, D, -1, s[0]); err != nil {
				return err
			}
			continue
		}
		for h, sh := range s {
			if err := device.LaunchKVQuant(ds.d, x, T, KVH, D, h, sh); err != nil {
				return err
			}
		}
	}
	return nil
}
