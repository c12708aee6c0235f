package reference

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/detmath"
	"github.com/qppl/qppl/gemm"
	"github.com/qppl/qppl/quant"
)

// Options configures the reference backend.
type Options struct {
	// Threads is the number of goroutines running the matrix products and
	// the attention heads; 0 means runtime.GOMAXPROCS(0). Results are
	// bit-identical for every value.
	Threads int
	// AllowUnusedTensors lets New bind a checkpoint holding tensors the
	// forward pass and the format do not use; by default New refuses it
	// with an error wrapping checkpoint.ErrUnused that names them.
	AllowUnusedTensors bool
	// KVCacheQuant is --kv-cache-quant: quant.KVQuantAuto (on when the
	// checkpoint declares a quantized KV cache), KVQuantOn or KVQuantOff
	// (weights alone; the cache scales are still read and checked).
	KVCacheQuant string
}

// Backend implements backends.Backend, backends.LogProber and
// backends.Prober. Calls are serialised by a mutex (one workspace).
type Backend struct {
	mu     sync.Mutex
	m      *model
	ws     workspace
	closed bool
}

var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.LogProber = (*Backend)(nil)
	_ backends.Prober    = (*Backend)(nil)
)

// New opens the reference backend over an opened checkpoint. Every Linear
// goes through the checkpoint's quant.Scheme, so any format package quant
// decodes is evaluated exactly. The caller keeps ownership of m and closes
// it after the backend.
func New(m *checkpoint.Model, opt Options) (*Backend, error) {
	if m == nil || m.Config == nil {
		return nil, errors.New("reference: nil model or config")
	}
	if opt.Threads < 0 {
		return nil, fmt.Errorf("reference: Threads %d < 0", opt.Threads)
	}
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		return nil, fmt.Errorf("reference: %s: %w", m.Dir, err)
	}
	kvOn, err := scheme.KVQuantEnabled(opt.KVCacheQuant)
	if err != nil {
		return nil, fmt.Errorf("reference: %s: %w", m.Dir, err)
	}
	usage := m.TrackUsage()
	defer usage.Stop()
	usage.Ignore(m.Config.IgnoredPrefixes) // a vision tower: left alone on purpose, reported by the caller
	b, err := newBackend(m.Config, checkpointSource{m: m, scheme: scheme}, opt.Threads)
	if err != nil {
		return nil, err
	}
	b.m.kvQuant = kvOn
	if !opt.AllowUnusedTensors {
		if err := usage.Check("reference"); err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
	}
	return b, nil
}

func newBackend(cfg *checkpoint.Config, src source, threads int) (*Backend, error) {
	return newBackendKernel(cfg, src, threads, gemm.KernelAuto)
}

// newBackendKernel is newBackend with an explicit gemm kernel (tests).
func newBackendKernel(cfg *checkpoint.Config, src source, threads int, kernel string) (*Backend, error) {
	spec, err := arch.For(cfg)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	mod, err := bind(spec, src)
	if err != nil {
		return nil, err
	}
	mod.threads = threads
	if mod.threads <= 0 {
		mod.threads = runtime.GOMAXPROCS(0)
	}
	if mod.mul, err = gemm.NewKernel(mod.threads, kernel); err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	return &Backend{m: mod}, nil
}

// Info implements backends.Backend.
func (b *Backend) Info() backends.Info {
	v := 0
	if b.m != nil {
		v = b.m.V
	}
	return backends.Info{Name: "reference", Precision: "fp64", Devices: []string{"cpu"}, Vocab: v}
}

// Close releases the backend's buffers. It does not close the checkpoint.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.ws = workspace{}
	return nil
}

// check validates a window against the contract (backends.Window.Validate)
// and the model's context length.
func (b *Backend) check(w backends.Window) error {
	if b.closed || b.m == nil {
		return errors.New("reference: backend is closed")
	}
	if err := w.Validate(b.m.V); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if err := b.m.spec.CheckContext(len(w.Tokens)); err != nil {
		return fmt.Errorf("reference: window %d: %w", w.Index, err)
	}
	if err := b.m.spec.CheckTokens(w.Tokens); err != nil {
		return fmt.Errorf("reference: window %d: %w", w.Index, err)
	}
	return nil
}

// Score implements backends.Backend. It runs the forward pass over
// w.Tokens and evaluates the head only at the logits positions it needs.
func (b *Backend) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(w); err != nil {
		return backends.Scores{}, err
	}
	V := b.m.V
	if err := req.Validate(V); err != nil {
		return backends.Scores{}, fmt.Errorf("reference: %w", err)
	}
	sc := backends.NewScores(w, req)
	lo, hi := req.LogitsRange(w) // logits rows of the targets (all rows for KL at every position)
	var base, probs []float64
	if req.Base != nil {
		base, probs = make([]float64, V), make([]float64, V)
	}
	if lo >= hi {
		return sc, nil
	}
	if err := b.m.forward(ctx, &b.ws, w.Tokens, nil); err != nil {
		return backends.Scores{}, fmt.Errorf("reference: %w", err)
	}
	var idx []int32
	if req.TopK > 0 {
		idx = make([]int32, V)
	}
	err := b.m.headRows(ctx, &b.ws, lo, hi, func(pos int, lp []float64) error {
		ti, target := w.Target(pos)
		if target {
			sc.NLL[ti] = -lp[w.Tokens[pos+1]]
			if req.TopK > 0 {
				topK(lp, req.TopK, idx, sc.Top[ti*req.TopK:(ti+1)*req.TopK])
			}
		}
		if req.Base == nil {
			return nil
		}
		ki := req.KLIndex(w, pos)
		if err := req.Base.LogProbs(ki, base); err != nil {
			return fmt.Errorf("reference: window %d: base log-probs of KL position %d: %w", w.Index, ki, err)
		}
		kl, err := klDiv(base, lp, probs)
		if err != nil {
			return fmt.Errorf("reference: window %d: KL position %d: %w", w.Index, ki, err)
		}
		sc.KL[ki] = kl
		if !req.KLAllPositions {
			sc.BaseNLL[ti] = -base[w.Tokens[pos+1]]
		}
		return nil
	})
	if err != nil {
		return backends.Scores{}, fmt.Errorf("reference: %w", err)
	}
	return sc, nil
}

// klDiv returns KL(P‖Q) = Σ_i p_i (logp_i − logq_i), summed in index order;
// terms with p_i = 0 contribute 0. p_i = detmath.Exp(logp_i) and every
// product is rounded on its own, so the bits are the same on every GOARCH.
// probs is scratch of len(logp).
func klDiv(logp, logq, probs []float64) (float64, error) {
	for i, lp := range logp {
		if math.IsNaN(lp) || lp > 0 {
			return 0, fmt.Errorf("invalid base log-prob %v at id %d", lp, i)
		}
	}
	probs = probs[:len(logp)]
	detmath.ExpTo(probs, logp)
	var kl float64
	for i, p := range probs {
		if p == 0 {
			continue
		}
		kl += float64(p * (logp[i] - logq[i])) // no fused multiply-add
	}
	return kl, nil
}

// topK writes the ids of the k largest values of lp into dst, largest
// first, ties broken by lower id. idx is scratch of len(lp).
func topK(lp []float64, k int, idx []int32, dst []int32) {
	before := func(a, b int32) bool { // a ranks before b
		if lp[a] != lp[b] {
			return lp[a] > lp[b]
		}
		return a < b
	}
	if k > 32 {
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int {
			if before(a, b) {
				return -1
			}
			if before(b, a) {
				return 1
			}
			return 0
		})
		copy(dst, idx[:k])
		return
	}
	// Insertion into the k best seen so far.
	n := 0
	for i := range lp {
		id := int32(i)
		if n == k && !before(id, dst[k-1]) {
			continue
		}
		j := n
		if n < k {
			n++
		} else {
			j = k - 1
		}
		for j > 0 && before(id, dst[j-1]) {
			dst[j] = dst[j-1]
			j--
		}
		dst[j] = id
	}
}

// LogProbs implements backends.LogProber: emit receives the log-softmax row
// of every logits position in [from, len(w.Tokens)), in order.
func (b *Backend) LogProbs(ctx context.Context, w backends.Window, from int, emit func(pos int, lp []float64) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(w); err != nil {
		return err
	}
	T := len(w.Tokens)
	if err := w.CheckFrom(from); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if from == T {
		return nil
	}
	if err := b.m.forward(ctx, &b.ws, w.Tokens, nil); err != nil {
		return fmt.Errorf("reference: window %d: %w", w.Index, err)
	}
	return b.m.headRows(ctx, &b.ws, from, T, emit)
}

// Probe implements backends.Prober. Layer -1 holds arch.SiteEmbed and
// arch.SiteFinalNorm; layers 0..L-1 hold the other sites.
func (b *Backend) Probe(ctx context.Context, w backends.Window, at []backends.Point) (map[backends.Point][]float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(w); err != nil {
		return nil, err
	}
	want := make(map[backends.Point]bool, len(at))
	for _, p := range at {
		ok := false
		switch p.Site {
		case arch.SiteEmbed, arch.SiteFinalNorm:
			ok = p.Layer == -1
		case arch.SiteAttnNorm, arch.SiteAttnOut, arch.SiteMLPNorm, arch.SiteMLPOut, arch.SiteLayerOut, arch.SiteKCache, arch.SiteVCache:
			ok = p.Layer >= 0 && p.Layer < b.m.L
		case arch.SiteRouter:
			ok = p.Layer >= 0 && p.Layer < b.m.L && b.m.spec.Sparse(p.Layer)
		}
		if !ok {
			return nil, fmt.Errorf("reference: unknown probe point layer %d site %q", p.Layer, p.Site)
		}
		want[p] = true
	}
	T := len(w.Tokens)
	out := make(map[backends.Point][]float64, len(want))
	probe := func(layer int, site string, data []float64, width int) {
		p := backends.Point{Layer: layer, Site: site}
		if want[p] {
			out[p] = append([]float64(nil), data[:T*width]...)
		}
	}
	if err := b.m.forward(ctx, &b.ws, w.Tokens, probe); err != nil {
		return nil, fmt.Errorf("reference: window %d: %w", w.Index, err)
	}
	return out, nil
}

// CalibrateKV returns, for every decoder layer of the dense or quantized
// checkpoint m and each of its key/value heads, the largest |key| (after
// RoPE and k-norm) and |value| entering the KV cache over the windows
// (token ids), unquantized: amax[layer][0][head] for keys, [1][head] for
// values. It is the static min-max calibration llm-compressor and ModelOpt
// run before they write k_scale/v_scale (fixtures/quantizer writes them
// from these).
func CalibrateKV(ctx context.Context, m *checkpoint.Model, windows [][]int32) ([][2][]float64, error) {
	b, err := New(m, Options{KVCacheQuant: quant.KVQuantOff, AllowUnusedTensors: true})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	KV, D := b.m.KV, b.m.D
	amax := make([][2][]float64, b.m.L)
	var at []backends.Point
	for l := range amax {
		amax[l] = [2][]float64{make([]float64, KV), make([]float64, KV)}
		at = append(at, backends.Point{Layer: l, Site: arch.SiteKCache}, backends.Point{Layer: l, Site: arch.SiteVCache})
	}
	for i, ids := range windows {
		got, err := b.Probe(ctx, backends.Window{Index: i, Tokens: ids, First: 1}, at)
		if err != nil {
			return nil, err
		}
		for l := range amax {
			for j, site := range []string{arch.SiteKCache, arch.SiteVCache} {
				for e, v := range got[backends.Point{Layer: l, Site: site}] {
					h := e / D % KV // [T][KV][D]
					amax[l][j][h] = math.Max(amax[l][j][h], math.Abs(v))
				}
			}
		}
	}
	return amax, nil
}
