package reference

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
)

// issue 11 item 1: a config.json that leaves checkpoint tensors unused
// (fewer layers, biases of another architecture, a tied head over an
// lm_head) is refused, naming exactly those tensors; AllowUnusedTensors
// overrides it.
func TestNewRefusesUnusedTensors(t *testing.T) {
	for _, k := range fixtures.Mislabels() {
		t.Run(k.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			want, err := fixtures.WriteMislabelled(dir, k)
			if err != nil {
				t.Fatal(err)
			}
			checkUnused(t, dir, want)
		})
	}
}

// The same for quantized checkpoints: scales, zero points and g_idx are
// consumed by the format when their module is used, and listed when not.
func TestNewRefusesUnusedQuantizedTensors(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, err := fixtures.WriteMislabelled(src, fixtures.FewerLayers); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"GPTQ-ACTORDER", "W4A16-ASYM", "NVFP4"} {
		t.Run(scheme, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "q")
			if err := quantizer.Quantize(src, dst, scheme, quantizer.Options{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			m, err := checkpoint.OpenDir(dst)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range m.Names() {
				if strings.HasPrefix(n, "model.layers.3.") {
					want = append(want, n)
				}
			}
			m.Close()
			checkUnused(t, dst, want)
		})
	}
}

func checkUnused(t *testing.T, dir string, want []string) {
	t.Helper()
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = New(m, Options{})
	var ue *checkpoint.UnusedError
	if !errors.Is(err, checkpoint.ErrUnused) || !errors.As(err, &ue) {
		t.Fatalf("New: %v, want an unused-tensor error", err)
	}
	if !slices.Equal(ue.Names, want) {
		t.Errorf("unused %v, want %v", ue.Names, want)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want[0]) {
		t.Errorf("error %q does not name the directory and the tensors", err)
	}
	b, err := New(m, Options{AllowUnusedTensors: true})
	if err != nil {
		t.Fatalf("AllowUnusedTensors: %v", err)
	}
	b.Close()
}
