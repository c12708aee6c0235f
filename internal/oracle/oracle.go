package oracle

import (
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/internal/torchtopk"
)

// Getter returns a tensor by its Hugging Face name (for example
// "model.layers.0.self_attn.q_proj.weight") as float64 values in row-major
// order together with its shape.
type Getter func(name string) ([]float64, []int, error)

// Options tunes the oracle.
type Options struct {
	// InputQuant, when non-nil, is called with a copy of the input of every
	// Linear module (module is its name without ".weight", e.g.
	// "model.layers.0.mlp.down_proj"; x is row-major [rows][cols], one row
	// per token) and may modify it in place before the product. For an
	// untied head it is also called with module "lm_head" and the
	// final-norm rows of the whole prefix (a checkpoint may quantize
	// lm_head's input like any Linear's); it is not called for a tied head.
	InputQuant func(module string, x []float64, rows, cols int) error
	// KVCacheFP8 passes every layer's keys (after RoPE and k-norm) and
	// values through an FP8 E4M3 cache before attention: x/s saturated to
	// ±448, rounded to the nearest E4M3 value (ties to even), times s. The
	// scales s (one per layer, or one per key/value head) are read through
	// the Getter under the first naming present: self_attn.k_scale and
	// v_scale, k_proj.k_scale and v_proj.v_scale, k_proj.output_scale and
	// v_proj.output_scale, or one self_attn.kv_scale for both.
	KVCacheFP8 bool
	// LlamaCppForm (Qwen3.5 only) reads the tensors in the form llama.cpp's
	// GGUF conversion stores them, by their Hugging Face names: every
	// Qwen3_5RMSNorm weight is the gain 1 + w itself, A_log holds
	// ssm_a = −exp(A_log), conv1d.weight may be [C, K], and the value
	// heads are tiled (value head j reads query/key head j mod
	// linear_num_key_heads; see conversion/qwen.py
	// _LinearAttentionVReorderBase and qwen35.cpp's ggml_repeat_4d).
	LlamaCppForm bool
}

// LogProbs runs the forward pass described by cfg over tokens and returns
// the log-softmax of the logits at every position: lp[p][v] is
// log P(next token = v | tokens[0..p]).
func LogProbs(cfg *checkpoint.Config, get Getter, tokens []int32, opt Options) ([][]float64, error) {
	if opt.LlamaCppForm && (cfg == nil || cfg.Raw == nil || !isQwen35(cfg.ModelType)) {
		return nil, fmt.Errorf("oracle: LlamaCppForm is for Qwen3.5 models only")
	}
	if cfg != nil && (cfg.ModelType == "gemma4_text" || cfg.ModelType == "gemma4") { // its own network: gemma4.go
		return g4LogProbs(cfg, get, tokens, opt)
	}
	if cfg != nil && cfg.ModelType == "gpt_oss" { // its own network: gptoss.go
		return goLogProbs(cfg, get, tokens, opt)
	}
	if cfg != nil && cfg.Raw != nil && isQwen35(cfg.ModelType) {
		st, err := readSettings(cfg)
		if err != nil {
			return nil, err
		}
		return q35LogProbs(cfg, st, get, tokens, opt)
	}
	net, err := load(cfg, get)
	if err != nil {
		return nil, err
	}
	if opt.KVCacheFP8 {
		if err := net.loadCacheScales(get); err != nil {
			return nil, err
		}
	}
	for p, id := range tokens {
		if id < 0 || int(id) >= net.vocab {
			return nil, fmt.Errorf("oracle: token %d at position %d outside vocabulary of %d", id, p, net.vocab)
		}
	}
	out := make([][]float64, len(tokens))
	for p := range tokens {
		hidden, err := net.run(tokens[:p+1], opt)
		if err != nil {
			return nil, err
		}
		last := hidden[p]
		if opt.InputQuant != nil && !net.tied {
			flat := make([]float64, 0, (p+1)*net.hidden)
			for _, r := range hidden {
				flat = append(flat, r...)
			}
			if err := opt.InputQuant("lm_head", flat, p+1, net.hidden); err != nil {
				return nil, fmt.Errorf("oracle: lm_head: input quantization: %w", err)
			}
			last = flat[p*net.hidden:]
		}
		logits := make([]float64, net.vocab)
		for v := 0; v < net.vocab; v++ {
			logits[v] = dot(net.head[v], last)
			if c := net.logitCap; c != 0 { // Gemma2ForCausalLM: final_logit_softcapping
				logits[v] = math.Tanh(logits[v]/c) * c
			}
		}
		out[p] = logSoftmax(logits)
	}
	return out, nil
}

// matrix is a weight [out][in] with its module name.
type matrix struct {
	name string
	rows [][]float64
}

type block struct {
	inNorm, postNorm []float64
	q, k, v, o       matrix
	gate, up, down   matrix
	qb, kb, vb, ob   []float64
	qn, kn           []float64
	// A mixture-of-experts layer has a router and experts instead of
	// gate, up, down.
	router  matrix
	experts []expert
	window  int  // sliding attention window, 0: full
	local   bool // gemma3: RoPE of base rope_local_base_freq, unscaled
	// Gemma 2: post_attention_layernorm on the attention output (then
	// postNorm is pre_feedforward_layernorm) and post_feedforward_layernorm.
	attnOutNorm, mlpOutNorm []float64
	// kScale, vScale: FP8 KV cache scales (Options.KVCacheFP8), one value
	// or one per key/value head; nil without a quantized cache.
	kScale, vScale []float64
}

// expert is one SiLU-gated MLP of a mixture of experts.
type expert struct{ gate, up, down matrix }

type network struct {
	vocab, hidden, heads, kvHeads, headDim int
	eps                                    float64
	tied                                   bool
	freqs                                  []float64
	localFreqs                             []float64 // gemma3 sliding layers
	embed                                  [][]float64
	blocks                                 []block
	finalNorm                              []float64
	head                                   [][]float64
	moe                                    *checkpoint.MoE
	// Gemma 2 (zero otherwise): norms scale by (1 + w), embeddings by
	// sqrt(hidden), GeGLU with tanh-gelu, q·k scaled by scoreScale
	// (1/sqrt(head_dim) otherwise), scores and logits soft-capped.
	gemma              bool
	scoreScale         float64
	scoreCap, logitCap float64
	// prefix is the text decoder's module prefix: "model.", or
	// "model.language_model." in a multimodal gemma3 checkpoint
	// (Gemma3ForConditionalGeneration.model.language_model).
	prefix string
}

func load(cfg *checkpoint.Config, get Getter) (*network, error) {
	st, err := readSettings(cfg)
	if err != nil {
		return nil, err
	}
	n := &network{
		vocab: st.vocab, hidden: st.hidden, heads: st.heads,
		kvHeads: st.kvHeads, headDim: st.headDim, eps: st.eps, tied: st.tied, moe: st.moe,
		gemma: st.gemma, scoreCap: st.attnCap, logitCap: st.finalCap, prefix: "model.",
	}
	if st.prefix != "" {
		n.prefix = st.prefix
	}
	n.scoreScale = 1 / math.Sqrt(float64(st.headDim))
	if st.queryScalar > 0 {
		n.scoreScale = 1 / math.Sqrt(st.queryScalar)
	}
	if n.vocab <= 0 || n.hidden <= 0 || n.heads <= 0 || n.kvHeads <= 0 || n.headDim <= 0 || n.headDim%2 == 1 || n.heads%n.kvHeads != 0 || st.inter <= 0 || st.layers <= 0 {
		return nil, fmt.Errorf("oracle: inconsistent sizes in config")
	}
	qkvBias, oBias, qkNorm := st.qkvBias, st.oBias, st.qkNorm
	if n.freqs, err = inverseFrequencies(&checkpoint.Config{RopeTheta: st.theta, RopeScaling: st.rope}, n.headDim); err != nil {
		return nil, err
	}
	if st.localTheta > 0 {
		if n.localFreqs, err = inverseFrequencies(&checkpoint.Config{RopeTheta: st.localTheta}, n.headDim); err != nil {
			return nil, err
		}
	}
	mat := func(name string, rows, cols int) ([][]float64, error) {
		data, shape, err := get(name)
		if err != nil {
			return nil, fmt.Errorf("oracle: %s: %w", name, err)
		}
		if len(shape) != 2 || shape[0] != rows || shape[1] != cols || len(data) != rows*cols {
			return nil, fmt.Errorf("oracle: %s: shape %v, want [%d %d]", name, shape, rows, cols)
		}
		m := make([][]float64, rows)
		for r := range m {
			m[r] = data[r*cols : (r+1)*cols]
		}
		return m, nil
	}
	linear := func(module string, rows, cols int) (matrix, error) {
		m, err := mat(module+".weight", rows, cols)
		return matrix{name: module, rows: m}, err
	}
	vector := func(name string, size int) ([]float64, error) {
		data, shape, err := get(name)
		if err != nil {
			return nil, fmt.Errorf("oracle: %s: %w", name, err)
		}
		if len(shape) != 1 || shape[0] != size || len(data) != size {
			return nil, fmt.Errorf("oracle: %s: shape %v, want [%d]", name, shape, size)
		}
		return data, nil
	}
	if n.embed, err = mat(n.prefix+"embed_tokens.weight", n.vocab, n.hidden); err != nil {
		return nil, err
	}
	if n.tied {
		n.head = n.embed
	} else if n.head, err = mat("lm_head.weight", n.vocab, n.hidden); err != nil {
		return nil, err
	}
	if n.finalNorm, err = vector(n.prefix+"norm.weight", n.hidden); err != nil {
		return nil, err
	}
	qOut, kvOut, inter := n.heads*n.headDim, n.kvHeads*n.headDim, st.inter
	n.blocks = make([]block, st.layers)
	for i := range n.blocks {
		b := &n.blocks[i]
		b.window = st.windows[i]
		b.local = st.local != nil && st.local[i]
		pre := fmt.Sprintf("%slayers.%d.", n.prefix, i)
		steps := []func() error{
			func() (e error) { b.inNorm, e = vector(pre+"input_layernorm.weight", n.hidden); return },
			func() (e error) { b.o, e = linear(pre+"self_attn.o_proj", n.hidden, qOut); return },
		}
		if n.gemma {
			steps = append(steps,
				func() (e error) { b.attnOutNorm, e = vector(pre+"post_attention_layernorm.weight", n.hidden); return },
				func() (e error) { b.postNorm, e = vector(pre+"pre_feedforward_layernorm.weight", n.hidden); return },
				func() (e error) { b.mlpOutNorm, e = vector(pre+"post_feedforward_layernorm.weight", n.hidden); return })
		} else {
			steps = append(steps, func() (e error) { b.postNorm, e = vector(pre+"post_attention_layernorm.weight", n.hidden); return })
		}
		if st.modelType == "phi3" {
			// Phi3Attention: qkv_proj's rows are q, then k, then v.
			steps = append(steps, func() (e error) {
				f, e := linear(pre+"self_attn.qkv_proj", qOut+2*kvOut, n.hidden)
				b.q, b.k, b.v = rowsOf(f, 0, qOut), rowsOf(f, qOut, kvOut), rowsOf(f, qOut+kvOut, kvOut)
				return e
			})
		} else {
			steps = append(steps,
				func() (e error) { b.q, e = linear(pre+"self_attn.q_proj", qOut, n.hidden); return },
				func() (e error) { b.k, e = linear(pre+"self_attn.k_proj", kvOut, n.hidden); return },
				func() (e error) { b.v, e = linear(pre+"self_attn.v_proj", kvOut, n.hidden); return })
		}
		if n.moe != nil && n.moe.Sparse[i] {
			// Qwen3MoeSparseMoeBlock: mlp.gate and mlp.experts.{e}.*_proj.
			ne, w := n.moe.Experts, n.moe.Intermediate
			router, gate, up, down := expertNames(st.modelType)
			steps = append(steps, func() (e error) { b.router, e = linear(pre+router, ne, n.hidden); return },
				func() (e error) {
					b.experts, e = loadExperts(get, linear, pre, gate, up, down, ne, w, n.hidden)
					return
				})
		} else if st.modelType == "phi3" {
			// Phi3MLP: gate, up = gate_up_proj(x).chunk(2): gate rows first.
			steps = append(steps,
				func() (e error) {
					f, e := linear(pre+"mlp.gate_up_proj", 2*inter, n.hidden)
					b.gate, b.up = rowsOf(f, 0, inter), rowsOf(f, inter, inter)
					return e
				},
				func() (e error) { b.down, e = linear(pre+"mlp.down_proj", n.hidden, inter); return })
		} else {
			steps = append(steps,
				func() (e error) { b.gate, e = linear(pre+"mlp.gate_proj", inter, n.hidden); return },
				func() (e error) { b.up, e = linear(pre+"mlp.up_proj", inter, n.hidden); return },
				func() (e error) { b.down, e = linear(pre+"mlp.down_proj", n.hidden, inter); return })
		}
		if qkvBias {
			steps = append(steps,
				func() (e error) { b.qb, e = vector(pre+"self_attn.q_proj.bias", qOut); return },
				func() (e error) { b.kb, e = vector(pre+"self_attn.k_proj.bias", kvOut); return },
				func() (e error) { b.vb, e = vector(pre+"self_attn.v_proj.bias", kvOut); return },
			)
		}
		if oBias {
			steps = append(steps, func() (e error) { b.ob, e = vector(pre+"self_attn.o_proj.bias", n.hidden); return })
		}
		if qkNorm {
			steps = append(steps,
				func() (e error) { b.qn, e = vector(pre+"self_attn.q_norm.weight", n.headDim); return },
				func() (e error) { b.kn, e = vector(pre+"self_attn.k_norm.weight", n.headDim); return },
			)
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

// inverseFrequencies computes RoPE's inv_freq for rotary width dim the way
// transformers' rope initialisation functions define it.
func inverseFrequencies(cfg *checkpoint.Config, dim int) ([]float64, error) {
	if !(cfg.RopeTheta > 0) {
		return nil, fmt.Errorf("oracle: rope_theta %v", cfg.RopeTheta)
	}
	freqs := make([]float64, 0, dim/2)
	for e := 0; e < dim; e += 2 {
		freqs = append(freqs, 1.0/math.Pow(cfg.RopeTheta, float64(e)/float64(dim)))
	}
	kind := "default"
	if cfg.RopeScaling != nil && cfg.RopeScaling.Type != "" {
		kind = cfg.RopeScaling.Type
	}
	switch kind {
	case "default":
	case "linear":
		if !(cfg.RopeScaling.Factor > 0) {
			return nil, fmt.Errorf("oracle: linear rope factor %v", cfg.RopeScaling.Factor)
		}
		for i := range freqs {
			freqs[i] = freqs[i] / cfg.RopeScaling.Factor
		}
	case "llama3":
		rs := cfg.RopeScaling
		if !(rs.Factor > 0) || !(rs.HighFreqFactor > rs.LowFreqFactor) || !(rs.LowFreqFactor > 0) || rs.OriginalMaxPositionEmbeddings <= 0 {
			return nil, fmt.Errorf("oracle: invalid llama3 rope_scaling %+v", *rs)
		}
		oldCtx := float64(rs.OriginalMaxPositionEmbeddings)
		for i, f := range freqs {
			wavelen := 2 * math.Pi / f
			switch {
			case wavelen < oldCtx/rs.HighFreqFactor: // high frequency: unchanged
			case wavelen > oldCtx/rs.LowFreqFactor: // low frequency: divided by factor
				freqs[i] = f / rs.Factor
			default: // in between: interpolate
				smooth := (oldCtx/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
				freqs[i] = (1-smooth)*f/rs.Factor + smooth*f
			}
		}
	default:
		return nil, fmt.Errorf("oracle: unsupported rope_scaling type %q", kind)
	}
	return freqs, nil
}

// run computes the final-norm hidden state of every position of toks.
func (n *network) run(toks []int32, opt Options) ([][]float64, error) {
	T := len(toks)
	xs := make([][]float64, T)
	for t, id := range toks {
		xs[t] = append([]float64(nil), n.embed[id]...)
		if n.gemma { // Gemma2Model: inputs_embeds · hidden_size**0.5
			for c := range xs[t] {
				xs[t][c] *= math.Sqrt(float64(n.hidden))
			}
		}
	}
	for _, b := range n.blocks {
		normed := make([][]float64, T)
		for t := range xs {
			normed[t] = n.norm(xs[t], b.inNorm)
		}
		q, err := apply(b.q, b.qb, normed, opt)
		if err != nil {
			return nil, err
		}
		k, err := apply(b.k, b.kb, normed, opt)
		if err != nil {
			return nil, err
		}
		v, err := apply(b.v, b.vb, normed, opt)
		if err != nil {
			return nil, err
		}
		for t := 0; t < T; t++ {
			for h := 0; h < n.heads; h++ {
				seg := q[t][h*n.headDim : (h+1)*n.headDim]
				if b.qn != nil {
					copy(seg, n.norm(seg, b.qn))
				}
				n.rotate(seg, t, b.local)
			}
			for h := 0; h < n.kvHeads; h++ {
				seg := k[t][h*n.headDim : (h+1)*n.headDim]
				if b.kn != nil {
					copy(seg, n.norm(seg, b.kn))
				}
				n.rotate(seg, t, b.local)
			}
		}
		if b.kScale != nil {
			for t := 0; t < T; t++ {
				for h := 0; h < n.kvHeads; h++ {
					through8(k[t][h*n.headDim:(h+1)*n.headDim], pick(b.kScale, h))
					through8(v[t][h*n.headDim:(h+1)*n.headDim], pick(b.vScale, h))
				}
			}
		}
		ctxv := attention(q, k, v, attnShape{heads: n.heads, kvHeads: n.kvHeads, headDim: n.headDim,
			window: b.window, scale: n.scoreScale, softcap: n.scoreCap})
		attn, err := apply(b.o, b.ob, ctxv, opt)
		if err != nil {
			return nil, err
		}
		for t := range xs {
			if b.attnOutNorm != nil {
				attn[t] = n.norm(attn[t], b.attnOutNorm)
			}
			for c := range xs[t] {
				xs[t][c] += attn[t][c]
			}
			normed[t] = n.norm(xs[t], b.postNorm)
		}
		var mlp [][]float64
		if b.experts != nil {
			mlp, err = n.mixture(b, normed, opt)
		} else {
			mlp, err = n.gatedMLP(b.gate, b.up, b.down, normed, opt)
		}
		if err != nil {
			return nil, err
		}
		for t := range xs {
			if b.mlpOutNorm != nil {
				mlp[t] = n.norm(mlp[t], b.mlpOutNorm)
			}
			for c := range xs[t] {
				xs[t][c] += mlp[t][c]
			}
		}
	}
	for t := range xs {
		xs[t] = n.norm(xs[t], n.finalNorm)
	}
	return xs, nil
}

// rowsOf returns rows [r0, r0+n) of a fused matrix, under the fused
// module's name (so an input quantizer sees the module the checkpoint
// names).
func rowsOf(m matrix, r0, n int) matrix {
	if m.rows == nil {
		return matrix{name: m.name}
	}
	return matrix{name: m.name, rows: m.rows[r0 : r0+n]}
}

// norm is the family's RMSNorm: LlamaRMSNorm, or Gemma2RMSNorm's
// x/sqrt(mean(x²)+eps) · (1 + w).
func (n *network) norm(x, w []float64) []float64 {
	if !n.gemma {
		return rms(x, w, n.eps)
	}
	var sq float64
	for _, v := range x {
		sq += v * v
	}
	r := 1 / math.Sqrt(sq/float64(len(x))+n.eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * r * (1 + w[i])
	}
	return out
}

// gatedMLP is swiglu, or for Gemma 2 down(gelu_tanh(gate(x)) · up(x)).
func (n *network) gatedMLP(gate, up, down matrix, in [][]float64, opt Options) ([][]float64, error) {
	if !n.gemma {
		return swiglu(gate, up, down, in, opt)
	}
	g, err := apply(gate, nil, in, opt)
	if err != nil {
		return nil, err
	}
	u, err := apply(up, nil, in, opt)
	if err != nil {
		return nil, err
	}
	for t := range g {
		for c, x := range g[t] {
			inner := math.Sqrt(2/math.Pi) * (x + 0.044715*math.Pow(x, 3))
			g[t][c] = x * 0.5 * (1 + math.Tanh(inner)) * u[t][c]
		}
	}
	return apply(down, nil, g, opt)
}

// swiglu is down(silu(gate(x)) · up(x)) for every row.
func swiglu(gate, up, down matrix, in [][]float64, opt Options) ([][]float64, error) {
	g, err := apply(gate, nil, in, opt)
	if err != nil {
		return nil, err
	}
	u, err := apply(up, nil, in, opt)
	if err != nil {
		return nil, err
	}
	for t := range g {
		for c := range g[t] {
			sig := 1 / (1 + math.Exp(-g[t][c]))
			g[t][c] = g[t][c] * sig * u[t][c]
		}
	}
	return apply(down, nil, g, opt)
}

// mixture is Qwen3MoeSparseMoeBlock: each row's router probabilities
// (softmax of mlp.gate), its top-k experts (torchTopK: as torch.topk,
// ties included), weights renormalised when norm_topk_prob,
// and the weighted sum of those experts' outputs, added in expert order.
// Each expert runs on exactly the rows routed to it, so that an
// activation quantizer sees what transformers passes it.
func (n *network) mixture(b block, in [][]float64, opt Options) ([][]float64, error) {
	logits, err := apply(b.router, nil, in, opt)
	if err != nil {
		return nil, err
	}
	k := n.moe.TopK
	weight := make([]map[int]float64, len(in)) // row → expert → routing weight
	for t, l := range logits {
		p := logSoftmax(l)
		for i := range p {
			p[i] = math.Exp(p[i])
		}
		weight[t] = map[int]float64{}
		var sum float64
		for _, e := range torchTopK(p, k) {
			weight[t][e] = p[e]
			sum += p[e]
		}
		if n.moe.NormTopK {
			for e := range weight[t] {
				weight[t][e] /= sum
			}
		}
	}
	out := make([][]float64, len(in))
	for t := range out {
		out[t] = make([]float64, n.hidden)
	}
	for e, x := range b.experts {
		var rows []int
		var sub [][]float64
		for t := range in {
			if _, ok := weight[t][e]; ok {
				rows = append(rows, t)
				sub = append(sub, in[t])
			}
		}
		if len(rows) == 0 {
			continue
		}
		y, err := swiglu(x.gate, x.up, x.down, sub, opt)
		if err != nil {
			return nil, err
		}
		for i, t := range rows {
			for c := range out[t] {
				out[t][c] += weight[t][e] * y[i][c]
			}
		}
	}
	return out, nil
}

// rotate applies rotate-half RoPE at position pos to one head vector.
func (n *network) rotate(x []float64, pos int, local bool) {
	freqs := n.freqs
	if local {
		freqs = n.localFreqs
	}
	half := len(x) / 2
	first := append([]float64(nil), x[:half]...)
	second := append([]float64(nil), x[half:]...)
	for i := 0; i < half; i++ {
		theta := float64(pos) * freqs[i]
		c, s := math.Cos(theta), math.Sin(theta)
		x[i] = first[i]*c - second[i]*s
		x[half+i] = second[i]*c + first[i]*s
	}
}

// apply computes rows·Wᵀ + bias for every row, after the optional input
// quantization of a copy of the rows.
func apply(m matrix, bias []float64, in [][]float64, opt Options) ([][]float64, error) {
	if opt.InputQuant != nil && len(in) > 0 {
		cols := len(in[0])
		flat := make([]float64, 0, len(in)*cols)
		for _, r := range in {
			flat = append(flat, r...)
		}
		if err := opt.InputQuant(m.name, flat, len(in), cols); err != nil {
			return nil, fmt.Errorf("oracle: %s: input quantization: %w", m.name, err)
		}
		in = make([][]float64, len(in))
		for r := range in {
			in[r] = flat[r*cols : (r+1)*cols]
		}
	}
	out := make([][]float64, len(in))
	for t, x := range in {
		out[t] = make([]float64, len(m.rows))
		for o, w := range m.rows {
			out[t][o] = dot(w, x)
			if bias != nil {
				out[t][o] += bias[o]
			}
		}
	}
	return out, nil
}

// shaped reads the tensor name through get and checks its shape (the
// number of dimensions and of values).
func shaped(get Getter, name string, shape ...int) ([]float64, error) {
	v, sh, err := get(name)
	if err != nil {
		return nil, fmt.Errorf("oracle: %s: %w", name, err)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if len(v) != n || len(sh) != len(shape) {
		return nil, fmt.Errorf("oracle: %s: shape %v, want %v", name, sh, shape)
	}
	return v, nil
}

// matrixOf reads name.weight through get as the out×in matrix of module
// name.
func matrixOf(get Getter, name string, out, in int) (matrix, error) {
	v, err := shaped(get, name+".weight", out, in)
	if err != nil {
		return matrix{}, err
	}
	m := matrix{name: name, rows: make([][]float64, out)}
	for o := range m.rows {
		m.rows[o] = v[o*in : (o+1)*in]
	}
	return m, nil
}

// rms is LlamaRMSNorm: w_i · x_i / sqrt(mean(x²) + eps).
func rms(x, w []float64, eps float64) []float64 {
	var sq float64
	for _, v := range x {
		sq += v * v
	}
	d := math.Sqrt(sq/float64(len(x)) + eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = w[i] * (x[i] / d)
	}
	return y
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// logSoftmax returns (x − max) − log Σ exp(x − max).
func logSoftmax(x []float64) []float64 {
	top := math.Inf(-1)
	for _, v := range x {
		top = math.Max(top, v)
	}
	var z float64
	for _, v := range x {
		z += math.Exp(v - top)
	}
	lz := math.Log(z)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = (v - top) - lz
	}
	return out
}

// loadCacheScales reads every layer's KV cache scales (Options.KVCacheFP8).
func (n *network) loadCacheScales(get Getter) error {
	for i := range n.blocks {
		attn := fmt.Sprintf("%slayers.%d.self_attn.", n.prefix, i)
		var k, v []float64
		for _, names := range [][2]string{{"k_scale", "v_scale"}, {"k_proj.k_scale", "v_proj.v_scale"}, {"k_proj.output_scale", "v_proj.output_scale"}, {"kv_scale", "kv_scale"}} {
			kk, _, e1 := get(attn + names[0])
			vv, _, e2 := get(attn + names[1])
			if e1 == nil && e2 == nil {
				k, v = kk, vv
				break
			}
		}
		if k == nil {
			return fmt.Errorf("oracle: layer %d: no KV cache scales", i)
		}
		for _, s := range [][]float64{k, v} {
			if len(s) != 1 && len(s) != n.kvHeads {
				return fmt.Errorf("oracle: layer %d: %d KV cache scales for %d key/value heads", i, len(s), n.kvHeads)
			}
		}
		n.blocks[i].kScale, n.blocks[i].vScale = k, v
	}
	return nil
}

// pick returns the scale of head h: the only one, or the head's own.
func pick(s []float64, h int) float64 {
	if len(s) == 1 {
		return s[0]
	}
	return s[h]
}

// through8 stores x in an FP8 E4M3 cache with scale s and reads it back.
// E4M3 here: 3 fraction bits, normal exponents -6..8, subnormal spacing
// 2^-9, largest finite 448 (1.75·2^8); values past it saturate.
func through8(x []float64, s float64) {
	for i, val := range x {
		y := val / s
		a := math.Abs(y)
		if a >= 448 {
			a = 448
		} else if a > 0 {
			// spacing of E4M3 values around a: 2^(exponent-3), at least 2^-9
			exp := math.Floor(math.Log2(a))
			if math.Ldexp(1, int(exp)) > a { // Log2 rounding near powers of two
				exp--
			} else if math.Ldexp(1, int(exp)+1) <= a {
				exp++
			}
			spacing := math.Ldexp(1, max(int(exp), -6)-3)
			a = math.RoundToEven(a/spacing) * spacing
		}
		x[i] = math.Copysign(a, y) * s
	}
}

// loadExperts reads the ne experts (width w, hidden h) of the MoE layer
// under pre: per expert, the modules pre + fmt.Sprintf(gate|up|down, e);
// or, when the checkpoint holds them instead, the fused tensors of
// transformers ≥ 5 beside them (…experts.gate_up_proj [ne, 2·w, h], expert
// e's gate rows then its up rows; …experts.down_proj [ne, h, w]), sliced
// here under the per-expert names.
func loadExperts(get Getter, linear func(string, int, int) (matrix, error), pre, gate, up, down string, ne, w, h int) ([]expert, error) {
	xs := make([]expert, ne)
	dir := pre + gate[:strings.Index(gate, "%d")] // "<block>.experts."
	if gu, sh, err := get(dir + "gate_up_proj"); err == nil {
		dn, dsh, err := get(dir + "down_proj")
		if err != nil {
			return nil, fmt.Errorf("oracle: %sdown_proj: %w", dir, err)
		}
		if len(sh) != 3 || sh[0] != ne || sh[1] != 2*w || sh[2] != h || len(dsh) != 3 || dsh[0] != ne || dsh[1] != h || dsh[2] != w {
			return nil, fmt.Errorf("oracle: %s: fused shapes %v, %v", dir, sh, dsh)
		}
		rows := func(name string, v []float64, first, n, cols int) matrix {
			m := matrix{name: name}
			for r := first; r < first+n; r++ {
				m.rows = append(m.rows, v[r*cols:(r+1)*cols])
			}
			return m
		}
		for e := range xs {
			xs[e] = expert{
				gate: rows(pre+fmt.Sprintf(gate, e), gu, e*2*w, w, h),
				up:   rows(pre+fmt.Sprintf(up, e), gu, e*2*w+w, w, h),
				down: rows(pre+fmt.Sprintf(down, e), dn, e*h, h, w),
			}
		}
		return xs, nil
	}
	for e := range xs {
		x := &xs[e]
		var err error
		if x.gate, err = linear(pre+fmt.Sprintf(gate, e), w, h); err != nil {
			return nil, err
		}
		if x.up, err = linear(pre+fmt.Sprintf(up, e), w, h); err != nil {
			return nil, err
		}
		if x.down, err = linear(pre+fmt.Sprintf(down, e), h, w); err != nil {
			return nil, err
		}
	}
	return xs, nil
}

// torchTopK returns the k experts torch.topk chooses from the
// probabilities p, ties included. The tie order is torch's CPU algorithm
// (libstdc++'s nth_element / partial_sort on (value, index) pairs),
// implemented once in internal/torchtopk and checked there against torch's
// own output; the oracle checks independently that the choice is a top k.
func torchTopK(p []float64, k int) []int {
	idx := torchtopk.Indices(p, k)
	in := map[int]bool{}
	lo := math.Inf(1)
	for _, e := range idx {
		in[e] = true
		lo = math.Min(lo, p[e])
	}
	for e, v := range p {
		if !in[e] && v > lo {
			panic(fmt.Sprintf("oracle: torchtopk chose %v, leaving expert %d of probability %v out", idx, e, v))
		}
	}
	return idx
}
