package cuda

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
)

// issue 11 item 1, on the cuda loader (run by the emulator): tensors a
// mislabelled config.json leaves unused are refused before anything is
// uploaded, naming them; AllowUnusedTensors overrides it.
func TestNewRefusesUnusedTensors(t *testing.T) {
	for _, k := range fixtures.Mislabels() {
		t.Run(k.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			want, err := fixtures.WriteMislabelled(dir, k)
			if err != nil {
				t.Fatal(err)
			}
			m := openModel(t, dir)
			devs := emuDevices(t, 1, 1<<30)
			_, err = New(m, devs, Options{Name: "emu", Precision: "fp32", MaxTokens: 32})
			var ue *checkpoint.UnusedError
			if !errors.Is(err, checkpoint.ErrUnused) || !errors.As(err, &ue) {
				t.Fatalf("New: %v, want an unused-tensor error", err)
			}
			if !slices.Equal(ue.Names, want) || ue.Loader != "emu" {
				t.Errorf("unused %v by %q, want %v by emu", ue.Names, ue.Loader, want)
			}
			if free, total, err := devs[0].MemInfo(); err != nil || free != total {
				t.Errorf("device memory after the refusal: %d of %d free (%v)", free, total, err)
			}
			b, err := New(m, devs, Options{Name: "emu", Precision: "fp32", MaxTokens: 32, AllowUnusedTensors: true})
			if err != nil {
				t.Fatalf("AllowUnusedTensors: %v", err)
			}
			b.Close()
		})
	}
}
