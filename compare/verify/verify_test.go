package verify

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/backends/cuda"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/reference"
)

func setup(t *testing.T, archName, prec string) (backends.Backend, backends.Backend, []backends.Window, int) {
	t.Helper()
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, archName, 2); err != nil {
		t.Fatal(err)
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ref, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	d, err := emu.New(emu.Options{Name: "emu:0", CheckGuards: true})
	if errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b, err := cuda.New(m, []device.Device{d}, cuda.Options{Name: "emu", Precision: prec, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var ws []backends.Window
	for i := 0; i < 2; i++ {
		toks := make([]int32, 48)
		for j := range toks {
			toks[j] = int32((j*31 + i*7 + 5) % backendtest.Vocab)
		}
		ws = append(ws, backends.Window{Index: i, Tokens: toks, First: 1 + i})
	}
	return ref, b, ws, m.Config.NumHiddenLayers
}

func TestReferenceVsEmuPasses(t *testing.T) {
	for _, prec := range []string{"fp32", "bf16"} {
		ref, b, ws, layers := setup(t, "qwen3", prec)
		rep, err := Run(context.Background(), ref, b, ws, Options{Tolerances: DefaultTolerances(prec, false), Layers: layers})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		rep.Write(&out)
		t.Logf("\n%s", out.String())
		if !rep.Pass {
			t.Errorf("%s: verify failed:\n%s", prec, out.String())
		}
		if rep.Tokens != 47+46 || len(rep.Points) != 2+5*layers {
			t.Errorf("%s: %d tokens, %d probe points", prec, rep.Tokens, len(rep.Points))
		}
		if prec == "fp32" && !(rep.MaxAbsNLLDiff <= 1e-4 && rep.MeanKL <= 1e-6 && rep.Top1Agreement == 1) { // NaN-safe
			t.Errorf("fp32: max |ΔNLL| %g, KL %g, top-1 %g", rep.MaxAbsNLLDiff, rep.MeanKL, rep.Top1Agreement)
		}
	}
}

// broken perturbs a backend from one probe point on, like a wrong kernel.
type broken struct {
	backends.Backend
	layer int
	site  string
}

func (b broken) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	s, err := b.Backend.Score(ctx, w, req)
	for i := range s.NLL {
		s.NLL[i] += 0.3
	}
	return s, err
}

func (b broken) Probe(ctx context.Context, w backends.Window, at []backends.Point) (map[backends.Point][]float64, error) {
	m, err := b.Backend.(backends.Prober).Probe(ctx, w, at)
	bad := false
	for _, p := range at { // at is in forward order
		if p.Layer == b.layer && p.Site == b.site {
			bad = true
		}
		if bad && p.Site != arch.SiteEmbed {
			for i := range m[p] {
				m[p][i] *= 1.5
			}
		}
	}
	return m, err
}

func TestLocatesFirstBadLayer(t *testing.T) {
	ref, b, ws, layers := setup(t, "llama", "fp32")
	rep, err := Run(context.Background(), ref, broken{b, 1, arch.SiteMLPOut}, ws, Options{Tolerances: DefaultTolerances("fp32", false), Layers: layers})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || rep.FirstBad == nil || rep.FirstBad.Layer != 1 || rep.FirstBad.Site != arch.SiteMLPOut {
		t.Fatalf("pass %v, first bad %+v, failures %v", rep.Pass, rep.FirstBad, rep.Failures)
	}
	if !strings.Contains(strings.Join(rep.Failures, "\n"), "max |ΔNLL| 0.3") {
		t.Errorf("failures %v lack the NLL shift", rep.Failures)
	}
	type scoreOnly struct{ backends.Backend }
	if _, err := Run(context.Background(), scoreOnly{ref}, b, ws, Options{}); err == nil || !strings.Contains(err.Error(), "cannot emit log-probs") {
		t.Errorf("first backend without LogProbs: err = %v", err)
	}
}

// TestVerifyGemma: qppl verify's comparison passes for gemma2 and
// gemma3_text on the emulated kernels, dense and W4A16, in fp32 and bf16
// with the default tolerances, on windows of 80 tokens (the fixtures'
// sliding window is 32), hidden states probed at every layer; random
// weights on synthetic tokens, and the default bigram fixture on the demo
// text (whose gemma constructions once ignored the (1 + w) gains, the
// embedding scale and the sandwich norms: PPL 2·10¹⁰ for gemma3_text, and
// a bf16 |ΔNLL| of 0.89 from its huge logits).
func TestVerifyGemma(t *testing.T) {
	for _, c := range []struct{ a, init string }{{"gemma2", fixtures.InitRandom}, {"gemma3_text", fixtures.InitRandom},
		{"gemma2", fixtures.InitBigram}, {"gemma3_text", fixtures.InitBigram}} {
		a := c.a
		o, err := fixtures.Defaults(a)
		if err != nil {
			t.Fatal(err)
		}
		o.Init = c.init
		demo := fixtures.NewTokenizer(o.Vocab).Encode(fixtures.DemoText(), true)
		dense := filepath.Join(t.TempDir(), "dense")
		if err := fixtures.Write(dense, o); err != nil {
			t.Fatal(err)
		}
		w4 := filepath.Join(t.TempDir(), "w4")
		if err := quantizer.Quantize(dense, w4, "W4A16", quantizer.Options{Seed: 3, GroupSize: 32}); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{dense, w4} {
			m, err := arch.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ref, err := reference.New(m, reference.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			var ws []backends.Window
			for i := 0; i < 2; i++ {
				toks := make([]int32, 80)
				for j := range toks {
					toks[j] = int32((j*37 + i*11 + 3) % o.Vocab)
					if c.init == fixtures.InitBigram {
						toks[j] = int32(demo[80*i+j])
					}
				}
				ws = append(ws, backends.Window{Index: i, Tokens: toks, First: 1})
			}
			for _, prec := range []string{"fp32", "bf16"} {
				d, err := emu.New(emu.Options{Name: "emu:0"})
				if errors.Is(err, emu.ErrNoCgo) {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				b, err := cuda.New(m, []device.Device{d}, cuda.Options{Name: "emu", Precision: prec, MaxTokens: 80})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				rep, err := Run(context.Background(), ref, b, ws, Options{Tolerances: DefaultTolerances(prec, false), Layers: m.Config.NumHiddenLayers})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s %s %s: max |ΔNLL| %.3g mean %.3g top-1 %.3f", a, c.init, filepath.Base(dir), prec, rep.MaxAbsNLLDiff, rep.MeanAbsNLLDiff, rep.Top1Agreement)
				if !rep.Pass || len(rep.Points) != 2+5*m.Config.NumHiddenLayers {
					t.Errorf("%s %s %s %s: pass %v, %d probe points, failures %v", a, c.init, filepath.Base(dir), prec, rep.Pass, len(rep.Points), rep.Failures)
				}
			}
		}
	}
}
