package reference

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// countingSource counts the Dequantize calls of every Linear.
type countingSource struct {
	memSource
	n map[string]int
}

func (s countingSource) Linear(module string) (quant.Linear, error) {
	l, err := s.memSource.Linear(module)
	if err != nil {
		return nil, err
	}
	return countingLinear{l, s.n}, nil
}

type countingLinear struct {
	quant.Linear
	n map[string]int
}

func (l countingLinear) Dequantize(dst []float64) error {
	l.n[l.Module()]++
	return l.Linear.Dequantize(dst)
}

// moeOf returns cfg as a qwen3_moe whose every layer is a mixture of E
// experts (top k) of width intermediate_size, and its weights: dense's
// attention, norms, embedding and head; the router mlp.gate from router
// (nil: zeros, a uniform router); expert e a copy of dense's MLP when
// same(e), else random.
func moeOf(cfg *checkpoint.Config, dense memSource, E, k int, norm bool, router func(l, e, c int) float64, same func(e int) bool) (*checkpoint.Config, memSource) {
	m := *cfg
	m.ModelType = "qwen3_moe"
	m.MoE = &checkpoint.MoE{Experts: E, TopK: k, Intermediate: cfg.IntermediateSize, NormTopK: norm, Sparse: make([]bool, cfg.NumHiddenLayers)}
	for i := range m.MoE.Sparse {
		m.MoE.Sparse[i] = true
	}
	other := randomWeights(cfg, 99)
	src := memSource{t: map[string]memTensor{}, aq: map[string]quant.ActQuantizer{}}
	for name, t := range dense.t {
		if !strings.Contains(name, ".mlp.") {
			src.t[name] = t
		}
	}
	C := cfg.HiddenSize
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.mlp.", l)
		r := make([]float64, E*C)
		if router != nil {
			for e := 0; e < E; e++ {
				for c := 0; c < C; c++ {
					r[e*C+c] = router(l, e, c)
				}
			}
		}
		src.t[p+"gate.weight"] = memTensor{r, []int{E, C}}
		for e := 0; e < E; e++ {
			from := other
			if same(e) {
				from = dense
			}
			for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
				src.t[fmt.Sprintf("%sexperts.%d.%s.weight", p, e, proj)] = from.t[p+proj+".weight"]
			}
		}
	}
	return &m, src
}

// TestMixtureInvariants: a mixture whose chosen experts are all copies of
// a dense MLP, with routing weights summing to 1, computes that dense MLP;
// forced ties in the router take the experts torch.topk takes (3 experts:
// insertion sort, the lower indices first; internal/torchtopk); experts no token chose are never decoded; and every
// mixture agrees with the oracle.
func TestMixtureInvariants(t *testing.T) {
	cfg := testConfigs()["qwen3-qknorm-headdim6"]
	dense := randomWeights(cfg, 5)
	toks := randomTokens(40, cfg.VocabSize, 8)
	db, err := newBackend(cfg, dense, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := allLogProbs(t, db, toks)
	all := func(int) bool { return true }
	randomRouter := func(l, e, c int) float64 { return math.Sin(float64(1+l*977+e*131+c*7)) * 0.8 }
	cases := []struct {
		name        string
		E, k        int
		norm        bool
		router      func(l, e, c int) float64
		same        func(e int) bool
		equalsDense bool
		neverUsed   []int // experts that must never be decoded
	}{
		{"identical experts, uniform router", 4, 2, true, nil, all, true, nil},
		{"identical experts, random router", 4, 2, true, randomRouter, all, true, nil},
		{"full tie, top-1 takes expert 0", 3, 1, true, nil, func(e int) bool { return e == 0 }, true, []int{1, 2}},
		{"full tie, top-2 takes experts 0 and 1", 3, 2, true, nil, func(e int) bool { return e < 2 }, true, []int{2}},
		// Controls: the tie rule and the renormalisation are observable.
		{"full tie, expert 0 differs", 3, 1, true, nil, func(e int) bool { return e != 0 }, false, []int{1, 2}},
		{"identical experts, no renormalisation", 4, 2, false, nil, all, false, nil},
		{"random router and experts", 5, 2, false, randomRouter, func(e int) bool { return e == 3 }, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mcfg, msrc := moeOf(cfg, dense, c.E, c.k, c.norm, c.router, c.same)
			counts := map[string]int{}
			b, err := newBackend(mcfg, countingSource{msrc, counts}, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := allLogProbs(t, b, toks)
			d, p, v := maxAbsDiff(got, want)
			if c.equalsDense && d > 1e-12 {
				t.Errorf("max |mixture - dense| = %g at pos %d id %d", d, p, v)
			}
			if !c.equalsDense && d < 1e-6 {
				t.Errorf("mixture equals the dense model (max diff %g): the case does not test what it says", d)
			}
			ref, err := oracle.LogProbs(mcfg, msrc.getter, toks, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, ref); d > 1e-12 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			for l := 0; l < cfg.NumHiddenLayers; l++ {
				for _, e := range c.neverUsed {
					if n := counts[fmt.Sprintf("model.layers.%d.mlp.experts.%d.gate_proj", l, e)]; n != 0 {
						t.Errorf("layer %d expert %d decoded %d times, chosen by no token", l, e, n)
					}
				}
				if n := counts[fmt.Sprintf("model.layers.%d.mlp.experts.0.down_proj", l)]; c.k == 1 && n == 0 {
					t.Errorf("layer %d expert 0 never decoded", l)
				}
			}
		})
	}
}

// TestMixtureMemory: the reference holds one decoded weight at a time —
// its scratch buffer is the largest single matrix of a layer (one expert,
// the router or an attention projection), the same for 4 or 64 experts —
// and the workspace grows with the expert count only through the [T][E]
// router logits (activations).
func TestMixtureMemory(t *testing.T) {
	cfg := testConfigs()["qwen3-qknorm-headdim6"]
	dense := randomWeights(cfg, 5)
	toks := randomTokens(30, cfg.VocabSize, 8)
	sizes := map[int]int{}
	for _, E := range []int{4, 64} {
		mcfg, msrc := moeOf(cfg, dense, E, 2, true, func(l, e, c int) float64 { return math.Cos(float64(e*31 + c)) }, func(int) bool { return true })
		b, err := newBackend(mcfg, msrc, 1)
		if err != nil {
			t.Fatal(err)
		}
		allLogProbs(t, b, toks)
		C, I, q := cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads*cfg.HeadDim
		if want := max(C*q, I*C, E*C); b.m.scratch != want || len(b.ws.w) != want {
			t.Errorf("%d experts: scratch %d (buffer %d), want the largest single matrix %d", E, b.m.scratch, len(b.ws.w), want)
		}
		sizes[E] = len(b.ws.w)
	}
	if sizes[64] > 64*cfg.HiddenSize {
		t.Errorf("64 experts: scratch %d values, more than the router", sizes[64])
	}
}
