package cuda

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/reference"
)

// rewriteModel copies model src to a new directory with every tensor as
// F32, renamed by rename and its values passed through edit.
func rewriteModel(t *testing.T, src string, rename func(string) string, edit func(name string, v []float64)) string {
	t.Helper()
	m := openModel(t, src)
	var ts []checkpoint.WriteTensor
	for _, name := range m.Names() {
		v, shape, err := m.ReadFloat64(name)
		if err != nil {
			t.Fatal(err)
		}
		edit(name, v)
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		}
		ts = append(ts, checkpoint.WriteTensor{Name: rename(name), DType: checkpoint.F32, Shape: shape, Data: b})
	}
	dir := t.TempDir()
	if err := checkpoint.WriteFile(filepath.Join(dir, checkpoint.SafetensorsFile), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, checkpoint.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.ConfigFile), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMixtureTieAgainstReference: with a zero router all of a token's
// routing probabilities tie; the emulated kernels must pick the experts the
// reference picks (torch.topk's choice over 8 experts, top 2: 6 and 5).
// Not vacuous: the fixture's experts differ, so swapping experts 6 and 3
// moves the reference's NLL far beyond
// the fp32 tolerance — a backend choosing by another rule would too.
func TestMixtureTieAgainstReference(t *testing.T) {
	src := t.TempDir()
	if _, err := backendtest.WriteModel(src, "qwen3_moe", 3); err != nil {
		t.Fatal(err)
	}
	same := func(n string) string { return n }
	zero := func(name string, v []float64) {
		if strings.HasSuffix(name, ".mlp.gate.weight") {
			clear(v)
		}
	}
	dir := rewriteModel(t, src, same, zero)
	swap := rewriteModel(t, dir, func(n string) string {
		switch {
		case strings.Contains(n, ".mlp.experts.6."):
			return strings.Replace(n, ".mlp.experts.6.", ".mlp.experts.3.", 1)
		case strings.Contains(n, ".mlp.experts.3."):
			return strings.Replace(n, ".mlp.experts.3.", ".mlp.experts.6.", 1)
		}
		return n
	}, zero)
	toks := testTokens(70, backendtest.Vocab, 5)
	maxd, meand, _ := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 96}, toks)
	t.Logf("zero router: emu vs reference max |ΔNLL| %.3g, mean %.3g", maxd, meand)
	if !(maxd <= 1e-4 && meand <= 2e-5) {
		t.Errorf("zero router: emu vs reference max |ΔNLL| %.3g, mean %.3g, tolerance 1e-4, 2e-5", maxd, meand)
	}
	nll := func(dir string) []float64 {
		b, err := reference.New(openModel(t, dir), reference.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
		if err != nil {
			t.Fatal(err)
		}
		return sc.NLL
	}
	a, s := nll(dir), nll(swap)
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-s[i]))
	}
	if d < 1e-2 {
		t.Errorf("swapping experts 6 and 3 moves the NLL by only %.3g: the tie choice is not observable", d)
	}
}
