//go:build cuda

package gpu_test

// Real-GPU tests (make gpu-check). They need an NVIDIA GPU: the cuda build
// of gorgonia.org/cu exits at start-up without one.

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/backends/cuda"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/backends/cuda/gpu"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/reference"
)

func openGPU(t *testing.T) *gpu.Device {
	t.Helper()
	d, err := gpu.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openModel(t *testing.T, dir string) *checkpoint.Model {
	t.Helper()
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestConformance(t *testing.T) {
	d := openGPU(t)
	backendtest.Run(t, func(t *testing.T, dir string) backends.Backend {
		b, err := cuda.New(openModel(t, dir), []device.Device{d}, cuda.Options{Precision: "bf16", MaxTokens: 128, HeadRows: 48})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, backendtest.Tolerance(1e-4), backendtest.NonDeterministic())
}

func tokens(n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*7919 + 13) % vocab)
	}
	return t
}

func score(t *testing.T, b backends.Backend, toks []int32) []float64 {
	t.Helper()
	s, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s.NLL
}

// TestSchemes: every scheme of fixtures/quantizer on every architecture,
// GPU (fp32) against the float64 reference and GPU against the emulator,
// with the tolerances of docs/cuda.md.
func TestSchemes(t *testing.T) {
	d := openGPU(t)
	em, err := emu.New(emu.Options{Name: "emu"})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	act := map[string]bool{"NVFP4": true, "FP8": true, "FP8-DYNAMIC": true, "W8A8": true}
	for _, a := range fixtures.Architectures() {
		o, err := fixtures.Defaults(a)
		if err != nil {
			t.Fatal(err)
		}
		o.Vocab = 260
		dense := filepath.Join(t.TempDir(), "dense")
		if err := fixtures.Write(dense, o); err != nil {
			t.Fatal(err)
		}
		for _, sc := range append([]string{""}, quantizer.Schemes()...) {
			dir := dense
			if sc != "" {
				dir = filepath.Join(t.TempDir(), sc)
				gs := 0
				switch sc {
				case "W4A16", "W4A16-ASYM", "W4A16-ACTORDER", "GPTQ", "GPTQ-ACTORDER", "AWQ", "FP8-BLOCK", "AWQ-QUANT-CONFIG":
					gs = 32
				}
				if err := quantizer.Quantize(dense, dir, sc, quantizer.Options{Seed: 3, GroupSize: gs}); err != nil {
					t.Fatal(err)
				}
			}
			m := openModel(t, dir)
			ref, err := reference.New(m, reference.Options{})
			if err != nil {
				t.Fatal(err)
			}
			g, err := cuda.New(m, []device.Device{d}, cuda.Options{Precision: "fp32", MaxTokens: 128})
			if err != nil {
				t.Fatal(err)
			}
			e, err := cuda.New(m, []device.Device{em}, cuda.Options{Name: "emu", Precision: "fp32", MaxTokens: 128})
			if err != nil {
				t.Fatal(err)
			}
			toks := tokens(128, 260)
			rn, gn, en := score(t, ref, toks), score(t, g, toks), score(t, e, toks)
			var maxRef, maxEmu float64
			for i := range rn {
				maxRef = math.Max(maxRef, math.Abs(gn[i]-rn[i]))
				maxEmu = math.Max(maxEmu, math.Abs(gn[i]-en[i]))
			}
			tol := 1e-4
			if act[sc] {
				tol = 5e-2
			}
			t.Logf("%s %-14s gpu-reference %.3g gpu-emu %.3g", a, sc, maxRef, maxEmu)
			if !(maxRef <= tol && maxEmu <= tol) { // NaN-safe
				t.Errorf("%s %s: max |ΔNLL| gpu-reference %.3g, gpu-emu %.3g > %g", a, sc, maxRef, maxEmu, tol)
			}
			ref.Close()
			g.Close()
			e.Close()
		}
	}
}
