package oracle

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

type tensors map[string]struct {
	data  []float64
	shape []int
}

func (ts tensors) get(name string) ([]float64, []int, error) {
	t, ok := ts[name]
	if !ok {
		return nil, nil, fmt.Errorf("no tensor %q", name)
	}
	return t.data, t.shape, nil
}

func (ts tensors) put(name string, shape []int, v ...float64) {
	ts[name] = struct {
		data  []float64
		shape []int
	}{v, shape}
}

// toy is a 1-layer llama, hidden 2, one head of width 2 (inv_freq = [1]),
// vocab 3, intermediate 1, eps 0, with identity attention projections.
func toy() (*checkpoint.Config, tensors) {
	cfg := &checkpoint.Config{
		ModelType: "llama", VocabSize: 3, HiddenSize: 2, IntermediateSize: 1,
		NumHiddenLayers: 1, NumAttentionHeads: 1, NumKeyValueHeads: 1,
		RMSNormEps: 0, RopeTheta: 10000, TieWordEmbeddings: true, HiddenAct: "silu",
	}
	ts := tensors{}
	ts.put("model.embed_tokens.weight", []int{3, 2}, 1, 1, 1, -1, -1, -1)
	ts.put("model.norm.weight", []int{2}, 1, 1)
	ts.put("model.layers.0.input_layernorm.weight", []int{2}, 1, 1)
	ts.put("model.layers.0.post_attention_layernorm.weight", []int{2}, 1, 1)
	for _, p := range []string{"q", "k", "v", "o"} {
		ts.put("model.layers.0.self_attn."+p+"_proj.weight", []int{2, 2}, 1, 0, 0, 1)
	}
	ts.put("model.layers.0.mlp.gate_proj.weight", []int{1, 2}, 1, 1)
	ts.put("model.layers.0.mlp.up_proj.weight", []int{1, 2}, 1, 0)
	ts.put("model.layers.0.mlp.down_proj.weight", []int{2, 1}, 1, 0)
	return cfg, ts
}

// TestToy checks the oracle against closed forms (same derivation as the
// reference package's toy test): position 0 sees only itself; at position 1
// the RoPE-rotated scores are √2·sin(1) and √2.
func TestToy(t *testing.T) {
	cfg, ts := toy()
	lp, err := LogProbs(cfg, ts.get, []int32{0, 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	silu := func(x float64) float64 { return x * (1 / (1 + math.Exp(-x))) }
	head := func(x0, x1 float64) []float64 {
		n := math.Hypot(x0, x1) / math.Sqrt2
		a, b := (x0+x1)/n, (x0-x1)/n
		l := math.Log(math.Exp(a) + math.Exp(b) + math.Exp(-a))
		return []float64{a - l, b - l, -a - l}
	}
	w0 := head(2+silu(2), 2)
	e0, e1 := math.Exp(math.Sqrt2*math.Sin(1)), math.Exp(math.Sqrt2)
	x1 := (e0-e1)/(e0+e1) - 1
	n := math.Hypot(2, x1) / math.Sqrt2
	w1 := head(2+silu((2+x1)/n)*2/n, x1)
	for p, want := range [][]float64{w0, w1} {
		for v := range want {
			if d := math.Abs(lp[p][v] - want[v]); d > 1e-14 {
				t.Errorf("pos %d id %d: %.17g want %.17g", p, v, lp[p][v], want[v])
			}
		}
	}
	// InputQuant sees each Linear's input and may change it: zeroing the
	// input of down_proj removes the MLP contribution.
	seen := map[string]int{}
	lp2, err := LogProbs(cfg, ts.get, []int32{0}, Options{InputQuant: func(m string, x []float64, rows, cols int) error {
		seen[m]++
		if strings.HasSuffix(m, "down_proj") {
			clear(x)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := head(2, 2); math.Abs(lp2[0][1]-want[1]) > 1e-14 {
		t.Errorf("down_proj input zeroed: %v want %v", lp2[0], want)
	}
	if len(seen) != 7 || seen["lm_head"] != 0 {
		t.Errorf("InputQuant saw modules %v, want the 7 Linears (not a tied lm_head)", seen)
	}
	// An untied head's input goes through InputQuant too, with every row of
	// the prefix: zeroing it gives uniform log-probs −ln 3.
	untied := *cfg
	untied.TieWordEmbeddings = false
	ts.put("lm_head.weight", []int{3, 2}, 1, 1, 1, -1, -1, -1)
	var headRows []int
	lp3, err := LogProbs(&untied, ts.get, []int32{0, 1}, Options{InputQuant: func(m string, x []float64, rows, cols int) error {
		if m == "lm_head" {
			headRows = append(headRows, rows)
			clear(x)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(headRows) != 2 || headRows[0] != 1 || headRows[1] != 2 {
		t.Errorf("lm_head input quantized with rows %v, want [1 2]", headRows)
	}
	for p := range lp3 {
		for v, x := range lp3[p] {
			if math.Abs(x+math.Log(3)) > 1e-15 {
				t.Errorf("zeroed lm_head input: lp[%d][%d] = %v, want −ln 3", p, v, x)
			}
		}
	}
}

func TestInverseFrequencies(t *testing.T) {
	f1, f2 := math.Pow(1e4, -1.0/3), math.Pow(1e4, -2.0/3)
	// llama3: original ctx 1000, low_freq_factor 1 → wavelen 1000,
	// high_freq_factor 10 → wavelen 100; wavelengths are 2π, 135.4, 2916.
	sm := (1000*f1/(2*math.Pi) - 1) / 9
	cases := []struct {
		rs   *checkpoint.RopeScaling
		want []float64
	}{
		{nil, []float64{1, f1, f2}},
		{&checkpoint.RopeScaling{Type: "linear", Factor: 4}, []float64{0.25, f1 / 4, f2 / 4}},
		{&checkpoint.RopeScaling{Type: "llama3", Factor: 4, LowFreqFactor: 1, HighFreqFactor: 10, OriginalMaxPositionEmbeddings: 1000},
			[]float64{1, sm*f1 + (1-sm)*f1/4, f2 / 4}},
	}
	for _, c := range cases {
		got, err := inverseFrequencies(&checkpoint.Config{RopeTheta: 1e4, RopeScaling: c.rs}, 6)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.want {
			if math.Abs(got[i]-c.want[i]) > 1e-15*c.want[i] {
				t.Errorf("%+v: [%d] %.17g want %.17g", c.rs, i, got[i], c.want[i])
			}
		}
	}
	if _, err := inverseFrequencies(&checkpoint.Config{RopeTheta: 1e4, RopeScaling: &checkpoint.RopeScaling{Type: "dynamic", Factor: 2}}, 6); err == nil {
		t.Error("dynamic scaling accepted")
	}
}

func TestErrors(t *testing.T) {
	cfg, ts := toy()
	if _, err := LogProbs(cfg, ts.get, []int32{0, 3}, Options{}); err == nil {
		t.Error("token id = vocab accepted")
	}
	bad := *cfg
	bad.ModelType = "gpt2"
	if _, err := LogProbs(&bad, ts.get, []int32{0}, Options{}); err == nil {
		t.Error("gpt2 accepted")
	}
	delete(ts, "model.layers.0.mlp.up_proj.weight")
	if _, err := LogProbs(cfg, ts.get, []int32{0}, Options{}); err == nil || !strings.Contains(err.Error(), "up_proj") {
		t.Errorf("missing up_proj: %v", err)
	}
	_, ts = toy()
	ts.put("model.norm.weight", []int{3}, 1, 1, 1)
	if _, err := LogProbs(cfg, ts.get, []int32{0}, Options{}); err == nil {
		t.Error("wrong norm shape accepted")
	}
}
