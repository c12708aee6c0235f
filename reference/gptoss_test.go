package reference

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
)

// gptOssFixture writes a random gpt_oss fixture (BF16: the published
// checkpoints' dtype) with the given option tweaks and returns its
// directory.
func gptOssFixture(t *testing.T, mxfp4 bool, cfg map[string]any) string {
	t.Helper()
	o, err := fixtures.Defaults("gpt_oss")
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init, o.DType, o.MXFP4Experts, o.Config = 300, fixtures.InitRandom, checkpoint.BF16, mxfp4, cfg
	dir := filepath.Join(t.TempDir(), "gpt_oss")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGptOssAgainstOracle: the reference equals the independent oracle to
// 1e-9 on every log-prob of a 70-token window (longer than the fixture's
// 16-token sliding window, both layer types present): BF16 fused experts,
// the published MXFP4 expert layout (quant_method mxfp4, *_blocks and
// *_scales), and W4A16 (compressed-tensors) attention and router Linears.
func TestGptOssAgainstOracle(t *testing.T) {
	dense := gptOssFixture(t, false, nil)
	w4 := filepath.Join(t.TempDir(), "w4a16")
	if err := quantizer.Quantize(dense, w4, "W4A16-G32", quantizer.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	toks := randomTokens(70, 300, 5)
	for _, c := range []struct{ name, dir, experts, q string }{
		{"bf16", dense, "bf16", "bf16"}, {"mxfp4-experts", gptOssFixture(t, true, nil), "mxfp4", "bf16"}, {"w4a16", w4, "bf16", "int4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, m := openBackend(t, c.dir)
			l := &b.m.layers[0]
			if f := l.gptOss.gateUp[0].Format(); f != c.experts {
				t.Fatalf("experts' format %q, want %q", f, c.experts)
			}
			if f := l.lin[arch.ProjQ].Format(); !strings.Contains(f, c.q) {
				t.Fatalf("q_proj's format %q, want %q", f, c.q)
			}
			if w := b.m.spec.Window(0); w != 16 || b.m.spec.Window(1) != 0 {
				t.Fatalf("windows %d, %d: want 16 (sliding) and 0 (full)", w, b.m.spec.Window(1))
			}
			got := allLogProbs(t, b, toks)
			get, opt := quantOracle(t, m)
			want, err := oracle.LogProbs(m.Config, get, toks, opt)
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, want); d > 1e-9 || p < 0 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			// One thread: attention stacks the query heads of a key/value
			// head into one product (each stacked row takes its own head's
			// sink); the same bits as the per-head tasks.
			one, err := New(m, Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			if !bitIdentical(allLogProbs(t, one, toks), got) {
				t.Error("one thread (stacked heads) differs from the default threads")
			}
		})
	}
}

// TestGptOssInvariants: (1) sinks of −1e30 (as −∞: no sink) give
// bit-identical log-probs to attention without a sink, and the fixture's
// real sinks change them; (2) a window of at least the context equals full
// attention bit for bit, the 16-token window does not; (3) causality:
// changing the tokens after t never changes the log-probs at positions ≤ t.
func TestGptOssInvariants(t *testing.T) {
	const T = 70
	toks := randomTokens(T, 300, 9)
	dir := gptOssFixture(t, false, nil)
	b, _ := openBackend(t, dir)
	withSinks := allLogProbs(t, b, toks)
	saved := make([][]float64, len(b.m.layers))
	for i := range b.m.layers {
		saved[i] = b.m.layers[i].sinks
		b.m.layers[i].sinks = nil
	}
	plain := allLogProbs(t, b, toks)
	for i := range b.m.layers {
		huge := make([]float64, len(saved[i]))
		for h := range huge {
			huge[h] = -1e30
		}
		b.m.layers[i].sinks = huge
	}
	hugeSinks := allLogProbs(t, b, toks)
	if !bitIdentical(plain, hugeSinks) {
		d, p, v := maxAbsDiff(plain, hugeSinks)
		t.Errorf("sinks −1e30 differ from no sinks by %g at pos %d id %d", d, p, v)
	}
	if bitIdentical(plain, withSinks) {
		t.Error("the fixture's sinks do not change the log-probs")
	}

	full := allLogProbs(t, mustOpen(t, gptOssFixture(t, false, map[string]any{"layer_types": []string{"full_attention", "full_attention"}})), toks)
	wide := allLogProbs(t, mustOpen(t, gptOssFixture(t, false, map[string]any{"sliding_window": T})), toks)
	if !bitIdentical(full, wide) {
		d, p, v := maxAbsDiff(full, wide)
		t.Errorf("window %d (= ctx) differs from full attention by %g at pos %d id %d", T, d, p, v)
	}
	if bitIdentical(full, withSinks) {
		t.Error("the 16-token window does not change the log-probs at ctx 70")
	}

	changed := append([]int32(nil), toks...)
	const cut = 40
	for i := cut + 1; i < T; i++ {
		changed[i] = (changed[i] + 1) % 300
	}
	for i := range b.m.layers {
		b.m.layers[i].sinks = saved[i]
	}
	after := allLogProbs(t, b, changed)
	for p := 0; p <= cut; p++ {
		for v := range after[p] {
			if math.Float64bits(after[p][v]) != math.Float64bits(withSinks[p][v]) {
				t.Fatalf("pos %d ≤ %d changed when only tokens after %d did", p, cut, cut)
			}
		}
	}
	if bitIdentical(after[cut+1:], withSinks[cut+1:]) {
		t.Error("changing the tokens after the cut changes nothing after it")
	}
}

func mustOpen(t *testing.T, dir string) *Backend {
	b, _ := openBackend(t, dir)
	return b
}

func bitIdentical(a, b [][]float64) bool {
	for p := range a {
		for v := range a[p] {
			if math.Float64bits(a[p][v]) != math.Float64bits(b[p][v]) {
				return false
			}
		}
	}
	return true
}
