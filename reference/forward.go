package reference

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/detmath"
	"github.com/qppl/qppl/gemm"
	"github.com/qppl/qppl/quant"
)

// workspace holds every buffer of one forward pass, reused across layers
// and windows (grown when a longer window arrives). Shapes are for a window
// of T tokens.
type workspace struct {
	T        int
	x        []float64      // [T][C] residual stream
	h        []float64      // [T][C] normed input of the current block; final norm output at the end
	xin      []float64      // [T][max(C,H·D,I)] copy of a Linear's input for activation quantization
	q        []float64      // [T][H·D]
	k, v     []float64      // [T][KV·D]
	att      []float64      // [T][H·D] attention output before o_proj
	proj     []float64      // [T][C] o_proj / down_proj output
	gate, up []float64      // [T][W]: MLP activations (W = I, or wider with experts); router logits
	moeIn    []float64      // [T][C] rows routed to one expert (MoE models only)
	fused    []float64      // [T][max(H·D+2·KV·D, 2·I)] output of a fused projection (phi3 only)
	moeOut   []float64      // [T][C] that expert's output
	scores   [][]float64    // per attention worker: [heads·attnBlock][T] one task's scores, then probabilities
	attQ     [][]float64    // per attention worker: [heads·attnBlock][D] the task's query rows, stacked
	attO     [][]float64    // per attention worker: [heads·attnBlock][D] the task's output rows, stacked
	attMul   []*gemm.Engine // per attention worker: its single-goroutine products
	cos, sin []float64      // [T][D/2] RoPE tables
	cosL     []float64      // [T][D/2] local RoPE tables (gemma3 sliding layers)
	sinL     []float64
	w        []float64 // [out·in] decoded weight of the current Linear
	head     []float64 // [V][C] decoded untied lm_head (nil when tied)
	wblock   []float64 // [vocabBlock][C] decoded block of a tied head (wholeDecode only)
	logits   []float64 // [headChunk][V]
	// qwen3_5: qg [T][2·H·D] the gated q_proj output, gate [T][H·D] its
	// gate half; dn the Gated DeltaNet's buffers (nil otherwise).
	qg, attGate []float64
	dn          *deltaWorkspace
	// gemma4 only: per-layer inputs [T][L·P], their table rows, the
	// per-layer gate [T][P], and the keys and values of the layers that
	// KV-shared layers read (2·layer: k, 2·layer+1: v).
	g4ple, g4tmp, g4gate []float64
	g4kv                 [][]float64
	g4h1                 []float64 // [T][C] a MoE layer's normed dense MLP output
}

// headChunk is the number of positions whose logits are materialised at
// once. Any value gives the same bits (package gemm sums every element in
// one fixed order); it trades logits memory against re-reading the head.
const headChunk = 128

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func (ws *workspace) ensure(m *model, T int) {
	d := m.dims
	ws.T = T
	ws.x = grow(ws.x, T*d.C)
	ws.h = grow(ws.h, T*d.C)
	xinW := max(d.C, d.H*d.D, d.W)
	if la := m.spec.LinearAttn; la != nil {
		xinW = max(xinW, la.ValueHeads*la.ValueDim) // out_proj's input
	}
	ws.xin = grow(ws.xin, T*xinW)
	ws.q = grow(ws.q, T*d.H*d.D)
	ws.k = grow(ws.k, T*d.KV*d.D)
	ws.v = grow(ws.v, T*d.KV*d.D)
	ws.att = grow(ws.att, T*d.H*d.D)
	ws.proj = grow(ws.proj, T*d.C)
	ws.gate = grow(ws.gate, T*d.W)
	ws.up = grow(ws.up, T*d.W)
	if m.spec.FusedQKV || m.spec.FusedGateUp {
		ws.fused = grow(ws.fused, T*max(d.H*d.D+2*d.KV*d.D, 2*d.I))
	}
	if m.spec.MoE != nil {
		ws.moeIn = grow(ws.moeIn, T*d.C)
		ws.moeOut = grow(ws.moeOut, T*d.C)
	}
	if len(ws.scores) != max(1, m.threads) {
		ws.scores = make([][]float64, max(1, m.threads))
		ws.attQ = make([][]float64, len(ws.scores))
		ws.attO = make([][]float64, len(ws.scores))
		ws.attMul = make([]*gemm.Engine, len(ws.scores))
		for i := range ws.attMul {
			ws.attMul[i] = m.mul.Worker()
		}
	}
	ws.cos = grow(ws.cos, T*d.D/2)
	ws.sin = grow(ws.sin, T*d.D/2)
	if m.invFreqLocal != nil {
		ws.cosL = grow(ws.cosL, T*d.D/2)
		ws.sinL = grow(ws.sinL, T*d.D/2)
	}
	ws.w = grow(ws.w, m.scratchSize())
	ws.logits = grow(ws.logits, headChunk*d.V)
	if m.head == nil && m.wholeDecode {
		ws.wblock = grow(ws.wblock, m.vocabBlock*d.C)
	}
}

// probeFunc receives a copy-on-demand view of an activation [T][width].
type probeFunc func(layer int, site string, data []float64, width int)

// forward runs the decoder over ids and leaves the final-norm output in
// ws.h. probe, when non-nil, is called at every arch Site.
func (m *model) forward(ctx context.Context, ws *workspace, ids []int32, probe probeFunc) error {
	d := m.dims
	T := len(ids)
	ws.ensure(m, T)
	if m.spec.AttnOutputGate {
		ws.qg = grow(ws.qg, T*2*d.H*d.D)
		ws.attGate = grow(ws.attGate, T*d.H*d.D)
	}
	if m.spec.LinearAttn != nil {
		if ws.dn == nil {
			ws.dn = &deltaWorkspace{}
		}
		ws.dn.ensure(m.spec, T)
	}
	if probe == nil {
		probe = func(int, string, []float64, int) {}
	}
	if m.g4 != nil {
		return m.forwardGemma4(ctx, ws, ids, probe)
	}

	// x = embed_tokens(input_ids)
	if err := m.embedRows(ws.x, ids); err != nil {
		return err
	}
	probe(-1, arch.SiteEmbed, ws.x, d.C) // embed_tokens' output, before gemma's scaling
	if m.spec.EmbedScale {               // gemma: x · sqrt(hidden), in float64 (see arch/gemma2.go)
		f := math.Sqrt(float64(d.C))
		for i := range ws.x[:T*d.C] {
			ws.x[i] *= f
		}
	}

	// RoPE tables: freqs = pos · inv_freq; cos/sin of emb = cat(freqs, freqs),
	// times the rope's attention scaling (yarn: arch.RopeAttentionFactor).
	half := d.D / 2
	af := arch.RopeAttentionFactor(m.spec.Config.RopeScaling)
	for t := 0; t < T; t++ {
		for i, f := range m.invFreq {
			a := float64(t) * f
			ws.sin[t*half+i], ws.cos[t*half+i] = detmath.Sincos(a)
			if af != 1 {
				ws.sin[t*half+i] *= af
				ws.cos[t*half+i] *= af
			}
		}
		for i, f := range m.invFreqLocal {
			a := float64(t) * f
			ws.sinL[t*half+i], ws.cosL[t*half+i] = detmath.Sincos(a)
		}
	}

	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &m.layers[li]

		// Attention block.
		m.rmsNormRows(ws.h, ws.x, l.attnNorm, T, d.C, d.eps)
		probe(li, arch.SiteAttnNorm, ws.h, d.C)
		if l.delta != nil { // qwen3_5: a Gated DeltaNet layer
			if err := m.deltaNet(ws, l, T); err != nil {
				return err
			}
		} else if err := m.selfAttention(ws, l, li, T, probe); err != nil {
			return err
		}
		probe(li, arch.SiteAttnOut, ws.proj, d.C)
		m.addRows(ws.x, ws.proj, T, d.C)

		// MLP block.
		m.rmsNormRows(ws.h, ws.x, l.mlpNorm, T, d.C, d.eps)
		probe(li, arch.SiteMLPNorm, ws.h, d.C)
		if l.gptOss != nil {
			if err := m.gptOssMixture(ws, l, T, func(logits []float64) { probe(li, arch.SiteRouter, logits, m.spec.MoE.Experts) }); err != nil {
				return err
			}
		} else if l.experts != nil {
			if err := m.mixture(ws, l, T, func(logits []float64) { probe(li, arch.SiteRouter, logits, m.spec.MoE.Experts) }); err != nil {
				return err
			}
		} else {
			if f := l.lin[arch.ProjGateUp]; f != nil { // phi3: gate, up = chunk(gate_up_proj(h), 2)
				if err := m.fused(ws, f, ws.h, T, d.C, fusedPart{ws.gate, d.I}, fusedPart{ws.up, d.I}); err != nil {
					return err
				}
			} else {
				if err := m.linear(ws, l.lin[arch.ProjGate], nil, ws.h, T, d.C, ws.gate, d.I); err != nil {
					return err
				}
				if err := m.linear(ws, l.lin[arch.ProjUp], nil, ws.h, T, d.C, ws.up, d.I); err != nil {
					return err
				}
			}
			if m.spec.GeluTanh {
				for i, g := range ws.gate[:T*d.I] {
					ws.gate[i] = geluTanh(g) * ws.up[i]
				}
			} else {
				// silu(g)·u = g/(1+exp(−g))·u, the exponentials computed as a vector.
				m.parallelRows(T, d.I, func(t0, t1 int) {
					lo, hi := t0*d.I, t1*d.I
					e := ws.xin[lo:hi]
					for i, g := range ws.gate[lo:hi] {
						e[i] = -g
					}
					detmath.ExpTo(e, e)
					up := ws.up[lo:hi]
					for i, g := range ws.gate[lo:hi] {
						ws.gate[lo+i] = g / (1 + e[i]) * up[i]
					}
				})
			}
			if err := m.linear(ws, l.lin[arch.ProjDown], nil, ws.gate, T, d.I, ws.proj, d.C); err != nil {
				return err
			}
		}
		if l.postMLPNorm != nil { // gemma: post_feedforward_layernorm
			rmsNorm(ws.proj, ws.proj, l.postMLPNorm, T, d.C, d.eps)
		}
		probe(li, arch.SiteMLPOut, ws.proj, d.C)
		m.addRows(ws.x, ws.proj, T, d.C)
		probe(li, arch.SiteLayerOut, ws.x, d.C)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.rmsNormRows(ws.h, ws.x, m.norm, T, d.C, d.eps)
	probe(-1, arch.SiteFinalNorm, ws.h, d.C)
	return nil
}

// selfAttention computes layer li's softmax attention block of the normed
// rows ws.h into ws.proj (o_proj's output, after gemma's post norm).
func (m *model) selfAttention(ws *workspace, l *layerWeights, li, T int, probe probeFunc) error {
	d := m.dims
	hd, kvd := d.H*d.D, d.KV*d.D
	if m.spec.AttnOutputGate { // qwen3_5: q_proj → per head [query | gate]
		if err := m.linear(ws, l.lin[arch.ProjQ], l.bias[arch.ProjQ], ws.h, T, d.C, ws.qg, 2*hd); err != nil {
			return err
		}
		for t := 0; t < T; t++ {
			for h := 0; h < d.H; h++ {
				src := ws.qg[t*2*hd+h*2*d.D:]
				copy(ws.q[t*hd+h*d.D:t*hd+(h+1)*d.D], src[:d.D])
				copy(ws.attGate[t*hd+h*d.D:t*hd+(h+1)*d.D], src[d.D:2*d.D])
			}
		}
		if err := m.linear(ws, l.lin[arch.ProjK], l.bias[arch.ProjK], ws.h, T, d.C, ws.k, kvd); err != nil {
			return err
		}
		if err := m.linear(ws, l.lin[arch.ProjV], l.bias[arch.ProjV], ws.h, T, d.C, ws.v, kvd); err != nil {
			return err
		}
	} else if f := l.lin[arch.ProjQKV]; f != nil { // phi3: one fused projection
		if err := m.fused(ws, f, ws.h, T, d.C, fusedPart{ws.q, hd}, fusedPart{ws.k, kvd}, fusedPart{ws.v, kvd}); err != nil {
			return err
		}
	} else {
		if err := m.linear(ws, l.lin[arch.ProjQ], l.bias[arch.ProjQ], ws.h, T, d.C, ws.q, hd); err != nil {
			return err
		}
		if err := m.linear(ws, l.lin[arch.ProjK], l.bias[arch.ProjK], ws.h, T, d.C, ws.k, kvd); err != nil {
			return err
		}
		if err := m.linear(ws, l.lin[arch.ProjV], l.bias[arch.ProjV], ws.h, T, d.C, ws.v, kvd); err != nil {
			return err
		}
	}
	if l.qNorm != nil { // qwen3: RMSNorm over each head, before RoPE
		rmsNorm(ws.q, ws.q, l.qNorm, T*d.H, d.D, d.eps)
		rmsNorm(ws.k, ws.k, l.kNorm, T*d.KV, d.D, d.eps)
	}
	cos, sin := ws.cos, ws.sin
	if m.spec.LocalRope(li) { // gemma3: sliding layers use rotary_emb_local
		cos, sin = ws.cosL, ws.sinL
	}
	m.parallelRows(T, (d.H+d.KV)*d.D, func(t0, t1 int) {
		half := d.D / 2
		rope(ws.q[t0*hd:], cos[t0*half:], sin[t0*half:], t1-t0, d.H, d.D, len(m.invFreq))
		rope(ws.k[t0*kvd:], cos[t0*half:], sin[t0*half:], t1-t0, d.KV, d.D, len(m.invFreq))
	})
	probe(li, arch.SiteKCache, ws.k, kvd)
	probe(li, arch.SiteVCache, ws.v, kvd)
	if m.kvQuant { // the FP8 KV cache: K after RoPE (and k-norm), V as projected
		quant.FakeQuantKV(ws.k[:T*kvd], l.kv.K, T, d.KV, d.D)
		quant.FakeQuantKV(ws.v[:T*kvd], l.kv.V, T, d.KV, d.D)
	}
	m.attention(ws, T, m.spec.Window(li), m.spec.AttnScale, m.spec.AttnSoftcap, l.sinks)
	if m.spec.AttnOutputGate { // attn_output · sigmoid(gate)
		for i, g := range ws.attGate[:T*hd] {
			ws.att[i] *= 1 / (1 + detmath.Exp(-g))
		}
	}
	if err := m.linear(ws, l.lin[arch.ProjO], l.bias[arch.ProjO], ws.att, T, hd, ws.proj, d.C); err != nil {
		return err
	}
	if l.postAttnNorm != nil { // gemma: post_attention_layernorm before the residual add
		rmsNorm(ws.proj, ws.proj, l.postAttnNorm, T, d.C, d.eps)
	}
	return nil
}

// linear computes out[T][outW] = in[T][inW] · Wᵀ (+ bias), decoding W block
// by block into the product's panels (quant.RowDequantizer) or else whole
// into the scratch buffer, and fake-quantizing a copy of in when l
// prescribes activation quantization.
func (m *model) linear(ws *workspace, l quant.Linear, bias []float64, in []float64, T, inW int, out []float64, outW int) error {
	x := in[:T*inW]
	if aq := l.InputQuantizer(); aq != nil {
		x = ws.xin[:T*inW]
		copy(x, in[:T*inW])
		if err := aq.Quantize(x, T, inW); err != nil {
			return fmt.Errorf("reference: %s: input quantization: %w", l.Module(), err)
		}
	}
	if rd, ok := l.(quant.RowDequantizer); ok && !m.wholeDecode {
		// Decoded straight into the product's panels, a block of rows at
		// a time: no float64 copy of the whole weight.
		if err := m.mul.MulNTRows(T, outW, inW, x, inW, rd.DequantizeRows, out, outW); err != nil {
			return fmt.Errorf("reference: %s: %w", l.Module(), err)
		}
	} else {
		w := ws.w[:outW*inW]
		if err := l.Dequantize(w); err != nil {
			return fmt.Errorf("reference: %s: %w", l.Module(), err)
		}
		m.mul.MulNT(T, outW, inW, x, inW, w, inW, out, outW)
	}
	if bias != nil {
		for t := 0; t < T; t++ {
			row := out[t*outW : (t+1)*outW]
			for j, b := range bias {
				row[j] += b
			}
		}
	}
	return nil
}

// parallelWork is the number of elements (rows·width) below which
// parallelRows runs on the calling goroutine.
const parallelWork = 1 << 15

// parallelRows calls fn over rows [0, rows) of width width, split into
// contiguous ranges, one per goroutine (up to the model's threads). fn must
// compute every row on its own, so the bits do not depend on the split.
func (m *model) parallelRows(rows, width int, fn func(r0, r1 int)) {
	workers := min(m.threads, rows)
	if workers <= 1 || rows*width < parallelWork {
		fn(0, rows)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		r0, r1 := rows*w/workers, rows*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(r0, r1)
		}()
	}
	wg.Wait()
}

// rmsNormRows is rmsNorm over rows spread by parallelRows (dst may alias
// x).
func (m *model) rmsNormRows(dst, x, w []float64, rows, n int, eps float64) {
	m.parallelRows(rows, n, func(r0, r1 int) {
		rmsNorm(dst[r0*n:r1*n], x[r0*n:r1*n], w, r1-r0, n, eps)
	})
}

// addRows adds src to dst over rows of width n: the residual connection.
func (m *model) addRows(dst, src []float64, rows, n int) {
	m.parallelRows(rows, n, func(r0, r1 int) {
		d := dst[r0*n : r1*n]
		for i, v := range src[r0*n : r1*n] {
			d[i] += v
		}
	})
}

// embedRows decodes the embedding rows of ids into x ([len(ids)][C]),
// positions spread by parallelRows.
func (m *model) embedRows(x []float64, ids []int32) error {
	C := m.dims.C
	errs := make([]error, len(ids))
	m.parallelRows(len(ids), C, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			id := int(ids[t])
			errs[t] = m.embed.Rows(id, id+1, x[t*C:(t+1)*C])
		}
	})
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("reference: %w", err)
		}
	}
	return nil
}

// geluTanh is gelu_pytorch_tanh: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// rmsNorm is LlamaRMSNorm over rows of width n: dst = w ⊙ (x · 1/sqrt(mean(x²)+eps)).
// dst may alias x.
func rmsNorm(dst, x, w []float64, rows, n int, eps float64) {
	for r := 0; r < rows; r++ {
		xr := x[r*n : (r+1)*n]
		var ss float64
		for _, v := range xr {
			ss += float64(v * v) // no fused multiply-add: the same bits on every GOARCH
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		dr := dst[r*n : (r+1)*n]
		for i, v := range xr {
			dr[i] = w[i] * (v * inv)
		}
	}
}

// rope applies rotate-half RoPE in place to x [T][heads·D]:
// x·cos + rotate_half(x)·sin with rotate_half(x) = cat(-x2, x1), over the
// first 2·rot dimensions of each head (rot = D/2 unless partial rotary,
// qwen3_5's apply_rotary_pos_emb: the rest pass unchanged). The tables
// hold D/2 entries per position, the first rot used.
func rope(x, cos, sin []float64, T, heads, D, rot int) {
	half := D / 2
	for t := 0; t < T; t++ {
		c := cos[t*half : t*half+rot]
		s := sin[t*half : t*half+rot]
		for h := 0; h < heads; h++ {
			v := x[(t*heads+h)*D : (t*heads+h+1)*D]
			for i := 0; i < rot; i++ {
				a, b := v[i], v[i+rot]
				v[i] = float64(a*c[i]) - float64(b*s[i]) // products rounded: never fused
				v[i+rot] = float64(b*c[i]) + float64(a*s[i])
			}
		}
	}
}

// attnBlock is the number of query rows attention computes at once; a
// block only computes the key columns it can see.
const attnBlock = 64

// attention computes causal grouped-query attention: for each query head h
// (key/value head g = h/(H/KV)), att_h = softmax(q_h·k_gᵀ/sqrt(D), causal)·v_g.
// The work is split into (heads, block of attnBlock query rows) tasks that
// the workers take dynamically, the costliest (last) blocks first; each
// worker has its own score buffer and products. A task's result does not
// depend on which worker computes it, nor on how many heads it stacks.
func (m *model) attention(ws *workspace, T, window int, scale, softcap float64, sinks []float64) {
	m.attentionDims(ws, T, window, scale, softcap, sinks, m.dims)
}

// attentionDims is attention with the head size and key/value heads of d
// (gemma4's layers differ).
func (m *model) attentionDims(ws *workspace, T, window int, scale, softcap float64, sinks []float64, d dims) {
	blocks := (T + attnBlock - 1) / attnBlock
	// A task stacks the query heads that share a key/value head into one
	// q·kᵀ and one p·v product (their keys and values packed once, more
	// rows for the micro-kernel), unless that leaves fewer than four tasks
	// per worker: then a task is one head.
	nh := d.H / d.KV
	if d.KV*blocks < 4*len(ws.scores) {
		nh = 1
	}
	units := d.H / nh
	tasks := units * blocks
	rows := min(T, attnBlock)
	for w := range ws.scores {
		ws.scores[w] = grow(ws.scores[w], nh*rows*T)
		if nh > 1 {
			ws.attQ[w] = grow(ws.attQ[w], nh*rows*d.D)
			ws.attO[w] = grow(ws.attO[w], nh*rows*d.D)
		}
	}
	run := func(w, t int) {
		b, u := blocks-1-t/units, t%units
		r0 := b * attnBlock
		attendBlock(ws, w, u*nh, nh, r0, min(T, r0+attnBlock), T, window, scale, softcap, sinks, d)
	}
	workers := min(len(ws.scores), tasks)
	if workers <= 1 {
		for t := 0; t < tasks; t++ {
			run(0, t)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := int(next.Add(1)) - 1; t < tasks; t = int(next.Add(1)) - 1 {
				run(w, t)
			}
		}()
	}
	wg.Wait()
}

// attendBlock computes query rows [r0, r1) of heads [h0, h0+nh) (which
// share one key/value head) of attention into ws.att with worker w's
// buffers and products: q·kᵀ for the nh·(r1-r0) query rows (stacked head
// by head when nh > 1) in one product, softmax per row, p·v in one
// product. Keys outside the window get probability 0 (as exp(-inf)
// would). Scores are q·k·scale (arch.Spec.AttnScale), then
// cap·tanh(s/cap) when softcap > 0 (gemma2). sinks (nil: none) are
// gpt-oss's per-head attention sink logits (self_attn.sinks): one more term
// exp(sink) of each row's softmax denominator, which no value is weighted
// by (eager_attention_forward of modeling_gpt_oss.py).
func attendBlock(ws *workspace, w, h0, nh, r0, r1, T, window int, scale, softcap float64, sinks []float64, d dims) {
	mul, scores := ws.attMul[w], ws.scores[w]
	hd, kvd, D := d.H*d.D, d.KV*d.D, d.D
	g := h0 / (d.H / d.KV)
	n := r1 - r0
	a, lda := ws.q[r0*hd+h0*D:], hd
	if nh > 1 {
		a, lda = ws.attQ[w][:nh*n*D], D
		for j := 0; j < nh; j++ {
			for i := 0; i < n; i++ {
				src := (r0+i)*hd + (h0+j)*D
				copy(a[(j*n+i)*D:(j*n+i+1)*D], ws.q[src:src+D])
			}
		}
	}
	mul.MulNT(nh*n, r1, D, a, lda, ws.k[g*D:], kvd, scores, T)
	for r := 0; r < nh*n; r++ {
		i := r0 + r%n // the query position of stacked row r
		row := scores[r*T : r*T+r1]
		lo := 0
		if window > 0 {
			lo = max(0, i-window+1)
		}
		for j := 0; j < lo; j++ {
			row[j] = 0
		}
		sink := math.Inf(-1)
		if sinks != nil {
			sink = sinks[h0+r/n] // the head of stacked row r
		}
		mx := sink
		for j := lo; j <= i; j++ {
			row[j] *= scale
			if softcap > 0 {
				row[j] = softcap * math.Tanh(row[j]/softcap)
			}
			mx = max(mx, row[j])
		}
		for j := lo; j <= i; j++ {
			row[j] -= mx
		}
		detmath.ExpTo(row[lo:i+1], row[lo:i+1])
		var sum float64
		for _, e := range row[lo : i+1] {
			sum += e
		}
		if !math.IsInf(sink, -1) {
			sum += detmath.Exp(sink - mx)
		}
		for j := lo; j <= i; j++ {
			row[j] /= sum
		}
		for j := i + 1; j < r1; j++ {
			row[j] = 0
		}
	}
	if nh == 1 {
		mul.MulNN(n, D, r1, scores, T, ws.v[g*D:], kvd, ws.att[r0*hd+h0*D:], hd)
		return
	}
	out := ws.attO[w][:nh*n*D]
	mul.MulNN(nh*n, D, r1, scores, T, ws.v[g*D:], kvd, out, D)
	for j := 0; j < nh; j++ {
		for i := 0; i < n; i++ {
			dst := (r0+i)*hd + (h0+j)*D
			copy(ws.att[dst:dst+D], out[(j*n+i)*D:(j*n+i+1)*D])
		}
	}
}

// headRows computes log-probabilities for positions [lo, hi) from the final
// norm output in ws.h (fake-quantized first when an untied, quantized
// lm_head has an input quantizer) and calls fn with each row (valid only during the
// call). Positions go headChunk at a time; for each chunk the head weight is
// decoded by rows into the product's panels, from the embedding when the
// head is tied or from the untied lm_head when it is a
// quant.RowDequantizer (so the [V][C] matrix is never held whole); any
// other untied lm_head is decoded whole once per call. With wholeDecode
// (tests) a tied head is decoded in blocks of vocabBlock rows instead.
func (m *model) headRows(ctx context.Context, ws *workspace, lo, hi int, fn func(pos int, lp []float64) error) error {
	d := m.dims
	x := ws.h[:ws.T*d.C] // [T][C] head input
	rowHead := m.rowHead()
	if m.head != nil {
		if rowHead == nil {
			ws.head = grow(ws.head, d.V*d.C)
			if err := m.head.Dequantize(ws.head); err != nil {
				return fmt.Errorf("reference: %s: %w", m.head.Module(), err)
			}
		}
		// A quantized lm_head with input_activations quantizes its input
		// like every other Linear: a copy of all T rows, as transformers
		// passes every position through lm_head.
		if aq := m.head.InputQuantizer(); aq != nil {
			x = ws.xin[:ws.T*d.C]
			copy(x, ws.h[:ws.T*d.C])
			if err := aq.Quantize(x, ws.T, d.C); err != nil {
				return fmt.Errorf("reference: %s: input quantization: %w", m.head.Module(), err)
			}
		}
	}
	vb := m.vocabBlock
	for r0 := lo; r0 < hi; r0 += headChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(headChunk, hi-r0)
		switch {
		case rowHead != nil:
			// Decoded by blocks of rows into the product's panels, again
			// for every chunk of positions: no [V][C] float64 copy.
			if err := m.mul.MulNTRows(n, d.V, d.C, x[r0*d.C:], d.C, rowHead.DequantizeRows, ws.logits, d.V); err != nil {
				return fmt.Errorf("reference: %s: %w", m.head.Module(), err)
			}
		case m.head == nil && !m.wholeDecode:
			// Tied: the embedding's rows decoded the same way, by every
			// goroutine of the product for the columns it computes.
			if err := m.mul.MulNTRows(n, d.V, d.C, x[r0*d.C:], d.C, m.embed.Rows, ws.logits, d.V); err != nil {
				return fmt.Errorf("reference: tied head: %w", err)
			}
		}
		for v0 := 0; v0 < d.V && rowHead == nil && (m.head != nil || m.wholeDecode); v0 += vb {
			v1 := min(v0+vb, d.V)
			var w []float64
			if m.head != nil {
				w = ws.head[v0*d.C : v1*d.C]
			} else {
				w = ws.wblock[:(v1-v0)*d.C]
				if err := m.embed.Rows(v0, v1, w); err != nil {
					return fmt.Errorf("reference: tied head: %w", err)
				}
			}
			m.mul.MulNT(n, v1-v0, d.C, x[r0*d.C:], d.C, w, d.C, ws.logits[v0:], d.V)
		}
		if c := m.spec.FinalSoftcap; c > 0 { // gemma2: logits = cap·tanh(logits/cap)
			for v, z := range ws.logits[:n*d.V] {
				ws.logits[v] = c * math.Tanh(z/c)
			}
		}
		if err := m.logSoftmaxRows(ws.logits[:n*d.V], n, d.V, r0); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := fn(r0+i, ws.logits[i*d.V:(i+1)*d.V]); err != nil {
				return err
			}
		}
	}
	return nil
}

// logSoftmaxRows applies logSoftmax to each of the n rows of width v in x,
// rows spread over the model's threads (each row is computed the same way
// by whichever goroutine takes it). The error names the first failing
// position, counting positions from first.
func (m *model) logSoftmaxRows(x []float64, n, v, first int) error {
	errs := make([]error, n)
	workers := min(m.threads, n)
	if workers <= 1 {
		tmp := make([]float64, v)
		for i := 0; i < n; i++ {
			errs[i] = logSoftmax(x[i*v:(i+1)*v], tmp)
		}
	} else {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tmp := make([]float64, v)
				for i := w; i < n; i += workers {
					errs[i] = logSoftmax(x[i*v:(i+1)*v], tmp)
				}
			}()
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("position %d: %w", first+i, err)
		}
	}
	return nil
}

// defaultVocabBlock is the number of head rows multiplied at once: about
// 16 MB of float64 weights, at least 256 rows, at most V.
func defaultVocabBlock(V, C int) int {
	return min(V, max(256, (16<<20)/(8*C)))
}

// logSoftmax replaces x by x − (max + log Σ exp(x − max)), as torch's
// log_softmax, and fails on non-finite logits. tmp is scratch of len(x).
func logSoftmax(x, tmp []float64) error {
	mx := math.Inf(-1)
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("non-finite logit %v", v)
		}
		mx = max(mx, v)
	}
	tmp = tmp[:len(x)]
	for i, v := range x {
		tmp[i] = v - mx
	}
	detmath.ExpTo(tmp, tmp)
	var s float64
	for _, e := range tmp {
		s += e
	}
	lse := mx + detmath.Log(s)
	for i, v := range x {
		x[i] = v - lse
	}
	return nil
}
