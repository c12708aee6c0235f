package oracle

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// The oracle's Qwen3.5 (qwen3_5, qwen3_5_moe and their _text forms),
// written from transformers models/qwen3_5/modeling_qwen3_5.py and
// models/qwen3_5_moe/modeling_qwen3_5_moe.py apart from package arch and
// the reference. Unlike the reference, which runs the gated delta rule in
// its recurrent form, the oracle runs it in the chunked form of
// torch_chunk_gated_delta_rule (chunks of deltaChunk tokens, a unit lower
// triangular system solved by forward substitution per chunk), so that
// reference = oracle also shows that the recurrent and chunked forms agree.

// deltaChunk is torch_chunk_gated_delta_rule's default chunk_size.
const deltaChunk = 64

func isQwen35(modelType string) bool { return strings.HasPrefix(modelType, "qwen3_5") }

// q35Config is what the oracle reads for Qwen3.5 beyond settings.
type q35Config struct {
	prefix                 string // "model." or "model.language_model." (Qwen3_5Model.language_model)
	linear                 []bool // layer_types[i] == "linear_attention"
	nk, nv, dk, dv, kernel int
	rotary                 int // int(head_dim · partial_rotary_factor); ceil(rotary/2) frequencies
	shared                 int // shared_expert_intermediate_size (MoE), 0: none
}

func readQ35(cfg *checkpoint.Config, st settings) (q35Config, error) {
	raw := cfg.Raw
	c := q35Config{prefix: "model."}
	if v, ok := raw["text_config"]; ok && string(v) != "null" {
		raw = nil
		if err := json.Unmarshal(v, &raw); err != nil {
			return c, fmt.Errorf("oracle: text_config: %v", err)
		}
		c.prefix = "model.language_model."
	}
	num := func(key string, def float64) float64 {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return def
		}
		var f float64
		_ = json.Unmarshal(v, &f)
		return f
	}
	c.nk, c.nv = int(num("linear_num_key_heads", 16)), int(num("linear_num_value_heads", 32))
	c.dk, c.dv = int(num("linear_key_head_dim", 128)), int(num("linear_value_head_dim", 128))
	c.kernel = int(num("linear_conv_kernel_dim", 4))
	factor := num("partial_rotary_factor", 0.25) // Qwen3_5TextConfig.__post_init__'s default
	var rp map[string]any
	if v, ok := raw["rope_parameters"]; ok && json.Unmarshal(v, &rp) == nil {
		if f, ok := rp["partial_rotary_factor"].(float64); ok {
			factor = f
		}
	}
	c.rotary = int(float64(st.headDim) * factor)
	interval := int(num("full_attention_interval", 4))
	var types []string
	if v, ok := raw["layer_types"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &types); err != nil || len(types) != st.layers {
			return c, fmt.Errorf("oracle: bad layer_types")
		}
	}
	c.linear = make([]bool, st.layers)
	for i := range c.linear {
		if types == nil {
			c.linear[i] = (i+1)%interval != 0
			continue
		}
		switch types[i] {
		case "linear_attention", "mamba":
			c.linear[i] = true
		case "full_attention", "attention":
		default:
			return c, fmt.Errorf("oracle: layer type %q", types[i])
		}
	}
	if st.moe != nil {
		c.shared = st.moe.SharedIntermediate
	}
	if c.nk <= 0 || c.nv%c.nk != 0 || c.dk <= 0 || c.dv <= 0 || c.kernel <= 0 || c.rotary <= 0 {
		return c, fmt.Errorf("oracle: inconsistent Qwen3.5 sizes %+v", c)
	}
	return c, nil
}

// q35Layer is one decoder layer.
type q35Layer struct {
	inNorm, postNorm []float64 // stored weights w; the norm multiplies by 1 + w
	// full attention
	q, k, v, o matrix // q: [heads·2·head_dim] rows, per head query then gate
	qn, kn     []float64
	// linear attention
	linear               bool
	inQKV, inZ, inB, inA matrix
	out                  matrix
	conv                 [][]float64 // [channel][kernel]
	aLog, dtBias         []float64
	gnorm                []float64
	// MLP: dense, or router + experts (+ shared expert)
	gate, up, down matrix
	router         matrix
	experts        []expert
	shared         *expert
	sharedGate     matrix
}

type q35Net struct {
	st        settings
	c         q35Config
	embed     [][]float64
	head      [][]float64
	finalNorm []float64
	layers    []q35Layer
	freqs     []float64
	// llama: the tensors are in llama.cpp's stored form (Options.LlamaCppForm).
	llama bool
}

func loadQ35(cfg *checkpoint.Config, st settings, get Getter, opt Options) (*q35Net, error) {
	c, err := readQ35(cfg, st)
	if err != nil {
		return nil, err
	}
	n := &q35Net{st: st, c: c, llama: opt.LlamaCppForm}
	mat := func(name string, rows, cols int) ([][]float64, error) {
		data, shape, err := get(name)
		if err != nil {
			return nil, fmt.Errorf("oracle: %s: %w", name, err)
		}
		if len(shape) < 2 || shape[0] != rows || len(data) != rows*cols {
			return nil, fmt.Errorf("oracle: %s: shape %v, want [%d %d]", name, shape, rows, cols)
		}
		m := make([][]float64, rows)
		for r := range m {
			m[r] = data[r*cols : (r+1)*cols]
		}
		return m, nil
	}
	lin := func(module string, rows, cols int) (matrix, error) {
		m, err := mat(module+".weight", rows, cols)
		return matrix{name: module, rows: m}, err
	}
	vec := func(name string, size int) ([]float64, error) {
		data, shape, err := get(name)
		if err != nil {
			return nil, fmt.Errorf("oracle: %s: %w", name, err)
		}
		if len(shape) != 1 || len(data) != size {
			return nil, fmt.Errorf("oracle: %s: shape %v, want [%d]", name, shape, size)
		}
		return data, nil
	}
	H, KV, D, C := st.heads, st.kvHeads, st.headDim, st.hidden
	p := c.prefix
	if n.embed, err = mat(p+"embed_tokens.weight", st.vocab, C); err != nil {
		return nil, err
	}
	if st.tied {
		n.head = n.embed
	} else if n.head, err = mat("lm_head.weight", st.vocab, C); err != nil {
		return nil, err
	}
	if n.finalNorm, err = vec(p+"norm.weight", C); err != nil {
		return nil, err
	}
	// Qwen3_5TextRotaryEmbedding.compute_default_rope_parameters over the
	// rotated dimensions only.
	for i := 0; i < c.rotary; i += 2 {
		n.freqs = append(n.freqs, 1/math.Pow(st.theta, float64(i)/float64(c.rotary)))
	}
	n.layers = make([]q35Layer, st.layers)
	for i := range n.layers {
		L := &n.layers[i]
		pre := fmt.Sprintf("%slayers.%d.", p, i)
		var errs []error
		add := func(e error) { errs = append(errs, e) }
		L.inNorm, err = vec(pre+"input_layernorm.weight", C)
		add(err)
		L.postNorm, err = vec(pre+"post_attention_layernorm.weight", C)
		add(err)
		if c.linear[i] {
			L.linear = true
			la := pre + "linear_attn."
			keyDim, valDim := c.nk*c.dk, c.nv*c.dv
			ch := 2*keyDim + valDim
			L.inQKV, err = lin(la+"in_proj_qkv", ch, C)
			add(err)
			L.inZ, err = lin(la+"in_proj_z", valDim, C)
			add(err)
			L.inB, err = lin(la+"in_proj_b", c.nv, C)
			add(err)
			L.inA, err = lin(la+"in_proj_a", c.nv, C)
			add(err)
			L.out, err = lin(la+"out_proj", C, valDim)
			add(err)
			L.conv, err = mat(la+"conv1d.weight", ch, c.kernel) // [ch, 1, K]
			add(err)
			L.aLog, err = vec(la+"A_log", c.nv)
			add(err)
			L.dtBias, err = vec(la+"dt_bias", c.nv)
			add(err)
			L.gnorm, err = vec(la+"norm.weight", c.dv)
			add(err)
		} else {
			L.q, err = lin(pre+"self_attn.q_proj", 2*H*D, C)
			add(err)
			L.k, err = lin(pre+"self_attn.k_proj", KV*D, C)
			add(err)
			L.v, err = lin(pre+"self_attn.v_proj", KV*D, C)
			add(err)
			L.o, err = lin(pre+"self_attn.o_proj", C, H*D)
			add(err)
			L.qn, err = vec(pre+"self_attn.q_norm.weight", D)
			add(err)
			L.kn, err = vec(pre+"self_attn.k_norm.weight", D)
			add(err)
			if st.qkvBias || st.oBias {
				add(fmt.Errorf("oracle: qwen3_5 with attention_bias"))
			}
		}
		if st.moe != nil {
			m := st.moe
			L.router, err = lin(pre+"mlp.gate", m.Experts, C)
			add(err)
			L.experts, err = loadExperts(get, lin, pre, "mlp.experts.%d.gate_proj", "mlp.experts.%d.up_proj", "mlp.experts.%d.down_proj", m.Experts, m.Intermediate, C)
			add(err)
			if c.shared > 0 {
				L.shared = &expert{}
				L.shared.gate, err = lin(pre+"mlp.shared_expert.gate_proj", c.shared, C)
				add(err)
				L.shared.up, err = lin(pre+"mlp.shared_expert.up_proj", c.shared, C)
				add(err)
				L.shared.down, err = lin(pre+"mlp.shared_expert.down_proj", C, c.shared)
				add(err)
				L.sharedGate, err = lin(pre+"mlp.shared_expert_gate", 1, C)
				add(err)
			}
		} else {
			L.gate, err = lin(pre+"mlp.gate_proj", st.inter, C)
			add(err)
			L.up, err = lin(pre+"mlp.up_proj", st.inter, C)
			add(err)
			L.down, err = lin(pre+"mlp.down_proj", C, st.inter)
			add(err)
		}
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
	}
	return n, nil
}

// q35LogProbs is LogProbs for Qwen3.5: the whole prefix is run again for
// every position (as LogProbs does for the other families).
func q35LogProbs(cfg *checkpoint.Config, st settings, get Getter, tokens []int32, opt Options) ([][]float64, error) {
	n, err := loadQ35(cfg, st, get, opt)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(tokens))
	for p, id := range tokens {
		if id < 0 || int(id) >= st.vocab {
			return nil, fmt.Errorf("oracle: token %d at position %d outside vocabulary of %d", id, p, st.vocab)
		}
	}
	for p := range tokens {
		hidden, err := n.run(tokens[:p+1], opt)
		if err != nil {
			return nil, err
		}
		last := hidden[p]
		if opt.InputQuant != nil && !st.tied {
			flat := make([]float64, 0, (p+1)*st.hidden)
			for _, r := range hidden {
				flat = append(flat, r...)
			}
			if err := opt.InputQuant("lm_head", flat, p+1, st.hidden); err != nil {
				return nil, fmt.Errorf("oracle: lm_head: input quantization: %w", err)
			}
			last = flat[p*st.hidden:]
		}
		logits := make([]float64, st.vocab)
		for v := range logits {
			logits[v] = dot(n.head[v], last)
		}
		out[p] = logSoftmax(logits)
	}
	return out, nil
}

// norm is Qwen3_5RMSNorm: x/sqrt(mean(x²)+eps) · (1 + w), or · w when
// the weights are llama.cpp's stored gains.
func (n *q35Net) norm(x, w []float64, eps float64) []float64 {
	if n.llama {
		var sq float64
		for _, v := range x {
			sq += v * v
		}
		r := math.Sqrt(sq/float64(len(x)) + eps)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v / r * w[i]
		}
		return y
	}
	return zeroCentered(x, w, eps)
}

// zeroCentered is Qwen3_5RMSNorm: x/sqrt(mean(x²)+eps) · (1 + w).
func zeroCentered(x, w []float64, eps float64) []float64 {
	var sq float64
	for _, v := range x {
		sq += v * v
	}
	r := math.Sqrt(sq/float64(len(x)) + eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v / r * (1 + w[i])
	}
	return y
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func silu(x float64) float64 { return x * sigmoid(x) }

func (n *q35Net) run(toks []int32, opt Options) ([][]float64, error) {
	st := n.st
	T := len(toks)
	xs := make([][]float64, T)
	for t, id := range toks {
		xs[t] = append([]float64(nil), n.embed[id]...)
	}
	for i := range n.layers {
		L := &n.layers[i]
		normed := make([][]float64, T)
		for t := range xs {
			normed[t] = n.norm(xs[t], L.inNorm, st.eps)
		}
		var mix [][]float64
		var err error
		if L.linear {
			mix, err = n.gatedDeltaNet(L, normed, opt)
		} else {
			mix, err = n.gatedAttention(L, normed, opt)
		}
		if err != nil {
			return nil, err
		}
		for t := range xs {
			for c := range xs[t] {
				xs[t][c] += mix[t][c]
			}
			normed[t] = n.norm(xs[t], L.postNorm, st.eps)
		}
		var mlp [][]float64
		if L.experts != nil {
			mlp, err = n.sparseBlock(L, normed, opt)
		} else {
			mlp, err = swiglu(L.gate, L.up, L.down, normed, opt)
		}
		if err != nil {
			return nil, err
		}
		for t := range xs {
			for c := range xs[t] {
				xs[t][c] += mlp[t][c]
			}
		}
	}
	for t := range xs {
		xs[t] = n.norm(xs[t], n.finalNorm, st.eps)
	}
	return xs, nil
}

// gatedAttention is Qwen3_5Attention: q_proj's output viewed [heads,
// 2·head_dim] and chunked into query and gate; q_norm/k_norm; RoPE on the
// first rotary dimensions; causal softmax attention; · sigmoid(gate); o_proj.
func (n *q35Net) gatedAttention(L *q35Layer, in [][]float64, opt Options) ([][]float64, error) {
	st := n.st
	H, KV, D := st.heads, st.kvHeads, st.headDim
	qg, err := apply(L.q, nil, in, opt)
	if err != nil {
		return nil, err
	}
	k, err := apply(L.k, nil, in, opt)
	if err != nil {
		return nil, err
	}
	v, err := apply(L.v, nil, in, opt)
	if err != nil {
		return nil, err
	}
	T := len(in)
	q := make([][]float64, T)
	gate := make([][]float64, T)
	for t := range q {
		q[t] = make([]float64, H*D)
		gate[t] = make([]float64, H*D)
		for h := 0; h < H; h++ {
			qh := n.norm(qg[t][h*2*D:h*2*D+D], L.qn, st.eps)
			n.rope(qh, t)
			copy(q[t][h*D:], qh)
			copy(gate[t][h*D:], qg[t][h*2*D+D:h*2*D+2*D])
		}
		for h := 0; h < KV; h++ {
			kh := n.norm(k[t][h*D:(h+1)*D], L.kn, st.eps)
			n.rope(kh, t)
			copy(k[t][h*D:], kh)
		}
	}
	ctx := make([][]float64, T)
	scale := 1 / math.Sqrt(float64(D))
	for i := 0; i < T; i++ {
		ctx[i] = make([]float64, H*D)
		for h := 0; h < H; h++ {
			g := h / (H / KV)
			s := make([]float64, i+1)
			top := math.Inf(-1)
			for j := range s {
				s[j] = dot(q[i][h*D:(h+1)*D], k[j][g*D:(g+1)*D]) * scale
				top = math.Max(top, s[j])
			}
			var z float64
			for j := range s {
				s[j] = math.Exp(s[j] - top)
				z += s[j]
			}
			for j := range s {
				for d := 0; d < D; d++ {
					ctx[i][h*D+d] += s[j] / z * v[j][g*D+d]
				}
			}
		}
		for c := range ctx[i] {
			ctx[i][c] *= sigmoid(gate[i][c])
		}
	}
	return apply(L.o, nil, ctx, opt)
}

// rope rotates the first rotary dimensions of one head at position pos
// (rotate_half within them) and leaves the rest.
func (n *q35Net) rope(x []float64, pos int) {
	half := len(n.freqs) // cos.shape[-1]/2: rotary/2 rounded up
	a := append([]float64(nil), x[:half]...)
	b := append([]float64(nil), x[half:2*half]...)
	for i := 0; i < half; i++ {
		c, s := math.Cos(float64(pos)*n.freqs[i]), math.Sin(float64(pos)*n.freqs[i])
		x[i] = a[i]*c - b[i]*s
		x[half+i] = b[i]*c + a[i]*s
	}
}

// gatedDeltaNet is Qwen3_5GatedDeltaNet with the chunked delta rule.
func (n *q35Net) gatedDeltaNet(L *q35Layer, in [][]float64, opt Options) ([][]float64, error) {
	c := n.c
	T := len(in)
	mixed, err := apply(L.inQKV, nil, in, opt)
	if err != nil {
		return nil, err
	}
	z, err := apply(L.inZ, nil, in, opt)
	if err != nil {
		return nil, err
	}
	b, err := apply(L.inB, nil, in, opt)
	if err != nil {
		return nil, err
	}
	a, err := apply(L.inA, nil, in, opt)
	if err != nil {
		return nil, err
	}
	// causal_conv1d_fn: F.conv1d(padding=K-1, groups=channels)[..., :T], silu.
	ch := len(L.conv)
	conv := make([][]float64, T)
	for t := range conv {
		conv[t] = make([]float64, ch)
		for k := 0; k < ch; k++ {
			var s float64
			for j := 0; j < c.kernel; j++ {
				pos := t + j - (c.kernel - 1) // padded index t+j
				if pos >= 0 {
					s += L.conv[k][j] * mixed[pos][k]
				}
			}
			conv[t][k] = silu(s)
		}
	}
	l2 := func(x []float64) []float64 {
		var s float64
		for _, v := range x {
			s += v * v
		}
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v / math.Sqrt(s+1e-6)
		}
		return y
	}
	out := make([][]float64, T)
	for t := range out {
		out[t] = make([]float64, c.nv*c.dv)
	}
	for j := 0; j < c.nv; j++ {
		kh := j / (c.nv / c.nk) // repeat_interleave
		if n.llama {
			kh = j % c.nk // tiled value heads: ggml's broadcast
		}
		qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		beta, g := make([]float64, T), make([]float64, T)
		for t := 0; t < T; t++ {
			qs[t] = l2(conv[t][kh*c.dk : (kh+1)*c.dk])
			for i := range qs[t] {
				qs[t][i] /= math.Sqrt(float64(c.dk))
			}
			ks[t] = l2(conv[t][c.nk*c.dk+kh*c.dk : c.nk*c.dk+(kh+1)*c.dk])
			vs[t] = conv[t][2*c.nk*c.dk+j*c.dv : 2*c.nk*c.dk+(j+1)*c.dv]
			beta[t] = sigmoid(b[t][j])
			sp := a[t][j] + L.dtBias[j]
			if sp <= 20 { // F.softplus's threshold
				sp = math.Log1p(math.Exp(sp))
			}
			if n.llama {
				g[t] = L.aLog[j] * sp // ssm_a = −exp(A_log) as stored
			} else {
				g[t] = -math.Exp(L.aLog[j]) * sp
			}
		}
		o := chunkedDeltaRule(qs, ks, vs, beta, g, deltaChunk)
		for t := 0; t < T; t++ {
			// Qwen3_5RMSNormGated: weight · norm(o) · silu(z).
			var sq float64
			for _, v := range o[t] {
				sq += v * v
			}
			r := math.Sqrt(sq/float64(c.dv) + n.st.eps)
			for d, v := range o[t] {
				out[t][j*c.dv+d] = L.gnorm[d] * (v / r) * silu(z[t][j*c.dv+d])
			}
		}
	}
	return apply(L.out, nil, out, opt)
}

// chunkedDeltaRule runs the gated delta rule of one value head over q, k
// (already l2-normed, q scaled), v, β and log-decays g in chunks of size
// (torch_chunk_gated_delta_rule): within a chunk with cumulative decays G,
// (I + A) U = β·v − (β·k·e^G) S with A[t][s] = β_t (k_t·k_s) e^{G_t−G_s}
// for s < t, solved by forward substitution; o_t = e^{G_t} Sᵀq_t +
// Σ_{s≤t} e^{G_t−G_s}(q_t·k_s) U_s; then S ← e^{G_last} S + Σ_s
// e^{G_last−G_s} k_s U_sᵀ. S [dk][dv] starts at zero.
func chunkedDeltaRule(q, k, v [][]float64, beta, g []float64, size int) [][]float64 {
	T := len(q)
	if T == 0 {
		return nil
	}
	dk, dv := len(k[0]), len(v[0])
	S := make([][]float64, dk)
	for i := range S {
		S[i] = make([]float64, dv)
	}
	out := make([][]float64, T)
	for c0 := 0; c0 < T; c0 += size {
		n := min(size, T-c0)
		G := make([]float64, n)
		for t := 0; t < n; t++ {
			G[t] = g[c0+t]
			if t > 0 {
				G[t] += G[t-1]
			}
		}
		U := make([][]float64, n)
		for t := 0; t < n; t++ {
			kt, bt := k[c0+t], beta[c0+t]
			U[t] = make([]float64, dv)
			for d := 0; d < dv; d++ {
				var sk float64 // (Sᵀ k_t)[d]
				for i := 0; i < dk; i++ {
					sk += S[i][d] * kt[i]
				}
				U[t][d] = bt*v[c0+t][d] - bt*math.Exp(G[t])*sk
			}
			for s := 0; s < t; s++ {
				a := bt * dot(kt, k[c0+s]) * math.Exp(G[t]-G[s])
				for d := 0; d < dv; d++ {
					U[t][d] -= a * U[s][d]
				}
			}
		}
		for t := 0; t < n; t++ {
			qt := q[c0+t]
			o := make([]float64, dv)
			for d := 0; d < dv; d++ {
				var sq float64
				for i := 0; i < dk; i++ {
					sq += S[i][d] * qt[i]
				}
				o[d] = math.Exp(G[t]) * sq
			}
			for s := 0; s <= t; s++ {
				w := dot(qt, k[c0+s]) * math.Exp(G[t]-G[s])
				for d := 0; d < dv; d++ {
					o[d] += w * U[s][d]
				}
			}
			out[c0+t] = o
		}
		last := G[n-1]
		for i := 0; i < dk; i++ {
			for d := 0; d < dv; d++ {
				S[i][d] *= math.Exp(last)
			}
		}
		for s := 0; s < n; s++ {
			w := math.Exp(last - G[s])
			for i := 0; i < dk; i++ {
				for d := 0; d < dv; d++ {
					S[i][d] += w * k[c0+s][i] * U[s][d]
				}
			}
		}
	}
	return out
}

// sparseBlock is Qwen3_5MoeSparseMoeBlock: softmax router, top-k
// renormalised (ties as torch.topk, torchTopK), experts on the rows routed
// to them, plus sigmoid(shared_expert_gate(x)) · shared_expert(x).
func (n *q35Net) sparseBlock(L *q35Layer, in [][]float64, opt Options) ([][]float64, error) {
	b := block{router: L.router, experts: L.experts}
	net := &network{hidden: n.st.hidden, moe: n.st.moe}
	out, err := net.mixture(b, in, opt)
	if err != nil || L.shared == nil {
		return out, err
	}
	y, err := swiglu(L.shared.gate, L.shared.up, L.shared.down, in, opt)
	if err != nil {
		return nil, err
	}
	sg, err := apply(L.sharedGate, nil, in, opt)
	if err != nil {
		return nil, err
	}
	for t := range out {
		for c := range out[t] {
			out[t][c] += sigmoid(sg[t][0]) * y[t][c]
		}
	}
	return out, nil
}
