package cuda

import (
	"bytes"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/backends/cuda/device"
)

// TestPlanDevice0WithoutLayers: device 0 runs the embedding gather even
// when every layer goes elsewhere, so its embedding and per-window buffers
// are checked against its budget: a device 0 too small for them is
// refused before any allocation, naming it, even though a second device
// could hold the whole model.
func TestPlanDevice0WithoutLayers(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "llama", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	probe, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	d0 := probe.Plan().Devices[0]
	probe.Close()
	// room for the embedding alone, not for the activations as well
	devs := append(emuDevices(t, 1, d0.Embed+d0.Activations/2), emuDevices(t, 1, 1<<30)...)
	var log bytes.Buffer
	_, err = New(m, devs, Options{Name: "emu", MaxTokens: 16, HeadRows: 32, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "cannot hold the embedding") || !strings.Contains(err.Error(), devs[0].Name()) {
		t.Fatalf("err = %v, want device 0's embedding + activations refused\n%s", err, log.String())
	}
	for _, d := range devs {
		if free, total, _ := d.MemInfo(); free != total {
			t.Errorf("%s: %d bytes allocated after a refused plan", d.Name(), total-free)
		}
	}
	// with room for both (but no layer), device 0 holds no layer and loads
	devs = append(emuDevices(t, 1, d0.Embed+d0.Activations+d0.Scratch/2), emuDevices(t, 1, 1<<30)...)
	b, err := New(m, devs, Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if p := b.Plan().Devices[0]; p.EndLayer != p.FirstLayer {
		t.Errorf("device 0 got layers %d-%d", p.FirstLayer, p.EndLayer-1)
	}
}

// allocCounter counts a device's allocations.
type allocCounter struct {
	device.Device
	n int
}

func (a *allocCounter) Alloc(n int64) (device.Ptr, error) { a.n++; return a.Device.Alloc(n) }

func (a *allocCounter) BatchedGemm(x device.BatchedGemm) error {
	return a.Device.(device.BatchedGemmer).BatchedGemm(x)
}

// TestLayerArenas: each decoder layer of a W4A16 model (several tensors per
// Linear, ~25 per layer) is one allocation, of the plan's per-layer bytes
// (every tensor 256-byte aligned). Scoring through arenas is covered by
// every end-to-end test against the reference.
func TestLayerArenas(t *testing.T) {
	dir := writeQuantized(t, "qwen2", "W4A16-G32", false)
	m := openModel(t, dir)
	ac := &allocCounter{Device: emuDevices(t, 1, 1<<30)[0]}
	b, err := New(m, []device.Device{ac}, Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := b.Plan()
	L := len(p.LayerBytes)
	// per-window buffers, scratch, logits/targets/nll/kl/top, embedding,
	// final norm: everything else is one allocation per layer
	ds := b.devs[0]
	fixed := len(b.actBuffers(&devState{}, 16)) + 1 + 6 + 1 + 1
	if ds.head != nil && !(len(ds.head.ptrs) == 1 && ds.head.ptrs[0] == ds.embed) {
		fixed += len(ds.head.ptrs)
	}
	if ac.n != fixed+L {
		t.Errorf("%d allocations, want %d fixed + %d layers", ac.n, fixed, L)
	}
	for l, lw := range ds.layers {
		if lw.arena == 0 {
			t.Errorf("layer %d has no arena", l)
		}
		if p.LayerBytes[l]%arenaAlign != 0 {
			t.Errorf("layer %d: %d bytes, not a multiple of %d", l, p.LayerBytes[l], arenaAlign)
		}
	}
}
