package reference

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// quantOracle returns an oracle getter and activation quantizer for a
// (possibly quantized) checkpoint: Linear weights are decoded through
// package quant, everything else read as stored.
func quantOracle(t *testing.T, m *checkpoint.Model) (oracle.Getter, oracle.Options) {
	t.Helper()
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	isLinear := func(module string) bool {
		for _, suffix := range []string{"_proj", ".mlp.gate", ".block_sparse_moe.gate", ".w1", ".w2", ".w3", ".in_proj_qkv", ".in_proj_z", ".in_proj_a", ".in_proj_b", ".shared_expert_gate", ".per_layer_input_gate", ".per_layer_projection", ".router.proj", ".mlp.router"} {
			if strings.HasSuffix(module, suffix) {
				return true
			}
		}
		return module == "lm_head"
	}
	get := func(name string) ([]float64, []int, error) {
		if mod, ok := strings.CutSuffix(name, ".weight"); ok && isLinear(mod) {
			l, err := scheme.Linear(m, mod)
			if err != nil {
				return nil, nil, err
			}
			out, in := l.Shape()
			w := make([]float64, out*in)
			if err := l.Dequantize(w); err != nil {
				return nil, nil, err
			}
			return w, []int{out, in}, nil
		}
		return m.ReadFloat64(name)
	}
	opt := oracle.Options{InputQuant: func(module string, x []float64, rows, cols int) error {
		l, err := scheme.Linear(m, module)
		if err != nil {
			return err
		}
		if aq := l.InputQuantizer(); aq != nil {
			return aq.Quantize(x, rows, cols)
		}
		return nil
	}}
	return get, opt
}

// TestQuantizedSchemes runs every scheme of the fixture quantizer through
// New (packed weights decoded by package quant, activation quantization
// where the scheme has it) and compares with the oracle fed the same
// decoded weights and quantizers.
func TestQuantizedSchemes(t *testing.T) {
	base, err := fixtures.Defaults("qwen2")
	if err != nil {
		t.Fatal(err)
	}
	base.Vocab, base.Hidden, base.Intermediate, base.HeadDim = 300, 128, 256, 32
	base.DType = checkpoint.BF16
	src := filepath.Join(t.TempDir(), "dense")
	if err := fixtures.Write(src, base); err != nil {
		t.Fatal(err)
	}
	toks := randomTokens(24, base.Vocab, 12)
	denseB, _ := openBackend(t, src)
	dense := allLogProbs(t, denseB, toks)
	for _, name := range quantizer.Schemes() {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			if err := quantizer.Quantize(src, dir, name, quantizer.Options{Seed: 3}); err != nil {
				t.Fatal(err)
			}
			b, m := openBackend(t, dir)
			got := allLogProbs(t, b, toks)
			get, opt := quantOracle(t, m)
			want, err := oracle.LogProbs(m.Config, get, toks, opt)
			if err != nil {
				t.Fatal(err)
			}
			if name == "AUTOFP8-DYNAMIC" {
				// The oracle recomputes each prefix, so a dynamic per-tensor
				// input scale sees rows [0..p]; only its last prefix is the
				// whole window the reference quantizes at once.
				last := len(got) - 1
				if d, p, v := maxAbsDiff(got[last:], want[last:]); d > 1e-10 {
					t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, last+p, v)
				}
				if d, _, _ := maxAbsDiff(got[:last], want[:last]); d < 1e-9 {
					t.Errorf("prefixes agree with the whole window to %g: the per-tensor scale is not window-wide", d)
				}
			} else if d, p, v := maxAbsDiff(got, want); d > 1e-10 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			checkRowDecode(t, b, got, toks)
			// Not vacuous: quantization changes the model, and activation
			// quantization changes it beyond weight-only decoding.
			if d, _, _ := maxAbsDiff(got, dense); d < 1e-6 {
				t.Errorf("quantized log-probs within %g of the dense model", d)
			}
			weightOnly, err := oracle.LogProbs(m.Config, get, toks, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d, _, _ := maxAbsDiff(got, weightOnly); quantizer.QuantizesActivations(name) != (d > 1e-9) {
				t.Errorf("activation quantization expected %v, but log-probs differ from weight-only decoding by %g", quantizer.QuantizesActivations(name), d)
			}
		})
	}
}

// TestQuantizedEveryArch: every family's fixture (arch.Names) and fixture
// variant (gemma4_text/moe), dense and quantized W4A16 (group 32) and W8A8
// (per-token activations), equals the oracle to 1e-9 on a window longer
// than one 64-row block.
func TestQuantizedEveryArch(t *testing.T) {
	type fx struct{ arch, variant string }
	var all []fx
	for _, a := range fixtures.Architectures() {
		all = append(all, fx{a, ""})
		for _, v := range fixtures.Variants(a) {
			all = append(all, fx{a, v})
		}
	}
	for _, f := range all {
		name := f.arch
		if f.variant != "" {
			name += "/" + f.variant
		}
		t.Run(name, func(t *testing.T) {
			o, err := fixtures.Defaults(f.arch)
			if err != nil {
				t.Fatal(err)
			}
			o.Vocab, o.Init, o.Variant = 300, fixtures.InitRandom, f.variant
			src := filepath.Join(t.TempDir(), "dense")
			if err := fixtures.Write(src, o); err != nil {
				t.Fatal(err)
			}
			toks := randomTokens(70, o.Vocab, 5)
			for _, scheme := range []string{"", "W4A16-G32", "W8A8"} {
				dir := src
				if scheme != "" {
					dir = filepath.Join(t.TempDir(), scheme)
					if err := quantizer.Quantize(src, dir, scheme, quantizer.Options{Seed: 3}); err != nil {
						t.Fatal(err)
					}
				}
				b, m := openBackend(t, dir)
				got := allLogProbs(t, b, toks)
				get, opt := quantOracle(t, m)
				want, err := oracle.LogProbs(m.Config, get, toks, opt)
				if err != nil {
					t.Fatal(err)
				}
				if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
					t.Errorf("%s: max |reference - oracle| = %g at pos %d id %d", scheme, d, p, v)
				}
			}
		})
	}
}

// checkRowDecode: every Linear that decodes by rows gives Dequantize's
// bits for several row ranges, and the forward pass that decodes Linears
// by rows into the product's panels (got) equals, bit for bit, the one
// that decodes every Linear whole into the scratch buffer.
func checkRowDecode(t *testing.T, b *Backend, got [][]float64, toks []int32) {
	t.Helper()
	lins := []quant.Linear{b.m.head}
	for _, l := range b.m.layers {
		lins = append(lins, l.lin[:]...)
		for _, e := range l.experts {
			lins = append(lins, e[:]...)
		}
	}
	rowLinears, format := 0, ""
	for _, l := range lins {
		rd, ok := l.(quant.RowDequantizer)
		if l == nil || !ok {
			continue
		}
		if rowLinears++; format == "" {
			format = l.Format()
		}
		out, in := l.Shape()
		whole := make([]float64, out*in)
		if err := l.Dequantize(whole); err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{0, out}, {1, min(out, 3)}, {out - 1, out}, {out / 2, out / 2}, {out / 3, out - 2}} {
			if r[1] < r[0] {
				continue // a one-row Linear (qwen3_5_moe's shared_expert_gate)
			}
			part := make([]float64, (r[1]-r[0])*in)
			if err := rd.DequantizeRows(r[0], r[1], part); err != nil {
				t.Fatal(err)
			}
			for i, v := range part {
				if math.Float64bits(v) != math.Float64bits(whole[r[0]*in+i]) {
					t.Fatalf("%s rows [%d, %d): element %d = %v, Dequantize %v", l.Module(), r[0], r[1], i, v, whole[r[0]*in+i])
				}
			}
		}
		if err := rd.DequantizeRows(out-1, out+1, make([]float64, 2*in)); err == nil {
			t.Fatalf("%s: rows past the end accepted", l.Module())
		}
	}
	t.Logf("%d of the Linears decode by rows (%s)", rowLinears, format)
	b.m.wholeDecode = true
	b.ws = workspace{}
	defer func() { b.m.wholeDecode, b.ws = false, workspace{} }()
	whole := allLogProbs(t, b, toks)
	for i := range got {
		for j := range got[i] {
			if math.Float64bits(got[i][j]) != math.Float64bits(whole[i][j]) {
				t.Fatalf("log-prob [%d][%d]: %v decoding by rows, %v decoding whole", i, j, got[i][j], whole[i][j])
			}
		}
	}
}
