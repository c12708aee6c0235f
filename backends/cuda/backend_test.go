package cuda

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/reference"
)

func emuDevices(t testing.TB, n int, mem int64) []device.Device {
	t.Helper()
	var ds []device.Device
	for i := 0; i < n; i++ {
		d, err := emu.New(emu.Options{Name: "emu:" + string(rune('0'+i)), MemBytes: mem, CheckGuards: true})
		if errors.Is(err, emu.ErrNoCgo) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		ds = append(ds, d)
	}
	return ds
}

func openModel(t testing.TB, dir string) *checkpoint.Model {
	t.Helper()
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestConformance runs the shared backend suite on the emulator. The
// tolerance covers fp32 arithmetic only (the suite compares the backend with
// itself): NLL from the fused kernel's fp32 log-sum-exp against the host's
// float64 normalization of the same fp32 logits, and self-KL.
// cudaPending are the families whose operations the CUDA backend does not
// compute yet (issue 14): New must refuse them (TestRefusesPending), and
// the end-to-end tests run every other family.
// They are the families Supports refuses (the suite model's spec): none
// since gemma4_text (gemma4.go).
func cudaPendingArchs(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, a := range arch.Names() {
		dir := t.TempDir()
		if _, err := backendtest.WriteModel(dir, a, 1); err != nil {
			t.Fatal(err)
		}
		cfg, err := arch.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := arch.For(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if Supports(spec) != nil {
			out[a] = true
		}
	}
	return out
}

func cudaArchs(t *testing.T) []string {
	var out []string
	pending := cudaPendingArchs(t)
	for _, a := range arch.Names() {
		if !pending[a] {
			out = append(out, a)
		}
	}
	return out
}

// TestRefusesPending: a family with operations the CUDA backend lacks is
// refused by New with arch.ErrUnsupported, naming them, never computed as
// another family; every other family is accepted by Supports.
func TestRefusesPending(t *testing.T) {
	cudaPending := cudaPendingArchs(t)
	for _, a := range arch.Names() {
		dir := t.TempDir()
		if _, err := backendtest.WriteModel(dir, a, 1); err != nil {
			t.Fatal(err)
		}
		_, err := New(openModel(t, dir), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 96})
		switch {
		case cudaPending[a] && (!errors.Is(err, arch.ErrUnsupported) || !strings.Contains(err.Error(), "not implemented by the CUDA backend")):
			t.Errorf("%s: New: %v, want a refusal naming what is missing", a, err)
		case !cudaPending[a] && err != nil:
			t.Errorf("%s: New: %v", a, err)
		}
	}
	if cudaPending["gemma4_text"] { // issue 14: computed by gemma4.go
		t.Error("Supports refuses gemma4_text")
	}
}

func TestConformance(t *testing.T) {
	for _, prec := range []string{"bf16", "fp32"} {
		t.Run(prec, func(t *testing.T) {
			backendtest.Run(t, func(t *testing.T, dir string) backends.Backend {
				b, err := New(openModel(t, dir), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: prec, MaxTokens: 128, HeadRows: 48})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}, backendtest.Tolerance(2e-5), backendtest.Archs(cudaArchs(t)...))
		})
	}
}

// compareWithReference scores one window with both backends and returns
// the largest |ΔNLL|.
func compareWithReference(t *testing.T, dir string, devs []device.Device, opt Options, toks []int32) (maxd, meand float64, b *Backend) {
	t.Helper()
	m := openModel(t, dir)
	ref, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	b, err = New(m, devs, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	w := backends.Window{Tokens: toks, First: 1}
	rs, err := ref.Score(context.Background(), w, backends.Request{TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	es, err := b.Score(context.Background(), w, backends.Request{TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.NLL {
		d := math.Abs(rs.NLL[i] - es.NLL[i])
		maxd = math.Max(maxd, d)
		meand += d / float64(len(rs.NLL))
	}
	return maxd, meand, b
}

func testTokens(n int, vocab int, seed uint64) []int32 {
	t := make([]int32, n)
	x := seed*2654435761 + 1
	for i := range t {
		x = x*6364136223846793005 + 1442695040888963407
		t[i] = int32((x >> 33) % uint64(vocab))
	}
	return t
}

// TestAgainstReference: every architecture, every precision, end to end
// against the float64 reference. Tolerances: docs/cuda.md.
func TestAgainstReference(t *testing.T) {
	type tl struct{ max, mean float64 }
	tol := map[string]tl{"fp32": {1e-4, 2e-5}, "bf16": {0.25, 0.06}, "fp16": {0.04, 0.01}}
	for _, a := range cudaArchs(t) {
		dir := t.TempDir()
		if _, err := backendtest.WriteModel(dir, a, 1); err != nil {
			t.Fatal(err)
		}
		for _, prec := range []string{"fp32", "bf16", "fp16"} {
			maxd, meand, _ := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: prec, MaxTokens: 96}, testTokens(90, backendtest.Vocab, 7))
			t.Logf("%s %s: max |ΔNLL| %.3g, mean %.3g", a, prec, maxd, meand)
			tp := tol[prec]
			if !(maxd <= tp.max && meand <= tp.mean) { // NaN-safe
				t.Errorf("%s %s: max |ΔNLL| %.3g, mean %.3g, tolerance %g, %g", a, prec, maxd, meand, tp.max, tp.mean)
			}
		}
	}
}
