package reference

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/detmath"
	"github.com/qppl/qppl/gemm"
	"github.com/qppl/qppl/quant"
)

// source gives the reference access to a checkpoint's tensors. The
// production source is a checkpoint.Model seen through a quant.Scheme; tests
// may supply dense in-memory weights.
type source interface {
	// Linear opens a Linear module (name without ".weight").
	Linear(module string) (quant.Linear, error)
	// Float64 decodes a small dense tensor (norm weight, bias).
	Float64(name string) ([]float64, []int, error)
	// Rows opens a dense 2-D tensor (the embedding) for reading blocks of
	// rows without decoding the whole tensor.
	Rows(name string) (rowReader, error)
	// Where names the file holding a tensor (the model directory for a
	// module or an unknown name), for error messages.
	Where(name string) string
}

// rowReader decodes blocks of rows of a dense [rows][cols] tensor.
type rowReader interface {
	Shape() (rows, cols int)
	// Rows decodes rows [r0, r1) into dst (len (r1-r0)·cols). Safe for
	// concurrent use (a tied head's product calls it from every
	// goroutine).
	Rows(r0, r1 int, dst []float64) error
}

// checkpointSource reads through package quant, so every packed format
// quant understands is decoded exactly.
type checkpointSource struct {
	m      *checkpoint.Model
	scheme *quant.Scheme
}

func (s checkpointSource) Linear(module string) (quant.Linear, error) {
	return s.scheme.Linear(s.m, module)
}

// KVScales implements kvSource: the cache scales of attention module attn,
// nil when the checkpoint's KV cache is not quantized.
func (s checkpointSource) KVScales(attn string, kvHeads int) (*quant.KVScales, error) {
	if s.scheme.KV == nil {
		return nil, nil
	}
	return s.scheme.KV.OpenScales(s.m, attn, kvHeads)
}

// kvSource is a source that may declare a quantized KV cache.
type kvSource interface {
	KVScales(attn string, kvHeads int) (*quant.KVScales, error)
}

func (s checkpointSource) Where(name string) string {
	if ti, ok := s.m.Peek(name); ok {
		return ti.File
	}
	return s.m.Dir
}

func (s checkpointSource) Float64(name string) ([]float64, []int, error) {
	return s.m.ReadFloat64(name)
}

func (s checkpointSource) Rows(name string) (rowReader, error) {
	ti, ok := s.m.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q is missing", s.m.Dir, name)
	}
	if len(ti.Shape) != 2 {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want [rows, cols]", ti.File, name, ti.Shape)
	}
	if !ti.DType.Decodable() || ti.DType.Bits()%8 != 0 {
		return nil, fmt.Errorf("%s: tensor %q: dtype %s is not a dense float type", ti.File, name, ti.DType)
	}
	sec, err := s.m.Section(name)
	if err != nil {
		return nil, err
	}
	return &fileRows{ti: ti, r: sec, esize: ti.DType.Bits() / 8}, nil
}

// fileRows reads rows of a dense tensor straight from its file section.
type fileRows struct {
	ti    checkpoint.TensorInfo
	r     io.ReaderAt
	esize int
	bufs  sync.Pool // of *[]byte: read buffers, one per concurrent call
}

func (f *fileRows) Shape() (int, int) { return f.ti.Shape[0], f.ti.Shape[1] }

func (f *fileRows) Rows(r0, r1 int, dst []float64) error {
	rows, cols := f.Shape()
	if r0 < 0 || r1 > rows || r0 > r1 || len(dst) != (r1-r0)*cols {
		return fmt.Errorf("%s: tensor %q: rows [%d, %d) of %d into %d values", f.ti.File, f.ti.Name, r0, r1, rows, len(dst))
	}
	n := (r1 - r0) * cols * f.esize
	bp, _ := f.bufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < n {
		bp = new([]byte)
		*bp = make([]byte, n)
	}
	defer f.bufs.Put(bp)
	buf := (*bp)[:n]
	if got, err := f.r.ReadAt(buf, int64(r0*cols*f.esize)); got != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: tensor %q: reading rows [%d, %d): %w", f.ti.File, f.ti.Name, r0, r1, err)
	}
	if err := checkpoint.DecodeFloat64(f.ti.DType, buf, dst); err != nil {
		return fmt.Errorf("%s: tensor %q: %w", f.ti.File, f.ti.Name, err)
	}
	return nil
}

// dims are the resolved sizes of a model.
type dims struct {
	C, H, KV, D, I, V, L int
	W                    int // widest MLP activation: I, the experts' width, the expert count
	eps                  float64
}

// layerWeights binds one decoder layer. Linears are handles: they are
// decoded into the scratch buffer when the layer runs.
type layerWeights struct {
	attnNorm, mlpNorm []float64 // [C] (gemma: 1 + weight, see bind)
	// postAttnNorm, postMLPNorm: gemma's post_attention_layernorm and
	// post_feedforward_layernorm; nil otherwise.
	postAttnNorm, postMLPNorm []float64
	qNorm, kNorm              []float64 // [D], qwen3 only
	// lin and bias are indexed by arch.Proj (arch.ProjQ … arch.ProjDown), as
	// in backends/cuda; a bias is nil when absent.
	lin  [arch.NumProj]quant.Linear
	bias [arch.NumProj][]float64
	// experts[e] holds expert e's gate, up and down_proj (by arch.Proj) in
	// a mixture-of-experts layer, whose router is lin[arch.ProjRouter];
	// nil in a dense layer.
	experts [][arch.NumProj]quant.Linear
	// kv: the layer's KV cache scales when the checkpoint quantizes its
	// KV cache (read whether or not model.kvQuant applies them).
	kv *quant.KVScales
	// delta is a Gated DeltaNet layer's dense tensors (nil in an attention
	// layer); its Linears are lin[arch.ProjInQKV … arch.ProjOut].
	delta *deltaWeights
	// gemma4 (see gemma4.go): post_per_layer_input_norm (nil without
	// per-layer inputs) and layer_scalar [1]; nil otherwise.
	pleNorm, layerScalar []float64
	// gpt-oss (see gptoss.go): the attention sinks [H] and the fused
	// experts; nil otherwise.
	sinks  []float64
	gptOss *gptOssExperts
	// g4moe: a Gemma 4 MoE layer's router vectors and norms (nil otherwise).
	g4moe *gemma4MoE
}

// gemma4MoE are the dense tensors of a Gemma 4 MoE layer (arch/gemma4.go).
type gemma4MoE struct {
	scale, perExpert    []float64 // router.scale [C], router.per_expert_scale [E]
	preNorm, postNorm1  []float64 // pre_feedforward_layernorm_2, post_feedforward_layernorm_1 [C]
	postNorm2, routerIn []float64 // post_feedforward_layernorm_2 [C]; routerIn: scale · C^-½ [C]
}

// decaySource is implemented by sources whose file stores a Gated
// DeltaNet's A = exp(A_log) itself (gguf.Model: llama.cpp stores
// −exp(A_log) in float32, which A_log cannot reproduce exactly); ok is
// false when the file stores A_log.
type decaySource interface {
	DecayRate(name string) (a []float64, ok bool, err error)
}

// decayRate reads A = exp(A_log) [n]: as the source stores it, or
// detmath.Exp of A_log.
func decayRate(src source, name string, n int, vec func(string, int) ([]float64, error)) ([]float64, error) {
	if ds, ok := src.(decaySource); ok {
		a, ok, err := ds.DecayRate(name)
		if err != nil {
			return nil, fmt.Errorf("reference: %s: %w", src.Where(name), err)
		}
		if ok {
			if len(a) != n {
				return nil, fmt.Errorf("reference: %s: tensor %q has %d values, want [%d]", src.Where(name), name, len(a), n)
			}
			return a, nil
		}
	}
	aLog, err := vec(name, n)
	if err != nil {
		return nil, err
	}
	a := make([]float64, n)
	for j, x := range aLog {
		a[j] = detmath.Exp(x)
	}
	return a, nil
}

// deltaWeights are the dense tensors of a Gated DeltaNet layer.
type deltaWeights struct {
	conv []float64 // [ConvDim][kernel] (conv1d.weight [ConvDim, 1, kernel])
	// a is the decay rate A = exp(A_log) [value heads] (formed once from
	// A_log, or as a GGUF file stores it: see decaySource); dtBias
	// [value heads].
	a, dtBias []float64
	norm      []float64 // [value dim], Qwen3_5RMSNormGated's weight (no offset)
}

// model is a bound checkpoint.
type model struct {
	dims
	invFreq []float64 // [D/2]
	// invFreqLocal: the local RoPE of gemma3's sliding layers
	// (arch.Spec.LocalRope), nil otherwise.
	invFreqLocal []float64
	embed        rowReader // [V][C], rows decoded on demand
	norm         []float64 // [C]
	head         quant.Linear
	layers       []layerWeights
	// scratch is out·in of the largest Linear of a layer that is not a
	// quant.RowDequantizer (decoded whole); maxLinear of any.
	scratch, maxLinear int
	// wholeDecode makes every Linear decode whole into the scratch buffer,
	// as before MulNTRows (tests compare the two paths bit for bit).
	wholeDecode bool
	spec        *arch.Spec
	// vocabBlock is the number of head rows per Dgemm (see headRows).
	vocabBlock int
	// threads is the number of goroutines of the products and attention.
	threads int
	// mul runs the Linear and head products on threads goroutines.
	mul *gemm.Engine
	// kvQuant: keys and values go through the checkpoint's FP8 KV cache
	// (layers' kv scales) before attention.
	kvQuant bool
	// g4 holds Gemma 4's model-level weights (nil for other families).
	g4 *gemma4Model
}

// bind opens every tensor of the model described by spec from src,
// checking every shape. Linears stay encoded; norms, biases and the
// embedding are decoded.
func bind(spec *arch.Spec, src source) (*model, error) {
	d := dims{
		C: spec.Hidden, H: spec.Heads, KV: spec.KVHeads, D: spec.HeadDim,
		I: spec.Intermediate, V: spec.Vocab, L: spec.Layers, eps: spec.Eps, W: spec.MLPWidth(),
	}
	for i := 0; i < spec.Layers; i++ { // gemma4: the widest layer sizes the buffers
		d.D, d.KV = max(d.D, spec.LayerHeadDim(i)), max(d.KV, spec.LayerKVHeads(i))
	}
	if d.C <= 0 || d.H <= 0 || d.KV <= 0 || d.D <= 0 || d.D%2 != 0 || d.I <= 0 || d.V <= 0 || d.L <= 0 || d.H%d.KV != 0 {
		return nil, fmt.Errorf("reference: config.json: inconsistent sizes %+v", d)
	}
	if !(d.eps >= 0) {
		return nil, fmt.Errorf("reference: config.json: rms_norm_eps %v", d.eps)
	}
	m := &model{dims: d, layers: make([]layerWeights, d.L), spec: spec}
	m.invFreq = spec.RopeInvFreq()
	if spec.LocalRopeTheta > 0 {
		m.invFreqLocal = arch.RopeInvFreq(d.D, spec.LocalRopeTheta, nil)
		for i, f := range m.invFreqLocal {
			if !(f > 0) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("reference: config.json: local RoPE inv_freq[%d] = %v (rope_local_base_freq %v)", i, f, spec.LocalRopeTheta)
			}
		}
	}
	for i, f := range m.invFreq {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("reference: config.json: RoPE inv_freq[%d] = %v (rope_theta %v, rope_scaling %+v)", i, f, spec.Config.RopeTheta, spec.Config.RopeScaling)
		}
	}
	vec := func(name string, n int) ([]float64, error) {
		v, shape, err := src.Float64(name)
		if err != nil {
			return nil, fmt.Errorf("reference: %s: %w", name, err)
		}
		if len(shape) != 1 || shape[0] != n || len(v) != n {
			return nil, fmt.Errorf("reference: %s: tensor %q has shape %v, want [%d]", src.Where(name), name, shape, n)
		}
		return v, nil
	}
	// norm reads an RMSNorm weight; Gemma2RMSNorm multiplies by
	// (1 + weight), formed here once in float64 (exact for every bf16 or
	// fp16 weight of magnitude ≥ 2^-44; below that, one float64 rounding).
	norm := func(name string, n int) ([]float64, error) {
		v, err := vec(name, n)
		if err != nil || !spec.NormOffset {
			return v, err
		}
		out := make([]float64, n)
		for i, w := range v {
			out[i] = 1 + w
		}
		return out, nil
	}
	lin := func(al arch.Linear) (quant.Linear, error) {
		l, err := src.Linear(al.Module)
		if err != nil {
			return nil, fmt.Errorf("reference: %s: %w", src.Where(al.Module), err)
		}
		if o, i := l.Shape(); o != al.Out || i != al.In {
			return nil, fmt.Errorf("reference: %s: %s: weight shape [%d %d], want [%d %d] from config.json", src.Where(al.Module), al.Module, o, i, al.Out, al.In)
		}
		return l, nil
	}
	embName := spec.EmbedTensor()
	emb, err := src.Rows(embName)
	if err != nil {
		return nil, fmt.Errorf("reference: %s: %w", embName, err)
	}
	if r, c := emb.Shape(); r != d.V || c != d.C {
		return nil, fmt.Errorf("reference: %s: tensor %q has shape [%d %d], want [%d %d] from config.json", src.Where(embName), embName, r, c, d.V, d.C)
	}
	m.embed = emb
	m.vocabBlock = defaultVocabBlock(d.V, d.C)
	if m.norm, err = norm(spec.FinalNormTensor(), d.C); err != nil {
		return nil, err
	}
	if !spec.TiedHead {
		if m.head, err = lin(spec.Head()); err != nil {
			return nil, err
		}
	}
	for i := range m.layers {
		names := spec.Layer(i)
		l := &m.layers[i]
		if l.attnNorm, err = norm(names.AttnNorm, d.C); err != nil {
			return nil, err
		}
		if l.mlpNorm, err = norm(names.MLPNorm, d.C); err != nil {
			return nil, err
		}
		if spec.SandwichNorms {
			if l.postAttnNorm, err = norm(names.PostAttnNorm, d.C); err != nil {
				return nil, err
			}
			if l.postMLPNorm, err = norm(names.PostMLPNorm, d.C); err != nil {
				return nil, err
			}
		}
		if spec.Sparse(i) && spec.GptOss == nil {
			l.experts = make([][arch.NumProj]quant.Linear, spec.MoE.Experts)
		}
		if spec.LinearLayer(i) {
			la := spec.LinearAttn
			dw := &deltaWeights{}
			conv, shape, err := src.Float64(names.Conv)
			if err != nil {
				return nil, fmt.Errorf("reference: %s: %w", names.Conv, err)
			}
			if len(shape) != 3 || shape[0] != spec.ConvDim() || shape[1] != 1 || shape[2] != la.ConvKernel {
				return nil, fmt.Errorf("reference: %s: tensor %q has shape %v, want [%d 1 %d]", src.Where(names.Conv), names.Conv, shape, spec.ConvDim(), la.ConvKernel)
			}
			dw.conv = conv
			if dw.a, err = decayRate(src, names.ALog, la.ValueHeads, vec); err != nil {
				return nil, err
			}
			if dw.dtBias, err = vec(names.DtBias, la.ValueHeads); err != nil {
				return nil, err
			}
			if dw.norm, err = vec(names.GatedNorm, la.ValueDim); err != nil {
				return nil, err
			}
			l.delta = dw
		}
		for _, al := range spec.LayerLinears(i) {
			dst := &l.lin[al.Proj]
			if al.Expert >= 0 {
				dst = &l.experts[al.Expert][al.Proj]
			}
			if *dst, err = lin(al); err != nil {
				return nil, err
			}
			m.noteLinear(*dst, al.Out*al.In)
			if b := names.Bias(al.Proj); b != "" {
				if l.bias[al.Proj], err = vec(b, al.Out); err != nil {
					return nil, err
				}
			}
		}
		if ks, ok := src.(kvSource); ok {
			if l.kv, err = ks.KVScales(names.Prefix+"self_attn", spec.LayerKVHeads(i)); err != nil {
				return nil, fmt.Errorf("reference: %w", err)
			}
		}
		for _, n := range []struct {
			dst  *[]float64
			name string
		}{{&l.qNorm, names.QNorm}, {&l.kNorm, names.KNorm}} {
			if n.name == "" {
				continue
			}
			if *n.dst, err = norm(n.name, spec.LayerHeadDim(i)); err != nil {
				return nil, err
			}
		}
	}
	if spec.GptOss != nil {
		if err := m.bindGptOss(src, vec); err != nil {
			return nil, err
		}
	}
	if spec.Gemma4 != nil {
		if err := m.bindGemma4(src, vec); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// noteLinear sizes the scratch buffer for a layer Linear of size out·in.
func (m *model) noteLinear(l quant.Linear, size int) {
	m.maxLinear = max(m.maxLinear, size)
	if _, ok := l.(quant.RowDequantizer); !ok {
		m.scratch = max(m.scratch, size)
	}
}

// scratchSize is the length of the whole-Linear scratch buffer.
func (m *model) scratchSize() int {
	if m.wholeDecode {
		return m.maxLinear
	}
	return m.scratch
}

// rowHead returns the untied lm_head as a RowDequantizer, or nil when it
// is tied, cannot decode by rows, or wholeDecode is set.
func (m *model) rowHead() quant.RowDequantizer {
	if rd, ok := m.head.(quant.RowDequantizer); ok && m.head != nil && !m.wholeDecode {
		return rd
	}
	return nil
}
