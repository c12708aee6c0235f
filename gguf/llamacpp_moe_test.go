package gguf_test

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/internal/oracle"
)

// oracleNLL is the independent float64 forward (internal/oracle) of the
// GGUF model at path, per window and target: every weight read through
// package gguf (oracleGetter).
func oracleNLL(t *testing.T, path string, ws []backends.Window) []float64 {
	t.Helper()
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return oracleWindowNLL(t, m.Config, oracleGetter(m), ws, oracle.Options{})
}

// oracleGetter reads the GGUF model's weights for the oracle by their
// Hugging Face names: Linear weights through Model.Linear (the file's own
// decoders, llama.cpp's Q/K permutation undone), the rest as stored
// (Model.Float64).
func oracleGetter(m *gguf.Model) oracle.Getter {
	linear := map[string]bool{}
	for i := 0; i < m.Spec.Layers; i++ {
		for _, l := range m.Spec.LayerLinears(i) {
			linear[l.Module+".weight"] = true
		}
	}
	return func(name string) ([]float64, []int, error) {
		if !linear[name] {
			return m.Float64(name)
		}
		l, err := m.Linear(strings.TrimSuffix(name, ".weight"))
		if err != nil {
			return nil, nil, err
		}
		out, in := l.Shape()
		w := make([]float64, out*in)
		return w, []int{out, in}, l.Dequantize(w)
	}
}

// TestLlamaCppQuantizedMoE: for the mixture-of-experts architectures
// (qwen3moe; llama with experts, i.e. mixtral) and phi3's fused
// projections, llama_model_quantize quantizes qppl's F32 conversion to
// every file type it produces without an importance matrix, and per type:
// qppl's reference NLL with its own decoders (experts decoded one 2-D
// slice of the stacked tensor at a time) equals the independent oracle's
// float64 forward of the weights as libggml's to_float dequantizes them,
// to 1e-9 per token; llama.cpp's own NLL on the quantized file is logged
// beside it (its CPU path quantizes activations). The gap is bounded
// per token, not by PPL: a routing decision near a tie that llama.cpp's
// rounding flips moves one token's NLL by O(1) (mixtral IQ4_XS: one token
// by 2.7, PPL 12 % apart, while qppl = oracle to 1e-9); at most a tenth of
// the tokens may move by more than 0.25.
func TestLlamaCppQuantizedMoE(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: quantizes to every llama.cpp type")
	}
	h := llamaHelper(t)
	fams := moeQuantFixtures()
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		arch := strings.SplitN(name, "-", 2)[0]
		t.Run(arch, func(t *testing.T) {
			// 2 layers, one window of 48 tokens: the oracle is a naive
			// forward and 19 file types are checked per family.
			dir := writeFixture(t, arch, func(o *fixtures.Options) { fams[name](o); o.Layers = 2 })
			f32 := convert(t, dir, gguf.F32)
			ws := demoWindows(t, dir, 1, 48)
			if d := maxAbsDiff(ggufNLL(t, f32, gguf.Options{}, ws), oracleNLL(t, f32, ws)); !(d <= 1e-9) {
				t.Fatalf("F32: reference and oracle differ by %g", d)
			}
			for _, ft := range llamacpp.FileTypes() {
				t.Run(ft.Name, func(t *testing.T) {
					q := llamaQuantize(t, h, f32, ft.Name, ft.FType)
					m, err := gguf.OpenModel(q, gguf.Options{})
					if err != nil {
						t.Fatal(err) // every type llama.cpp writes has a Go decoder
					}
					rep, err := m.Inspect()
					if err != nil {
						t.Fatal(err)
					}
					layers, _ := m.TypeBreakdown()
					m.Close()
					want := oracleNLL(t, ggmlDequantized(t, h, q), ws)
					got := ggufNLL(t, q, gguf.Options{}, ws)
					if d := maxAbsDiff(got, want); !(d <= 1e-9) {
						t.Errorf("%s: reference NLL differs from the oracle on ggml-dequantized weights by %g", ft.Name, d)
					}
					l := llamaNLL(t, h, q, ws)
					// Tokens whose NLL moved by more than 0.25: a routing
					// decision that llama.cpp's quantized activations flip
					// (a near tie at the k-th expert) moves one token's NLL
					// by O(1); the others move by activation rounding only.
					var far []int
					for i := range got {
						if math.Abs(got[i]-l[i]) > 0.25 {
							far = append(far, i)
						}
					}
					t.Logf("%-8s bpw %.4f/%.4f %s %v: qppl PPL %.6f, llama.cpp %.6f (rel %.2g), max |ΔNLL| %.3g, %d/%d tokens off by > 0.25 %v",
						ft.Name, rep.BPWLayer, rep.BPWHead, rep.Format, shares(layers), ppl(got), ppl(l), math.Abs(ppl(l)-ppl(got))/ppl(got), maxAbsDiff(got, l), len(far), len(got), far)
					if len(far) > len(got)/10 {
						t.Errorf("llama.cpp's NLL differs from qppl's by > 0.25 on %d of %d tokens", len(far), len(got))
					}
				})
			}
		})
	}
}
