package cuda

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/quant"
)

// Options configures the CUDA backend.
type Options struct {
	Name      string    // Info().Name: "cuda" (default) or "emu"
	Precision string    // GEMM input / activation dtype: bf16 (default), fp16, fp32
	MaxTokens int       // longest window the buffers are planned for (default 2048)
	SplitGB   []float64 // per-device budget in GB (--gpu-split); nil: each device's free memory
	HeadRows  int       // logits rows per head chunk (default 256)
	Log       io.Writer // the memory plan is printed here when non-nil
	NoFusion  bool      // run q/k/v and gate/up as separate GEMMs (tests, debugging)
	// AllowUnusedTensors loads a checkpoint holding tensors that the
	// forward pass and the format do not use; by default New refuses it
	// (checkpoint.ErrUnused, naming them) before anything is uploaded.
	AllowUnusedTensors bool
	// KVCacheQuant is --kv-cache-quant (quant.KVQuantAuto, On, Off): keys
	// and values go through the checkpoint's FP8 KV cache (kv_quant,
	// kvquant.cu) unless off; the scales are read (and checked) either way.
	KVCacheQuant string
}

// Backend implements backends.Backend, backends.LogProber and
// backends.Prober on one or more devices.
type Backend struct {
	mu      sync.Mutex
	opt     Options
	spec    *arch.Spec
	gemmDT  device.DType
	plan    *Plan
	devs    []*devState
	headDev int
	closed  bool
	broken  error // a failed grow left the buffers unusable
	// kv holds each layer's FP8 KV cache scales (K, V: one, or one per
	// key/value head) when the cache is quantized; nil otherwise.
	kv      [][2][]float32
	attnCap int64     // attention chunk budget (0: attnScoreCap; tests set less)
	fused   [2]bool   // some layer may fuse q|k|v, gate|up: their output buffers are planned
	invFreq []float64 // RoPE inverse frequencies when the source has its own (GGUF rope_freqs), else nil
}

var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.LogProber = (*Backend)(nil)
	_ backends.Prober    = (*Backend)(nil)
)

// layerDev is one decoder layer's weights on its device.
type layerDev struct {
	attnNorm, mlpNorm, qNorm, kNorm device.Ptr // fp32 (gemma: 1 + weight)
	// postAttnNorm, postMLPNorm: gemma's post_attention_layernorm and
	// post_feedforward_layernorm (fp32, 1 + weight); 0 otherwise.
	postAttnNorm, postMLPNorm device.Ptr
	// lin and bias are indexed by arch.Proj (arch.ProjQ … arch.ProjDown), as
	// in package reference; a bias is 0 when absent (fp32).
	lin  [arch.NumProj]*devLinear
	bias [arch.NumProj]device.Ptr
	// experts[e] holds expert e's gate, up and down_proj (by arch.Proj) in
	// a mixture-of-experts layer (router: lin[arch.ProjRouter]); nil when
	// dense.
	experts [][arch.NumProj]*devLinear
	// router32 is a MoE layer's router weight [experts][hidden] in fp32,
	// multiplied by the fp32 normed rows so that routing decisions carry no
	// GEMM-dtype rounding; 0 when the router's input is quantized (it then
	// runs as lin[arch.ProjRouter]).
	router32 device.Ptr
	// A Gated DeltaNet layer (qwen3_5): conv1d weight [ConvDim][kernel],
	// A_log and dt_bias [value heads], the gated norm's weight [value dim],
	// all fp32; 0 in an attention layer.
	conv, aLog, dtBias, gnorm device.Ptr
	// Gemma 4: post_per_layer_input_norm (fp32; 0 without per-layer
	// inputs) and layer_scalar (read on the host).
	pleNorm device.Ptr
	scalar  float32
	// Gemma 4 MoE layers: router.scale · hidden^-½ as the router norm's
	// weight, pre_feedforward_layernorm_2, post_feedforward_layernorm_1
	// and _2 (fp32), router.per_expert_scale on the host.
	routerW, preMoENorm, postMLPNorm1, postMoENorm device.Ptr
	perExpert                                      []float64
	arena                                          device.Ptr // the one allocation holding all of the above (experts included)
	fuse                                           [2]bool    // q|k|v and gate|up run as one GEMM each (fuse.go)

	// gpt-oss (gptoss.go): the attention sinks [heads] and the experts'
	// biases gate_up_proj_bias [E][2·I] and down_proj_bias [E][C], fp32
	// (the experts themselves are experts[e][arch.ProjGateUp] and
	// [arch.ProjDown]); 0 otherwise.
	sinks, guBias, dnBias device.Ptr
}

// devState is one device's weights and buffers. Shapes (T = MaxTokens,
// C hidden, Q = heads·head_dim, KV = kv_heads·head_dim, I intermediate):
type devState struct {
	d             device.Device
	first, end    int
	layers        []layerDev
	scratch       device.Ptr // one dequantized Linear (GEMM dtype)
	x, h, proj    device.Ptr // [T][C] fp32: residual stream, norm output, projection output
	xa            device.Ptr // [T][max(C,Q,I)] GEMM dtype: the current Linear input
	q, att        device.Ptr // [T][Q] fp32
	k, v          device.Ptr // [T][KV] fp32
	gate, up      device.Ptr // [T][I] fp32 (I: spec.MLPWidth, the widest MLP activation)
	moeIn, moeOut device.Ptr // [T][C] fp32: rows routed to one expert, its output (MoE models)
	qa, ka, va    device.Ptr // [H][T][D] GEMM dtype: attention operands (attention.go)
	qkv, gu       device.Ptr // [T][Q+2KV], [T][2I] fp32: fused GEMM outputs (fuse.go; 0 unless some layer fuses)
	scores        device.Ptr // one attention chunk's scores (fp32)
	weights       device.Ptr // its softmax weights (attnParts dtype parts)
	ids           device.Ptr // [T] int32 (device 0)
	cos, sin      device.Ptr // [T][D/2] fp32 RoPE tables
	cosL, sinL    device.Ptr // [T][D/2] fp32 local RoPE tables (gemma3's sliding layers; 0 otherwise)
	embed         device.Ptr // [V][C] embedding (device 0; head device when tied)
	embedDT       device.DType
	finalNorm     device.Ptr // [C] fp32 (head device)
	head          *devLinear
	logits, base  device.Ptr // [HeadRows][V] fp32
	targets       device.Ptr // [HeadRows] int32
	nll, kl       device.Ptr // [HeadRows] fp32
	top           device.Ptr
	topCap        int
	xaCastOf      device.Ptr // fp32 buffer whose plain cast xa currently holds (0: none)
	// qwen3_5 (0 otherwise): qg [T][2Q] gated q_proj output, qgate [T][Q];
	// the Gated DeltaNet's mixed and conv [T][ConvDim], z and core [T][nv·dv],
	// lb and la [T][nv], state [nv·dv·dk].
	qg, qgate                         device.Ptr
	mixed, conv, z, core, lb, la, dst device.Ptr
	g4                                *gemma4Dev // gemma4_text (gemma4.go); nil otherwise
	active                            bool       // holds per-window buffers
}

// New loads the model described by m onto devs (layers split in order by
// memory) after printing the memory plan to opt.Log and checking it
// against each device's free memory. Nothing is allocated when the plan
// does not fit.
func New(m *checkpoint.Model, devs []device.Device, opt Options) (*Backend, error) {
	if m == nil || m.Config == nil {
		return nil, errors.New("cuda: nil model or config")
	}
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", m.Dir, err)
	}
	return newBackend(m.Config, ckptSource{m: m, scheme: scheme}, devs, opt)
}

// newBackend is New over a weight source (a checkpoint or a GGUF file).
func newBackend(cfg *checkpoint.Config, src source, devs []device.Device, opt Options) (*Backend, error) {
	if len(devs) == 0 {
		return nil, errors.New("cuda: no devices")
	}
	if opt.Name == "" {
		opt.Name = "cuda"
	}
	if opt.MaxTokens == 0 {
		opt.MaxTokens = 2048
	}
	if opt.HeadRows == 0 {
		opt.HeadRows = 256
	}
	if opt.MaxTokens < 1 || opt.HeadRows < 1 {
		return nil, fmt.Errorf("cuda: MaxTokens %d and HeadRows %d must be positive", opt.MaxTokens, opt.HeadRows)
	}
	if opt.SplitGB != nil && len(opt.SplitGB) != len(devs) {
		return nil, fmt.Errorf("cuda: --gpu-split has %d values for %d devices", len(opt.SplitGB), len(devs))
	}
	gemmDT, err := device.ParseDType(opt.Precision)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	spec, err := arch.For(cfg)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if spec.HeadDim > device.AttnMaxHead {
		return nil, fmt.Errorf("cuda: head_dim %d exceeds the attention kernel's %d", spec.HeadDim, device.AttnMaxHead)
	}
	if err := Supports(spec); err != nil {
		return nil, err
	}
	if spec.Gemma4 != nil {
		if err := gemma4Check(spec, devs, nil); err != nil {
			return nil, err
		}
	}
	b := &Backend{opt: opt, spec: spec, gemmDT: gemmDT, invFreq: src.ropeInvFreq()}
	in := planInput{layerBytes: make([]int64, spec.Layers)}
	ld := &loader{src: src, spec: spec, gemmDT: gemmDT}
	usage := src.track()
	defer usage.Stop()
	if b.kv, err = src.kvScales(spec, opt.KVCacheQuant); err != nil {
		return nil, err
	}
	var g4h *gemma4Host
	if spec.Gemma4 != nil {
		if err := gemma4Check(spec, devs, b.kv); err != nil {
			return nil, err
		}
		if g4h, err = ld.gemma4Host(); err != nil {
			return nil, err
		}
		if h := g4h; h != nil && !h.proj.direct {
			in.scratch = max(in.scratch, int64(h.proj.out)*int64(h.proj.in)*int64(gemmDT.Size()))
		}
	}

	// Pass 1: sizes only (host copies are dropped).
	for i := 0; i < spec.Layers; i++ {
		lb, sc, fz, err := ld.layerSize(i)
		if err != nil {
			return nil, err
		}
		in.layerBytes[i] = lb
		in.scratch = max(in.scratch, sc)
		for g := range fz {
			b.fused[g] = b.fused[g] || (fz[g] && !opt.NoFusion)
		}
	}
	embRaw, embDT, err := ld.embedding()
	if err != nil {
		return nil, err
	}
	in.embedBytes = int64(len(embRaw)) + g4h.bytes() // gemma4: the per-layer-input weights live beside the embedding
	head, headShared, err := ld.head(embRaw, embDT)
	if err != nil {
		return nil, err
	}
	if err := ld.checkVecs(); err != nil {
		return nil, err
	}
	if !opt.AllowUnusedTensors {
		if err := usage.Check(opt.Name); err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
	}
	C, V, T := spec.Hidden, spec.Vocab, opt.MaxTokens
	in.headBytes = int64(4 * C)
	if !headShared {
		in.headBytes += head.bytes()
	} else {
		in.tiedExtra = int64(len(embRaw))
	}
	if !head.direct {
		in.headScratch = int64(V * C * gemmDT.Size())
	}
	in.act = b.actBytes(T)
	R := opt.HeadRows
	in.logits = int64(R)*int64(V)*8 + int64(R)*(4*3+4*16)

	names := make([]string, len(devs))
	free := make([]int64, len(devs))
	budget := make([]int64, len(devs))
	for i, d := range devs {
		names[i] = d.Name()
		f, _, err := d.MemInfo()
		if err != nil {
			return nil, fmt.Errorf("cuda: %s: %w", d.Name(), err)
		}
		// usable: free memory less what the device needs for itself
		// (device.Reserver: a GPU's kernel local memory and cuBLAS workspace)
		usable := f
		if r, ok := d.(device.Reserver); ok {
			usable = max(f-r.Reserve(), 0)
		}
		free[i], budget[i] = f, usable
		if opt.SplitGB != nil {
			budget[i] = int64(opt.SplitGB[i] * 1e9)
			if budget[i] > usable {
				return nil, fmt.Errorf("cuda: --gpu-split gives %s %.3f GB but it has only %s free (%s after the device's own reserve)", d.Name(), opt.SplitGB[i], gb(f), gb(usable))
			}
		}
	}
	plan, err := split(names, free, budget, in)
	if plan != nil {
		plan.Precision, plan.MaxTokens = gemmDT.String(), T
		if opt.Log != nil {
			plan.Write(opt.Log)
		}
	}
	if err != nil {
		return nil, err
	}
	b.plan = plan

	// Pass 2: allocate and upload.
	ok := false
	defer func() {
		if !ok {
			b.free()
		}
	}()
	for i, d := range devs {
		dp := plan.Devices[i]
		ds := &devState{d: d, first: dp.FirstLayer, end: dp.EndLayer}
		b.devs = append(b.devs, ds)
		if dp.EndLayer == dp.FirstLayer && !dp.HoldsHead && i != 0 {
			continue
		}
		if err := b.allocBuffers(ds, dp, in); err != nil {
			return nil, err
		}
		for l := dp.FirstLayer; l < dp.EndLayer; l++ {
			// one allocation per layer (its arena), sized exactly by pass 1
			ar, err := newArena(d, in.layerBytes[l])
			if err != nil {
				return nil, fmt.Errorf("cuda: %s: layer %d (%s): %w", d.Name(), l, gb(in.layerBytes[l]), err)
			}
			lw, err := ld.uploadLayer(ar, l)
			lw.arena = ar.base
			if err == nil {
				b.setFusion(&lw)
			}
			ds.layers = append(ds.layers, lw)
			if err != nil {
				return nil, err
			}
		}
		if dp.HoldsHead {
			b.headDev = i
		}
	}
	// embedding on device 0, head (and its embedding copy when tied) on the head device
	d0, dh := b.devs[0], b.devs[b.headDev]
	if d0.embed, err = allocCopy(d0.d, embRaw); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", spec.EmbedTensor(), err)
	}
	d0.embedDT = embDT
	if err := b.gemma4Upload(d0, g4h); err != nil {
		return nil, err
	}
	if headShared {
		if b.headDev == 0 {
			head.bufs = nil
			dh.head = &devLinear{hostLinear: head, ptrs: []device.Ptr{d0.embed}}
		} else if dh.head, err = upload(dh.d, head); err != nil {
			return nil, err
		}
	} else if dh.head, err = upload(dh.d, head); err != nil {
		return nil, err
	}
	norm, err := ld.norm(spec.FinalNormTensor(), C)
	if err != nil {
		return nil, err
	}
	if dh.finalNorm, err = allocCopy(dh.d, norm); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

// Plan returns the memory plan the backend was loaded with.
func (b *Backend) Plan() *Plan { return b.plan }

func allocCopy(d device.Device, data []byte) (device.Ptr, error) {
	p, err := d.Alloc(int64(max(len(data), 1)))
	if err != nil {
		return 0, err
	}
	if err := d.CopyIn(p, data); err != nil {
		return 0, err
	}
	return p, nil
}

func (b *Backend) allocBuffers(ds *devState, dp DevicePlan, in planInput) error {
	if dp.Scratch > 0 {
		p, err := ds.d.Alloc(dp.Scratch)
		if err != nil {
			return fmt.Errorf("cuda: %s: scratch of %d bytes: %w", ds.d.Name(), dp.Scratch, err)
		}
		ds.scratch = p
	}
	ds.active = true
	if err := b.allocAct(ds); err != nil {
		return err
	}
	if !dp.HoldsHead {
		return nil
	}
	s := b.spec
	R, V := int64(b.opt.HeadRows), int64(s.Vocab)
	ds.topCap = 16
	for _, a := range []struct {
		p *device.Ptr
		n int64
	}{{&ds.logits, R * V * 4}, {&ds.base, R * V * 4}, {&ds.targets, R * 4}, {&ds.nll, R * 4}, {&ds.kl, R * 4}, {&ds.top, R * int64(ds.topCap) * 4}} {
		p, err := ds.d.Alloc(a.n)
		if err != nil {
			return fmt.Errorf("cuda: %s: allocating %d bytes: %w", ds.d.Name(), a.n, err)
		}
		*a.p = p
	}
	return nil
}

// actBuffers lists the per-window buffers of a device with their sizes for
// windows of T tokens.
func (b *Backend) actBuffers(ds *devState, T int) []struct {
	p *device.Ptr
	n int64
} {
	s := b.spec
	C, Q, KV, I, D := s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.MLPWidth(), s.HeadDim
	if s.Gemma4 != nil { // per-layer head sizes: the widest layer's
		D, Q, KV = gemma4Dims(s)
	}
	t := int64(T)
	ao, as, aw := attnBuffers(T, s.Heads, D, b.gemmDT, b.scoreCap())
	bufs := []struct {
		p *device.Ptr
		n int64
	}{
		{&ds.x, t * int64(C) * 4}, {&ds.h, t * int64(C) * 4}, {&ds.proj, t * int64(C) * 4},
		{&ds.xa, t * int64(max(C, Q, I, linearWidth(s))*b.gemmDT.Size())},
		{&ds.q, t * int64(Q) * 4}, {&ds.att, t * int64(Q) * 4}, {&ds.k, t * int64(KV) * 4}, {&ds.v, t * int64(KV) * 4},
		{&ds.gate, t * int64(I) * 4}, {&ds.up, t * int64(I) * 4}, {&ds.ids, t * 4},
		{&ds.cos, t * int64(D/2) * 4}, {&ds.sin, t * int64(D/2) * 4},
		{&ds.qa, ao}, {&ds.ka, ao}, {&ds.va, ao}, {&ds.scores, as}, {&ds.weights, aw},
	}
	if s.LocalRopeTheta > 0 {
		bufs = append(bufs, struct {
			p *device.Ptr
			n int64
		}{&ds.cosL, t * int64(D/2) * 4}, struct {
			p *device.Ptr
			n int64
		}{&ds.sinL, t * int64(D/2) * 4})
	}
	if s.AttnOutputGate {
		bufs = append(bufs, struct {
			p *device.Ptr
			n int64
		}{&ds.qg, t * int64(2*Q) * 4}, struct {
			p *device.Ptr
			n int64
		}{&ds.qgate, t * int64(Q) * 4})
	}
	if la := s.LinearAttn; la != nil {
		v, cd := int64(la.ValueHeads*la.ValueDim), int64(s.ConvDim())
		for _, a := range []struct {
			p *device.Ptr
			n int64
		}{{&ds.mixed, t * cd * 4}, {&ds.conv, t * cd * 4}, {&ds.z, t * v * 4}, {&ds.core, t * v * 4},
			{&ds.lb, t * int64(la.ValueHeads) * 4}, {&ds.la, t * int64(la.ValueHeads) * 4}, {&ds.dst, v * int64(la.KeyDim) * 4}} {
			bufs = append(bufs, a)
		}
	}
	if s.MoE != nil {
		bufs = append(bufs, struct {
			p *device.Ptr
			n int64
		}{&ds.moeIn, t * int64(C) * 4}, struct {
			p *device.Ptr
			n int64
		}{&ds.moeOut, t * int64(C) * 4})
	}
	if b.fused[fuseQKV] {
		bufs = append(bufs, struct {
			p *device.Ptr
			n int64
		}{&ds.qkv, t * int64(Q+2*KV) * 4})
	}
	if b.fused[fuseGU] {
		bufs = append(bufs, struct {
			p *device.Ptr
			n int64
		}{&ds.gu, t * int64(2*I) * 4})
	}
	if s.Gemma4 != nil {
		bufs = append(bufs, b.gemma4Buffers(ds, T)...)
	}
	return bufs
}

// actBytes is the size of the per-window buffers of a device for windows
// of T tokens.
func (b *Backend) actBytes(T int) int64 {
	var n int64
	for _, a := range b.actBuffers(&devState{}, T) {
		n += max(a.n, 1)
	}
	return n
}

// allocAct allocates the per-window buffers for b.opt.MaxTokens tokens and
// uploads the RoPE tables (computed in float64 from arch's inv_freq,
// rounded once to fp32).
func (b *Backend) allocAct(ds *devState) error {
	T, D := b.opt.MaxTokens, b.spec.HeadDim
	for _, a := range b.actBuffers(ds, T) {
		p, err := ds.d.Alloc(max(a.n, 1))
		if err != nil {
			return fmt.Errorf("cuda: %s: allocating %d bytes of activations: %w", ds.d.Name(), a.n, err)
		}
		*a.p = p
	}
	if b.spec.Gemma4 != nil { // one table pair per layer type (gemma4.go)
		return b.gemma4Tables(ds, T)
	}
	inv := b.invFreq
	if inv == nil {
		inv = b.spec.RopeInvFreq()
	}
	if err := b.ropeTables(ds.d, ds.cos, ds.sin, inv, T, D, arch.RopeAttentionFactor(b.spec.Config.RopeScaling)); err != nil {
		return err
	}
	if th := b.spec.LocalRopeTheta; th > 0 { // gemma3: rotary_emb_local, the default RoPE of base rope_local_base_freq
		return b.ropeTables(ds.d, ds.cosL, ds.sinL, arch.RopeInvFreq(D, th, nil), T, D, 1)
	}
	return nil
}

// ropeTables uploads cos and sin of pos·inv[j] for positions [0, T) and
// head size D, times the rope's attention scaling af (YaRN; 1 otherwise),
// in float64 rounded once to fp32.
func (b *Backend) ropeTables(d device.Device, cosP, sinP device.Ptr, inv []float64, T, D int, af float64) error {
	cs, sn := make([]float32, T*D/2), make([]float32, T*D/2)
	for p := 0; p < T; p++ {
		for j := range inv { // D/2 frequencies, fewer with partial rotary (qwen3_5)
			ang := float64(p) * inv[j]
			cs[p*D/2+j], sn[p*D/2+j] = float32(math.Cos(ang)*af), float32(math.Sin(ang)*af)
		}
	}
	if err := d.CopyIn(cosP, f32Bytes(cs)); err != nil {
		return err
	}
	return d.CopyIn(sinP, f32Bytes(sn))
}

// grow reallocates the per-window buffers of every device for windows of T
// tokens (a window longer than Options.MaxTokens).
func (b *Backend) grow(T int) error {
	if T <= b.opt.MaxTokens {
		return nil
	}
	if b.opt.Log != nil {
		fmt.Fprintf(b.opt.Log, "%s: growing the per-window buffers from %d to %d tokens\n", b.opt.Name, b.opt.MaxTokens, T)
	}
	for _, ds := range b.devs {
		if !ds.active {
			continue
		}
		for _, a := range b.actBuffers(ds, 0) {
			if *a.p != 0 {
				if err := ds.d.Free(*a.p); err != nil {
					return err
				}
				*a.p = 0
			}
		}
	}
	b.opt.MaxTokens = T
	for _, ds := range b.devs {
		if !ds.active {
			continue
		}
		if err := b.allocAct(ds); err != nil {
			b.broken = fmt.Errorf("%w (window of %d tokens; the memory plan was made for windows of %d)", err, T, b.plan.MaxTokens)
			return b.broken
		}
		ds.xaCastOf = 0
	}
	return nil
}

// free releases every allocation (errors are ignored: devices are closed
// by their owner anyway).
func (b *Backend) free() {
	for _, ds := range b.devs {
		for _, p := range ds.all() {
			if p != 0 {
				ds.d.Free(p)
			}
		}
	}
	b.devs = nil
}

func (ds *devState) all() []device.Ptr {
	ps := []device.Ptr{ds.scratch, ds.x, ds.h, ds.proj, ds.xa, ds.q, ds.att, ds.k, ds.v, ds.gate, ds.up, ds.moeIn, ds.moeOut, ds.ids, ds.cos, ds.sin, ds.cosL, ds.sinL,
		ds.qa, ds.ka, ds.va, ds.scores, ds.weights, ds.qkv, ds.gu,
		ds.qg, ds.qgate, ds.mixed, ds.conv, ds.z, ds.core, ds.lb, ds.la, ds.dst,
		ds.embed, ds.finalNorm, ds.logits, ds.base, ds.targets, ds.nll, ds.kl, ds.top}
	ps = append(ps, ds.g4.ptrs()...)
	for _, l := range ds.layers {
		if l.arena != 0 { // the layer's tensors are pieces of its arena
			ps = append(ps, l.arena)
			continue
		}
		ps = append(ps, l.attnNorm, l.mlpNorm, l.qNorm, l.kNorm, l.postAttnNorm, l.postMLPNorm, l.router32, l.pleNorm,
			l.routerW, l.preMoENorm, l.postMLPNorm1, l.postMoENorm, l.sinks, l.guBias, l.dnBias)
		ps = append(ps, l.bias[:]...)
		for _, li := range l.lin {
			if li != nil {
				ps = append(ps, li.ptrs...)
			}
		}
		for _, x := range l.experts {
			for _, li := range x {
				if li != nil {
					ps = append(ps, li.ptrs...)
				}
			}
		}
	}
	if ds.head != nil && ds.head.bufs == nil && !(len(ds.head.ptrs) == 1 && ds.head.ptrs[0] == ds.embed) {
		ps = append(ps, ds.head.ptrs...)
	}
	seen := map[device.Ptr]bool{}
	out := ps[:0]
	for _, p := range ps {
		if p != 0 && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Info implements backends.Backend.
func (b *Backend) Info() backends.Info {
	var names []string
	for _, d := range b.devs {
		names = append(names, d.d.Name())
	}
	return backends.Info{Name: b.opt.Name, Precision: b.gemmDT.String(), Devices: names, Vocab: b.spec.Vocab}
}

// Close frees the device memory (the devices themselves belong to the caller).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.free()
		b.closed = true
	}
	return nil
}

// Supports reports whether the CUDA forward pass computes every operation
// of spec, or names the first it lacks (wrapping arch.ErrUnsupported), so
// that a family with an operation that has no kernel is refused instead of
// computed as the llama graph (a wrong number). Every declared family is
// computed today: gemma's (1 + weight) norms, embedding scale, sandwich
// norms, tanh-gelu MLP, query_pre_attn_scalar, local RoPE and soft-capping
// have their kernels (kernels/gemma.cu, issue 14), qwen3_5's Gated DeltaNet,
// output gate, partial rotary and shared expert theirs (kernels/deltanet.cu),
// gemma4_text's per-layer inputs theirs (kernels/gemma4.cu; its other
// operations run on existing kernels, gemma4.go), gpt_oss's (gptoss.go,
// kernels/gptoss.cu, sinks in attn_softmax); YaRN's attention factor
// scales the RoPE tables.
func Supports(spec *arch.Spec) error {
	var miss []string
	if rs := spec.Config.RopeScaling; rs != nil && rs.Type == "yarn" && spec.LocalRopeTheta > 0 {
		miss = append(miss, "YaRN RoPE beside a local RoPE")
	}
	if len(miss) > 0 {
		return fmt.Errorf("cuda: %w: %s needs %s, not implemented by the CUDA backend yet", arch.ErrUnsupported, spec.Name, strings.Join(miss, ", "))
	}
	return nil
}

// f32s converts KV cache scales to the fp32 the cache kernels take (exact
// for the F32, BF16 and F16 values checkpoints store).
func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// linearWidth is the widest Linear input of a Gated DeltaNet layer
// (out_proj's value heads·value dim), 0 without one.
func linearWidth(s *arch.Spec) int {
	if la := s.LinearAttn; la != nil {
		return la.ValueHeads * la.ValueDim
	}
	return 0
}
