package arch

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

func cfg(t *testing.T, js string) *checkpoint.Config {
	t.Helper()
	c, err := ParseConfig([]byte(js), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const base = `"vocab_size":32,"hidden_size":16,"intermediate_size":24,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2`

func TestForNames(t *testing.T) {
	cases := []struct {
		js                    string
		qkvBias, oBias, qkn   bool
		head                  string
		headDim               int
		wantDense, wantLinear int
	}{
		{`{"model_type":"llama",` + base + `}`, false, false, false, "lm_head.weight", 4, 1 + 2*2 + 1, 14},
		{`{"model_type":"llama",` + base + `,"attention_bias":true,"tie_word_embeddings":true}`, true, true, false, "model.embed_tokens.weight", 4, 1 + 2*6 + 1, 14},
		{`{"model_type":"mistral",` + base + `,"attention_bias":true}`, false, false, false, "lm_head.weight", 4, 6, 14},
		{`{"model_type":"qwen2",` + base + `,"tie_word_embeddings":true}`, true, false, false, "model.embed_tokens.weight", 4, 1 + 2*5 + 1, 14},
		{`{"model_type":"qwen3",` + base + `,"head_dim":6}`, false, false, true, "lm_head.weight", 6, 1 + 2*4 + 1, 14},
	}
	for _, c := range cases {
		s, err := For(cfg(t, c.js))
		if err != nil {
			t.Fatalf("%s: %v", c.js, err)
		}
		if s.QKVBias != c.qkvBias || s.OBias != c.oBias || s.QKNorm != c.qkn || s.HeadName() != c.head || s.HeadDim != c.headDim {
			t.Errorf("%s: got %+v head %s", c.js, s, s.HeadName())
		}
		if n := len(s.DenseTensors()); n != c.wantDense {
			t.Errorf("%s: %d dense tensors, want %d", c.js, n, c.wantDense)
		}
		lin := 0
		for i := 0; i < s.Layers; i++ {
			lin += len(s.LayerModules(i))
		}
		if lin != c.wantLinear {
			t.Errorf("%s: %d linears", c.js, lin)
		}
	}
	s, _ := For(cfg(t, `{"model_type":"qwen3",`+base+`,"head_dim":6}`))
	l := s.Layer(1)
	want := Layer{Index: 1, Prefix: "model.layers.1.", AttnNorm: "model.layers.1.input_layernorm.weight",
		Q: "model.layers.1.self_attn.q_proj", K: "model.layers.1.self_attn.k_proj", V: "model.layers.1.self_attn.v_proj", O: "model.layers.1.self_attn.o_proj",
		QNorm: "model.layers.1.self_attn.q_norm.weight", KNorm: "model.layers.1.self_attn.k_norm.weight",
		MLPNorm: "model.layers.1.post_attention_layernorm.weight",
		Gate:    "model.layers.1.mlp.gate_proj", Up: "model.layers.1.mlp.up_proj", Down: "model.layers.1.mlp.down_proj"}
	if l != want {
		t.Errorf("layer\n got %+v\nwant %+v", l, want)
	}
	lin := s.LayerLinears(0)
	shapes := [][2]int{{24, 16}, {12, 16}, {12, 16}, {16, 24}, {24, 16}, {24, 16}, {16, 24}}
	for i, sh := range shapes {
		if lin[i].Out != sh[0] || lin[i].In != sh[1] {
			t.Errorf("%s: [%d,%d] want %v", lin[i].Module, lin[i].Out, lin[i].In, sh)
		}
	}
	q, _ := For(cfg(t, `{"model_type":"qwen2",`+base+`}`))
	if got := strings.Join([]string{q.Layer(0).QBias, q.Layer(0).KBias, q.Layer(0).VBias, q.Layer(0).OBias}, ","); got != "model.layers.0.self_attn.q_proj.bias,model.layers.0.self_attn.k_proj.bias,model.layers.0.self_attn.v_proj.bias," {
		t.Errorf("qwen2 biases %s", got)
	}
}

func TestForUnsupported(t *testing.T) {
	c := cfg(t, `{"model_type":"llama",`+base+`}`)
	bad := *c
	bad.ModelType = "gpt2"
	if _, err := For(&bad); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `model_type "gpt2" (supported: llama, mistral, qwen2, qwen3`) {
		t.Errorf("gpt2: %v", err)
	}
	bad = *c
	bad.HiddenAct = "gelu"
	if _, err := For(&bad); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `hidden_act "gelu"`) {
		t.Errorf("gelu: %v", err)
	}
	bad = *c
	bad.MLPBias = true
	if _, err := For(&bad); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "mlp_bias") {
		t.Errorf("mlp_bias: %v", err)
	}
	if cm := cfg(t, `{"model_type":"llama",`+base+`,"mlp_bias":true}`); !cm.MLPBias {
		t.Error("llama mlp_bias not read")
	}
	if cm := cfg(t, `{"model_type":"qwen2",`+base+`,"mlp_bias":true}`); cm.MLPBias {
		t.Error("qwen2 mlp_bias read (Qwen2MLP has no bias)")
	}
	for _, zero := range []func(*checkpoint.Config){
		func(c *checkpoint.Config) { c.NumKeyValueHeads = 0 },
		func(c *checkpoint.Config) { c.NumAttentionHeads = 0 },
		func(c *checkpoint.Config) { c.VocabSize = -1 },
	} {
		bad = *c
		zero(&bad)
		if _, err := For(&bad); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sizes must be positive") {
			t.Errorf("zero size %+v: %v", bad, err)
		}
	}
	if _, err := For(nil); err == nil {
		t.Error("nil config accepted")
	}
	m, _ := For(cfg(t, `{"model_type":"mistral",`+base+`,"sliding_window":256}`))
	if err := m.CheckContext(256); err != nil {
		t.Error(err)
	}
	// Issue 14: a context beyond the window is computed, not refused.
	if err := m.CheckContext(257); err != nil {
		t.Errorf("ctx beyond window: %v", err)
	}
	if m.Window(0) != 256 || m.Window(1) != 256 {
		t.Errorf("mistral windows %d, %d, want 256 on every layer", m.Window(0), m.Window(1))
	}
	l, _ := For(c)
	if err := l.CheckContext(100000); err != nil {
		t.Error(err)
	}
	if err := l.CheckContext(0); err == nil {
		t.Error("ctx 0 accepted")
	}
}

// Hand-computed inverse frequencies (see the comments for the arithmetic).
func TestRopeInvFreq(t *testing.T) {
	cases := []struct {
		name string
		dim  int
		rs   *checkpoint.RopeScaling
		want []float64
	}{
		// 1/10000^(0/8), ^(2/8), ^(4/8), ^(6/8).
		{"default", 8, nil, []float64{1, 0.1, 0.01, 0.001}},
		{"default scaling", 4, &checkpoint.RopeScaling{Type: "default"}, []float64{1, 0.01}},
		{"linear", 4, &checkpoint.RopeScaling{Type: "linear", Factor: 2}, []float64{0.5, 0.005}},
		// old=1024, low=1, high=4 → low_wavelen 1024, high_wavelen 256.
		// wavelen = 2π/f = 6.28, 62.8 (< 256: kept), 628.3 (medium),
		// 6283 (> 1024: f/8). Medium: s = (1024/(2π/0.01) − 1)/3 =
		// 0.20991553908700275; (1−s)·0.01/8 + s·0.01 = 0.003086760967011274.
		{"llama3", 8, &checkpoint.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 1024},
			[]float64{1, 0.1, 0.003086760967011274, 0.000125}},
	}
	for _, c := range cases {
		got := RopeInvFreq(c.dim, 10000, c.rs)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d freqs", c.name, len(got))
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-15*c.want[i] { // a few ulp: Go's math.Pow is not correctly rounded
				t.Errorf("%s[%d] = %.17g, want %.17g", c.name, i, got[i], c.want[i])
			}
		}
	}
	// Through a config: theta and head_dim are taken from it.
	s, _ := For(cfg(t, `{"model_type":"qwen3",`+base+`,"head_dim":4,"rope_theta":100}`))
	if f := s.RopeInvFreq(); len(f) != 2 || f[0] != 1 || f[1] != 0.1 {
		t.Errorf("qwen3 inv_freq %v", f)
	}
}

func TestCheckDense(t *testing.T) {
	dir := t.TempDir()
	js := `{"model_type":"qwen2","vocab_size":8,"hidden_size":4,"intermediate_size":6,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"tie_word_embeddings":true}`
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(js), 0o644)
	s, _ := For(cfg(t, js))
	var ts []checkpoint.WriteTensor
	for _, d := range s.DenseWeights() {
		n := 1
		for _, x := range d.Shape {
			n *= x
		}
		ts = append(ts, checkpoint.WriteTensor{Name: d.Name, DType: checkpoint.F32, Shape: d.Shape, Data: make([]byte, 4*n)})
	}
	if len(ts) != 1+5+7+1 {
		t.Fatalf("%d dense weights", len(ts))
	}
	if err := checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	m, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDense(m); err != nil {
		t.Error(err)
	}
	m.Close()
	// A dense tensor of the right shape but an integer dtype.
	good := ts[3]
	ts[3].DType = checkpoint.I32
	checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil)
	m, _ = OpenDir(dir)
	if err := s.CheckDense(m); err == nil || !strings.Contains(err.Error(), ts[3].Name) || !strings.Contains(err.Error(), "dtype I32") {
		t.Errorf("integer dtype: %v", err)
	}
	m.Close()
	ts[3] = good
	ts[3].Shape = []int{1, 2}
	checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil)
	m, _ = OpenDir(dir)
	defer m.Close()
	if err := s.CheckDense(m); err == nil || !strings.Contains(err.Error(), ts[3].Name) {
		t.Errorf("wrong shape: %v", err)
	}
}

// The small trained model in ../shared opens, validates and matches its
// architecture's dense tensor list exactly; the SmolLM2-135M config parses.
func TestSharedModel(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "models", "tiny-wt2-mistral")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared model not found: %v", err)
	}
	m, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	if c.ModelType != "llama" || c.HiddenSize != 128 || c.NumHiddenLayers != 4 || c.NumKeyValueHeads != 2 || c.HeadDim != 32 || !c.TieWordEmbeddings || c.RMSNormEps != 1e-5 {
		t.Errorf("config %+v", c)
	}
	s, err := For(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDense(m); err != nil {
		t.Fatal(err)
	}
	want := s.DenseWeights()
	if len(m.Names()) != len(want) {
		t.Errorf("%d tensors, want %d", len(m.Names()), len(want))
	}
	for _, w := range want {
		if err := CheckTensor(m, w); err != nil {
			t.Error(err)
		}
	}
	v, shape, err := m.ReadFloat64(s.Layer(3).MLPNorm)
	if err != nil || len(v) != 128 || shape[0] != 128 {
		t.Fatalf("%v %v", shape, err)
	}
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
			t.Fatalf("norm gain %v", x)
		}
	}
	smol := filepath.Join("..", "..", "shared", "tokenizers", "smollm2", "model-config.json")
	data, err := os.ReadFile(smol)
	if err != nil {
		t.Skipf("SmolLM2 config not found: %v", err)
	}
	sc, err := ParseConfig(data, smol)
	if err != nil {
		t.Fatal(err)
	}
	if sc.VocabSize != 49152 || sc.HiddenSize != 576 || sc.NumHiddenLayers != 30 || sc.NumAttentionHeads != 9 || sc.NumKeyValueHeads != 3 || sc.IntermediateSize != 1536 || sc.HeadDim != 64 || !sc.TieWordEmbeddings {
		t.Errorf("SmolLM2 config %+v", sc)
	}
}
