package reference

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/internal/oracle"
)

// toyModel is a 1-layer llama with hidden 2, one head of width 2, vocab 3,
// intermediate 1, eps 0 and theta 10000 (so inv_freq = [1]): small enough
// that its log-probs have the closed forms of TestToyHandComputed.
func toyModel() (*checkpoint.Config, memSource) {
	cfg := &checkpoint.Config{
		ModelType: "llama", VocabSize: 3, HiddenSize: 2, IntermediateSize: 1,
		NumHiddenLayers: 1, NumAttentionHeads: 1, NumKeyValueHeads: 1, HeadDim: 2,
		RMSNormEps: 0, RopeTheta: 10000, TieWordEmbeddings: true, HiddenAct: "silu",
	}
	m := func(shape []int, v ...float64) memTensor { return memTensor{v, shape} }
	s := memSource{t: map[string]memTensor{
		"model.embed_tokens.weight":                      m([]int{3, 2}, 1, 1, 1, -1, -1, -1),
		"model.norm.weight":                              m([]int{2}, 1, 1),
		"model.layers.0.input_layernorm.weight":          m([]int{2}, 1, 1),
		"model.layers.0.post_attention_layernorm.weight": m([]int{2}, 1, 1),
		"model.layers.0.self_attn.q_proj.weight":         m([]int{2, 2}, 1, 0, 0, 1),
		"model.layers.0.self_attn.k_proj.weight":         m([]int{2, 2}, 1, 0, 0, 1),
		"model.layers.0.self_attn.v_proj.weight":         m([]int{2, 2}, 1, 0, 0, 1),
		"model.layers.0.self_attn.o_proj.weight":         m([]int{2, 2}, 1, 0, 0, 1),
		"model.layers.0.mlp.gate_proj.weight":            m([]int{1, 2}, 1, 1),
		"model.layers.0.mlp.up_proj.weight":              m([]int{1, 2}, 1, 0),
		"model.layers.0.mlp.down_proj.weight":            m([]int{2, 1}, 1, 0),
	}}
	return cfg, s
}

func TestToyHandComputed(t *testing.T) {
	silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	logits := func(x0, x1 float64) []float64 { // final RMSNorm (w=1, eps=0), tied head
		r := math.Sqrt((x0*x0 + x1*x1) / 2)
		y0, y1 := x0/r, x1/r
		return []float64{y0 + y1, y0 - y1, -y0 - y1}
	}
	lsm := func(z []float64) []float64 {
		s := math.Exp(z[0]) + math.Exp(z[1]) + math.Exp(z[2])
		return []float64{z[0] - math.Log(s), z[1] - math.Log(s), z[2] - math.Log(s)}
	}
	// Tokens [0 1]: embeddings e0=[1,1], e1=[1,-1] are their own RMSNorm.
	// Position 0: attention returns v0=[1,1]; x=[2,2]; MLP adds [silu(2)·1, 0].
	want0 := lsm(logits(2+silu(2), 2))
	// Position 1: q1 = k1 = R(1)[1,-1], k0 = [1,1]: scores √2·sin(1) and √2.
	s0, s1 := math.Sqrt2*math.Sin(1), math.Sqrt2
	p0 := math.Exp(s0) / (math.Exp(s0) + math.Exp(s1))
	p1 := math.Exp(s1) / (math.Exp(s0) + math.Exp(s1))
	x0, x1 := 2.0, p0-p1-1 // e1 + p0·[1,1] + p1·[1,-1]
	r := math.Sqrt((x0*x0 + x1*x1) / 2)
	h0, h1 := x0/r, x1/r
	want1 := lsm(logits(x0+silu(h0+h1)*h0, x1))

	cfg, src := toyModel()
	b, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := backends.Window{Tokens: []int32{0, 1}, First: 1}
	var got [][]float64
	err = b.LogProbs(context.Background(), w, 0, func(pos int, lp []float64) error {
		got = append(got, append([]float64(nil), lp...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range [][]float64{want0, want1} {
		for v := range want {
			if d := math.Abs(got[p][v] - want[v]); d > 1e-14 {
				t.Errorf("pos %d id %d: got %.17g, want %.17g (diff %g)", p, v, got[p][v], want[v], d)
			}
		}
	}
	sc, err := b.Score(context.Background(), w, backends.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.NLL) != 1 || math.Abs(sc.NLL[0]+want0[1]) > 1e-14 {
		t.Errorf("NLL %v, want [%.17g]", sc.NLL, -want0[1])
	}
}

// TestRopeInvFreq pins the arch inverse frequencies the forward uses to
// hand-derived values (the oracle computes its own; see TestMatchesOracle).
func TestRopeInvFreq(t *testing.T) {
	// dim 6, theta 1e4: default frequencies 1, 1e4^(-1/3), 1e4^(-2/3)
	// (wavelengths 6.28, 135.4, 2916.4).
	f1, f2 := math.Pow(1e4, -1.0/3), math.Pow(1e4, -2.0/3)
	// llama3 with original context 1000, low 1 (wavelen 1000), high 10
	// (wavelen 100), factor 4: f0 high → kept, f1 medium → smoothed, f2 low → /4.
	smooth := (1000/(2*math.Pi/f1) - 1) / (10 - 1)
	cases := []struct {
		name string
		rs   *checkpoint.RopeScaling
		want []float64
	}{
		{"default", nil, []float64{1, f1, f2}},
		{"default-explicit", &checkpoint.RopeScaling{Type: "default"}, []float64{1, f1, f2}},
		{"linear", &checkpoint.RopeScaling{Type: "linear", Factor: 2}, []float64{0.5, f1 / 2, f2 / 2}},
		{"llama3", &checkpoint.RopeScaling{Type: "llama3", Factor: 4, LowFreqFactor: 1, HighFreqFactor: 10, OriginalMaxPositionEmbeddings: 1000},
			[]float64{1, (1-smooth)*f1/4 + smooth*f1, f2 / 4}},
	}
	for _, c := range cases {
		got := arch.RopeInvFreq(6, 1e4, c.rs)
		for i := range c.want {
			if math.Abs(got[i]-c.want[i]) > 1e-15*c.want[i] {
				t.Errorf("%s: inv_freq[%d] = %.17g, want %.17g", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// allLogProbs collects every log-prob row of a window.
func allLogProbs(t *testing.T, b *Backend, toks []int32) [][]float64 {
	t.Helper()
	var out [][]float64
	err := b.LogProbs(context.Background(), backends.Window{Tokens: toks, First: 1}, 0, func(pos int, lp []float64) error {
		if pos != len(out) {
			t.Fatalf("emit pos %d, want %d", pos, len(out))
		}
		out = append(out, append([]float64(nil), lp...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxAbsDiff(a, b [][]float64) (float64, int, int) {
	var worst float64
	wp, wv := -1, -1
	for p := range a {
		for v := range a[p] {
			if d := math.Abs(a[p][v] - b[p][v]); d > worst || math.IsNaN(d) {
				worst, wp, wv = d, p, v
			}
		}
	}
	return worst, wp, wv
}

// TestMatchesOracle compares every log-prob of a 70-token window (longer
// than one 64-row attention block and one head chunk) with the independent
// from-scratch implementation. Error budget: both sum O(100) float64 terms
// per dot product, so differences are ~1e-15 relative; 1e-12 absolute on
// log-probs of magnitude < 10 leaves a wide margin while catching any
// formula error (which shows up at >1e-6).
func TestMatchesOracle(t *testing.T) {
	for name, cfg := range testConfigs() {
		t.Run(name, func(t *testing.T) {
			src := randomWeights(cfg, 11)
			b, err := newBackend(cfg, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			toks := randomTokens(70, cfg.VocabSize, 3)
			got := allLogProbs(t, b, toks)
			want, err := oracle.LogProbs(cfg, src.getter, toks, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, want); d > 1e-12 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			// Decoding whole (a tied head in vocabulary blocks of 10 rows:
			// 3 full blocks and a remainder of 7) gives the same log-probs.
			b.m.vocabBlock, b.m.wholeDecode = 10, true
			b.ws = workspace{}
			if d, p, v := maxAbsDiff(allLogProbs(t, b, toks), want); d > 1e-12 {
				t.Errorf("vocab blocks of 10: max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
		})
	}
}

// scaleQuantizer is a stand-in activation quantizer: it rounds every value
// to a multiple of step and counts its calls. It checks that each Linear
// gets its own copy (x must still be the unquantized input).
type scaleQuantizer struct {
	step  float64
	calls *int
}

func (q scaleQuantizer) Quantize(x []float64, rows, cols int) error {
	*q.calls++
	if len(x) != rows*cols {
		return errors.New("bad shape")
	}
	for i, v := range x {
		x[i] = math.RoundToEven(v/q.step) * q.step
	}
	return nil
}

func TestActivationQuantization(t *testing.T) {
	cfg := testConfigs()["qwen2-bias"]
	src := randomWeights(cfg, 5)
	toks := randomTokens(20, cfg.VocabSize, 9)
	plain, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := allLogProbs(t, plain, toks)

	calls := 0
	steps := map[string]float64{"self_attn.q_proj": 0.25, "self_attn.k_proj": 0.5, "self_attn.v_proj": 0.125, "mlp.down_proj": 0.0625}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		for mod, st := range steps {
			src.aq["model.layers."+itoa(l)+"."+mod] = scaleQuantizer{st, &calls}
		}
	}
	qb, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := allLogProbs(t, qb, toks)
	if calls != len(steps)*cfg.NumHiddenLayers {
		t.Errorf("quantizer called %d times, want %d", calls, len(steps)*cfg.NumHiddenLayers)
	}
	if d, _, _ := maxAbsDiff(got, base); d < 1e-3 {
		t.Errorf("activation quantization changed log-probs by only %g", d)
	}
	want, err := oracle.LogProbs(cfg, src.getter, toks, oracle.Options{
		InputQuant: func(module string, x []float64, rows, cols int) error {
			if aq, ok := src.aq[module]; ok {
				return aq.Quantize(x, rows, cols)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(got, want); d > 1e-12 {
		t.Errorf("max |reference - oracle| with activation quantization = %g at pos %d id %d", d, p, v)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestDeterministic checks bit-identical results across runs, backends and
// thread counts, on a model large enough for the products to be split
// across goroutines.
func TestDeterministic(t *testing.T) {
	cfg := *testConfigs()["qwen3-qknorm-headdim6"]
	cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.HeadDim = 64, 192, 300, 16
	cfg.NumAttentionHeads = 5
	cfg.NumKeyValueHeads = 1
	src := randomWeights(&cfg, 2)
	toks := randomTokens(150, cfg.VocabSize, 4)
	b1, err := newBackend(&cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := newBackend(&cfg, src, 1)
	b3, _ := newBackend(&cfg, src, 3)
	a := allLogProbs(t, b1, toks)
	_ = allLogProbs(t, b1, toks[:33]) // a shorter window in between must not leave state behind
	runs := [][][]float64{allLogProbs(t, b1, toks), allLogProbs(t, b2, toks), allLogProbs(t, b3, toks)}
	for r, c := range runs {
		for p := range a {
			for v := range a[p] {
				if math.Float64bits(a[p][v]) != math.Float64bits(c[p][v]) {
					t.Fatalf("run %d pos %d id %d: %v, first run %v", r, p, v, c[p][v], a[p][v])
				}
			}
		}
	}
}

func TestCancellation(t *testing.T) {
	cfg := testConfigs()["llama-mha"]
	b, err := newBackend(cfg, randomWeights(cfg, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := backends.Window{Tokens: randomTokens(10, cfg.VocabSize, 1), First: 1}
	if _, err := b.Score(ctx, w, backends.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Score on cancelled context: %v", err)
	}
	if err := b.LogProbs(ctx, w, 0, func(int, []float64) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("LogProbs on cancelled context: %v", err)
	}
	// Cancelled from inside the run (between layers, via a probe-free
	// emit): the backend stays usable afterwards.
	ctx2, cancel2 := context.WithCancel(context.Background())
	err = b.LogProbs(ctx2, backends.Window{Tokens: randomTokens(130, cfg.VocabSize, 1), First: 1}, 0, func(pos int, _ []float64) error {
		if pos == 3 {
			cancel2()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel during head: %v", err)
	}
	if _, err := b.Score(context.Background(), w, backends.Request{}); err != nil {
		t.Errorf("Score after cancellation: %v", err)
	}
}

func TestProbe(t *testing.T) {
	cfg := testConfigs()["llama-llama3rope"]
	src := randomWeights(cfg, 8)
	b, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	toks := randomTokens(9, cfg.VocabSize, 2)
	w := backends.Window{Tokens: toks, First: 1}
	last := cfg.NumHiddenLayers - 1
	pts := []backends.Point{{Layer: -1, Site: arch.SiteEmbed}, {Layer: last, Site: arch.SiteLayerOut}, {Layer: -1, Site: arch.SiteFinalNorm}, {Layer: 0, Site: arch.SiteAttnNorm}, {Layer: 0, Site: arch.SiteMLPOut}}
	got, err := b.Probe(context.Background(), w, pts)
	if err != nil {
		t.Fatal(err)
	}
	C := cfg.HiddenSize
	emb := src.t["model.embed_tokens.weight"].data
	for p, id := range toks {
		for c := 0; c < C; c++ {
			if got[pts[0]][p*C+c] != emb[int(id)*C+c] {
				t.Fatalf("embed probe pos %d differs", p)
			}
		}
	}
	// final_norm = RMSNorm(layer_out of the last layer; model.norm).
	norm := src.t["model.norm.weight"].data
	x := got[pts[1]]
	for p := range toks {
		var ss float64
		for c := 0; c < C; c++ {
			ss += x[p*C+c] * x[p*C+c]
		}
		for c := 0; c < C; c++ {
			want := norm[c] * x[p*C+c] / math.Sqrt(ss/float64(C)+cfg.RMSNormEps)
			if math.Abs(got[pts[2]][p*C+c]-want) > 1e-13 {
				t.Fatalf("final_norm pos %d col %d: %g want %g", p, c, got[pts[2]][p*C+c], want)
			}
		}
	}
	for _, pt := range pts {
		if len(got[pt]) != len(toks)*C {
			t.Errorf("%v: len %d", pt, len(got[pt]))
		}
	}
	for _, bad := range []backends.Point{{Layer: 0, Site: arch.SiteEmbed}, {Layer: cfg.NumHiddenLayers, Site: arch.SiteAttnOut}, {Layer: 0, Site: "nope"}, {Layer: -1, Site: arch.SiteMLPNorm}} {
		if _, err := b.Probe(context.Background(), w, []backends.Point{bad}); err == nil {
			t.Errorf("probe point %+v accepted", bad)
		}
	}
}

func TestBindErrors(t *testing.T) {
	cfg := testConfigs()["qwen3-qknorm-headdim6"]
	cases := []struct {
		name   string
		mutate func(c *checkpoint.Config, s memSource)
		want   string
	}{
		{"missing q_norm", func(c *checkpoint.Config, s memSource) { delete(s.t, "model.layers.1.self_attn.q_norm.weight") },
			`tensor "model.layers.1.self_attn.q_norm.weight" not found`},
		{"missing lm_head", func(c *checkpoint.Config, s memSource) { c.TieWordEmbeddings = false }, `tensor "lm_head.weight" not found`},
		{"wrong k shape", func(c *checkpoint.Config, s memSource) {
			s.t["model.layers.0.self_attn.k_proj.weight"] = memTensor{make([]float64, 16*13), []int{13, 16}}
		}, "memory: model.layers.0.self_attn.k_proj: weight shape [13 16], want [12 16] from config.json"},
		{"wrong norm shape", func(c *checkpoint.Config, s memSource) {
			s.t["model.layers.1.post_attention_layernorm.weight"] = memTensor{make([]float64, 15), []int{15}}
		}, `memory: tensor "model.layers.1.post_attention_layernorm.weight" has shape [15], want [16]`},
		{"wrong embed shape", func(c *checkpoint.Config, s memSource) { c.VocabSize = 40 },
			`tensor "model.embed_tokens.weight" has shape [37 16], want [40 16] from config.json`},
		{"unsupported arch", func(c *checkpoint.Config, s memSource) { c.ModelType = "gpt2" }, `model_type "gpt2" (supported: llama, mistral, qwen2, qwen3`},
		{"bad heads", func(c *checkpoint.Config, s memSource) { c.NumKeyValueHeads = 3 }, "4 heads not divisible by 3 key/value heads"},
		{"gelu", func(c *checkpoint.Config, s memSource) { c.HiddenAct = "gelu" }, `hidden_act "gelu" (only silu is supported)`},
	}
	for _, tc := range cases {
		c := *cfg
		s := randomWeights(cfg, 1)
		tc.mutate(&c, s)
		if _, err := newBackend(&c, s, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Through a checkpoint, a wrong shape names the file holding the tensor.
	bad := randomWeights(cfg, 1)
	bad.t["model.norm.weight"] = memTensor{make([]float64, 8), []int{8}}
	dir := writeCheckpoint(t, t.TempDir(), cfg, bad)
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := filepath.Join(dir, "model.safetensors") + `: tensor "model.norm.weight" has shape [8], want [16]`
	if _, err := New(m, Options{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkpoint with a wrong norm: %v, want %q", err, want)
	}
}

// TestHeadActivationQuantization: an untied lm_head with an input quantizer
// quantizes the final-norm rows of the whole window once per forward pass,
// and agrees with the oracle given the same quantizer.
func TestHeadActivationQuantization(t *testing.T) {
	cfg := testConfigs()["llama-bias-linearrope"] // untied head
	src := randomWeights(cfg, 8)
	toks := randomTokens(20, cfg.VocabSize, 3)
	plain, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := allLogProbs(t, plain, toks)
	calls := 0
	src.aq["lm_head"] = scaleQuantizer{0.25, &calls}
	qb, err := newBackend(cfg, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := allLogProbs(t, qb, toks)
	if calls != 1 {
		t.Errorf("head quantizer called %d times, want 1", calls)
	}
	if d, _, _ := maxAbsDiff(got, base); d < 1e-3 {
		t.Errorf("head input quantization changed log-probs by only %g", d)
	}
	want, err := oracle.LogProbs(cfg, src.getter, toks, oracle.Options{
		InputQuant: func(module string, x []float64, rows, cols int) error {
			if aq, ok := src.aq[module]; ok {
				return aq.Quantize(x, rows, cols)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(got, want); d > 1e-12 {
		t.Errorf("max |reference - oracle| with head input quantization = %g at pos %d id %d", d, p, v)
	}
}
