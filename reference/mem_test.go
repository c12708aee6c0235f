package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/quant"
)

// memTensor is a dense float64 tensor held in memory by tests.
type memTensor struct {
	data  []float64
	shape []int
}

// memSource is an in-memory source: dense Linears, optionally with an
// activation quantizer per module.
type memSource struct {
	t  map[string]memTensor
	aq map[string]quant.ActQuantizer
}

func (s memSource) Where(string) string { return "memory" }

func (s memSource) Float64(name string) ([]float64, []int, error) {
	t, ok := s.t[name]
	if !ok {
		return nil, nil, fmt.Errorf("tensor %q not found", name)
	}
	return append([]float64(nil), t.data...), append([]int(nil), t.shape...), nil
}

func (s memSource) Linear(module string) (quant.Linear, error) {
	t, ok := s.t[module+".weight"]
	if !ok {
		return nil, fmt.Errorf("tensor %q not found", module+".weight")
	}
	if len(t.shape) != 2 {
		return nil, fmt.Errorf("%s.weight: rank %d", module, len(t.shape))
	}
	return memLinear{module: module, t: t, aq: s.aq[module]}, nil
}

func (s memSource) Rows(name string) (rowReader, error) {
	t, ok := s.t[name]
	if !ok {
		return nil, fmt.Errorf("tensor %q not found", name)
	}
	if len(t.shape) != 2 {
		return nil, fmt.Errorf("%s: rank %d", name, len(t.shape))
	}
	return memRows(t), nil
}

type memRows memTensor

func (r memRows) Shape() (int, int) { return r.shape[0], r.shape[1] }
func (r memRows) Rows(r0, r1 int, dst []float64) error {
	c := r.shape[1]
	if r0 < 0 || r1 > r.shape[0] || len(dst) != (r1-r0)*c {
		return fmt.Errorf("rows [%d, %d) out of range", r0, r1)
	}
	copy(dst, r.data[r0*c:r1*c])
	return nil
}

// getter adapts the source for the oracle.
func (s memSource) getter(name string) ([]float64, []int, error) { return s.Float64(name) }

type memLinear struct {
	module string
	t      memTensor
	aq     quant.ActQuantizer
}

func (l memLinear) Module() string                     { return l.module }
func (l memLinear) Shape() (int, int)                  { return l.t.shape[0], l.t.shape[1] }
func (l memLinear) Format() string                     { return "f64" }
func (l memLinear) StoredBytes() int64                 { return int64(len(l.t.data) * 8) }
func (l memLinear) InputQuantizer() quant.ActQuantizer { return l.aq }
func (l memLinear) Dequantize(dst []float64) error {
	if len(dst) != len(l.t.data) {
		return fmt.Errorf("dst length %d, want %d", len(dst), len(l.t.data))
	}
	copy(dst, l.t.data)
	return nil
}

// testConfigs returns small configurations exercising every architecture
// option: llama3 RoPE scaling, linear scaling, biases, q/k norms with
// head_dim != hidden/heads, untied heads and GQA.
func testConfigs() map[string]*checkpoint.Config {
	base := func(mt string) *checkpoint.Config {
		return &checkpoint.Config{
			ModelType: mt, VocabSize: 37, HiddenSize: 16, IntermediateSize: 24,
			NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 4,
			MaxPositionEmbeddings: 128, RMSNormEps: 1e-6, RopeTheta: 10000,
			TieWordEmbeddings: true, HiddenAct: "silu", BOSTokenID: -1, EOSTokenID: -1,
		}
	}
	llama := base("llama")
	llama.RopeScaling = &checkpoint.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 16}
	llamaBias := base("llama")
	llamaBias.AttentionBias = true
	llamaBias.TieWordEmbeddings = false
	llamaBias.RopeScaling = &checkpoint.RopeScaling{Type: "linear", Factor: 2}
	mistral := base("mistral")
	mistral.NumKeyValueHeads = 1
	mistral.TieWordEmbeddings = false
	mistral.RopeTheta = 1e6
	qwen2 := base("qwen2")
	qwen3 := base("qwen3")
	qwen3.HeadDim = 6
	qwen3.RMSNormEps = 1e-5
	mha := base("llama")
	mha.NumKeyValueHeads = 4
	return map[string]*checkpoint.Config{
		"llama-llama3rope": llama, "llama-bias-linearrope": llamaBias, "mistral-mqa-untied": mistral,
		"qwen2-bias": qwen2, "qwen3-qknorm-headdim6": qwen3, "llama-mha": mha,
	}
}

// randomWeights builds a model of cfg with weights drawn from a seeded
// generator (norm weights around 1, matrices scaled by 1/sqrt(fan_in)).
func randomWeights(cfg *checkpoint.Config, seed uint64) memSource {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := memSource{t: map[string]memTensor{}, aq: map[string]quant.ActQuantizer{}}
	hd := cfg.HeadDim
	if hd == 0 {
		hd = cfg.HiddenSize / cfg.NumAttentionHeads
	}
	mat := func(name string, out, in int, scale float64) {
		d := make([]float64, out*in)
		for i := range d {
			d[i] = rng.NormFloat64() * scale
		}
		s.t[name] = memTensor{d, []int{out, in}}
	}
	vec := func(name string, n int, mean, sd float64) {
		d := make([]float64, n)
		for i := range d {
			d[i] = mean + rng.NormFloat64()*sd
		}
		s.t[name] = memTensor{d, []int{n}}
	}
	C, I, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	q, kv := cfg.NumAttentionHeads*hd, cfg.NumKeyValueHeads*hd
	mat("model.embed_tokens.weight", V, C, 1)
	vec("model.norm.weight", C, 1, 0.1)
	if !cfg.TieWordEmbeddings {
		mat("lm_head.weight", V, C, 1/sqrtf(C))
	}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := "model.layers." + strconv.Itoa(l) + "."
		vec(p+"input_layernorm.weight", C, 1, 0.1)
		vec(p+"post_attention_layernorm.weight", C, 1, 0.1)
		mat(p+"self_attn.q_proj.weight", q, C, 1/sqrtf(C))
		mat(p+"self_attn.k_proj.weight", kv, C, 1/sqrtf(C))
		mat(p+"self_attn.v_proj.weight", kv, C, 1/sqrtf(C))
		mat(p+"self_attn.o_proj.weight", C, q, 1/sqrtf(q))
		mat(p+"mlp.gate_proj.weight", I, C, 1/sqrtf(C))
		mat(p+"mlp.up_proj.weight", I, C, 1/sqrtf(C))
		mat(p+"mlp.down_proj.weight", C, I, 1/sqrtf(I))
		if cfg.ModelType == "qwen2" || cfg.AttentionBias {
			vec(p+"self_attn.q_proj.bias", q, 0, 0.3)
			vec(p+"self_attn.k_proj.bias", kv, 0, 0.3)
			vec(p+"self_attn.v_proj.bias", kv, 0, 0.3)
		}
		if cfg.ModelType != "qwen2" && cfg.AttentionBias {
			vec(p+"self_attn.o_proj.bias", C, 0, 0.3)
		}
		if cfg.ModelType == "qwen3" {
			vec(p+"self_attn.q_norm.weight", hd, 1, 0.2)
			vec(p+"self_attn.k_norm.weight", hd, 1, 0.2)
		}
	}
	return s
}

func sqrtf(n int) float64 { return math.Sqrt(float64(n)) }

func randomTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(vocab))
	}
	return t
}
