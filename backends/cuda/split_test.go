package cuda

import (
	"bytes"
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
)

// TestMultiDeviceSplit: the same model on one emulated device and split
// over three (by --gpu-split budgets, and by free memory) gives
// bit-identical scores, and the plan puts the layers where the budgets say.
func TestMultiDeviceSplit(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "qwen2", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	opt := Options{Name: "emu", Precision: "bf16", MaxTokens: 40, HeadRows: 16}
	one, err := New(m, emuDevices(t, 1, 1<<30), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	p1 := one.Plan()
	L := len(p1.LayerBytes)
	if L < 2 {
		t.Fatalf("fixture has %d layers, need ≥ 2", L)
	}
	d0 := p1.Devices[0]
	fixed := d0.Activations + d0.Scratch
	// device 0: embedding + first layer; device 1: the rest; device 2: head only
	rest := int64(0)
	for _, b := range p1.LayerBytes[1:] {
		rest += b
	}
	budgets := []float64{float64(d0.Embed+fixed+p1.LayerBytes[0]) / 1e9, float64(fixed+rest) / 1e9, float64(d0.Embed+d0.Head+d0.Logits+d0.Activations+d0.Scratch+1024) / 1e9}
	var log bytes.Buffer
	opt3 := opt
	opt3.SplitGB, opt3.Log = budgets, &log
	three, err := New(m, emuDevices(t, 3, 1<<30), opt3)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	defer three.Close()
	p3 := three.Plan()
	if p3.Devices[0].EndLayer != 1 || p3.Devices[1].FirstLayer != 1 || p3.Devices[1].EndLayer != L || !p3.Devices[2].HoldsHead {
		t.Errorf("split plan:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "emu:1") || !strings.Contains(log.String(), "layers 1-") {
		t.Errorf("plan printout lacks devices/layers:\n%s", log.String())
	}
	t.Logf("\n%s", log.String())
	// free-memory split: devices so small that each holds one layer
	small := d0.Embed + fixed + p1.LayerBytes[0] + 64
	var devs []device.Device
	for i := 0; i < L+1; i++ {
		mem := small
		if i == L {
			mem = 1 << 30
		}
		d, err := emu.New(emu.Options{Name: "small", MemBytes: mem, CheckGuards: true})
		if errors.Is(err, emu.ErrNoCgo) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		devs = append(devs, d)
	}
	auto, err := New(m, devs, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	toks := testTokens(37, backendtest.Vocab, 3)
	w := backends.Window{Tokens: toks, First: 1}
	want, err := one.Score(context.Background(), w, backends.Request{TopK: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*Backend{"gpu-split": three, "free memory": auto} {
		got, err := b.Score(context.Background(), w, backends.Request{TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want.NLL {
			if math.Float64bits(got.NLL[i]) != math.Float64bits(want.NLL[i]) || got.Top[2*i] != want.Top[2*i] {
				t.Fatalf("%s: target %d: NLL %v top %d, one device %v top %d", name, i, got.NLL[i], got.Top[2*i], want.NLL[i], want.Top[2*i])
			}
		}
	}
}

// TestPlanDoesNotFit: a model larger than the devices is refused with a
// clear error before any allocation.
func TestPlanDoesNotFit(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "llama", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	devs := emuDevices(t, 2, 20_000)
	var log bytes.Buffer
	_, err := New(m, devs, Options{Name: "emu", MaxTokens: 64, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("err = %v, want a does-not-fit error", err)
	}
	if !strings.Contains(log.String(), "memory plan") {
		t.Errorf("no plan printed:\n%s", log.String())
	}
	for _, d := range devs {
		if free, total, _ := d.MemInfo(); free != total {
			t.Errorf("%s: %d bytes allocated after a refused plan", d.Name(), total-free)
		}
	}
	if _, err := New(m, devs, Options{SplitGB: []float64{1}}); err == nil || !strings.Contains(err.Error(), "gpu-split") {
		t.Errorf("mismatched --gpu-split: %v", err)
	}
	if _, err := New(m, devs, Options{SplitGB: []float64{1, 1}}); err == nil || !strings.Contains(err.Error(), "free") {
		t.Errorf("--gpu-split above free memory: %v", err)
	}
}

// TestGrowBeyondMaxTokens: a window longer than the planned MaxTokens
// reallocates the per-window buffers and scores like a backend planned for
// it; a device too small for the larger buffers gives an error, not a crash.
func TestGrowBeyondMaxTokens(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "mistral", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	toks := testTokens(70, backendtest.Vocab, 5)
	w := backends.Window{Tokens: toks, First: 1}
	var scores [][]float64
	for _, mt := range []int{16, 70} {
		var log bytes.Buffer
		b, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", MaxTokens: mt, HeadRows: 32, Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.Score(context.Background(), w, backends.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if mt == 16 && !strings.Contains(log.String(), "growing the per-window buffers from 16 to 70") {
			t.Errorf("no growth note:\n%s", log.String())
		}
		scores = append(scores, s.NLL)
		b.Close()
	}
	for i := range scores[0] {
		if math.Float64bits(scores[0][i]) != math.Float64bits(scores[1][i]) {
			t.Fatalf("target %d: grown %v, planned %v", i, scores[0][i], scores[1][i])
		}
	}
	// a device with room for the plan at 16 tokens but not for 4000
	probe, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	need := probe.Plan().Devices[0].Total()
	probe.Close()
	small := emuDevices(t, 1, need+1000)
	b, err := New(m, small, Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	long := backends.Window{Tokens: testTokens(4000, backendtest.Vocab, 6), First: 1}
	if _, err := b.Score(context.Background(), long, backends.Request{}); err == nil || !strings.Contains(err.Error(), "out of device memory") {
		t.Fatalf("long window on a small device: %v", err)
	}
	if _, err := b.Score(context.Background(), w, backends.Request{}); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("after a failed growth: %v", err)
	}
}

// TestTopKAllocFailure: a top-k request whose buffer does not fit fails
// cleanly, and the backend keeps working for smaller requests (the failed
// reallocation must not leave a capacity without a buffer: the next launch
// would write top-k ids through a null device pointer).
func TestTopKAllocFailure(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "llama", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	probe, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	need := probe.Plan().Devices[0].Total()
	probe.Close()
	b, err := New(m, emuDevices(t, 1, need+4096), Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := backends.Window{Tokens: testTokens(16, backendtest.Vocab, 3), First: 1}
	if _, err := b.Score(context.Background(), w, backends.Request{TopK: backendtest.Vocab}); err == nil || !strings.Contains(err.Error(), "out of device memory") {
		t.Fatalf("top-%d on a small device: err = %v", backendtest.Vocab, err)
	}
	for _, k := range []int{1, 16} {
		s, err := b.Score(context.Background(), w, backends.Request{TopK: k})
		if err != nil {
			t.Fatalf("top-%d after a failed top-k allocation: %v", k, err)
		}
		if len(s.Top) != 15*k {
			t.Fatalf("top-%d: %d ids", k, len(s.Top))
		}
	}
}

// reserving is a device that needs n bytes for itself (device.Reserver),
// like a GPU's kernel local memory.
type reserving struct {
	device.Device
	n int64
}

func (r reserving) Reserve() int64 { return r.n }

// TestPlanKeepsDeviceReserve: the plan leaves a device's own reserve free,
// both when it fills a device by free memory and against --gpu-split.
func TestPlanKeepsDeviceReserve(t *testing.T) {
	dir := t.TempDir()
	if _, err := backendtest.WriteModel(dir, "llama", 1); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	probe, err := New(m, emuDevices(t, 1, 1<<30), Options{Name: "emu", MaxTokens: 16, HeadRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	need := probe.Plan().Devices[0].Total()
	probe.Close()
	for _, c := range []struct {
		reserve int64
		split   []float64
		want    string // "" = loads
	}{
		{0, nil, ""},
		{1000, nil, ""},
		{need, nil, "does not fit"},
		{0, []float64{float64(need+1000) / 1e9}, ""},
		{2000, []float64{float64(need+1000) / 1e9}, "after the device's own reserve"},
	} {
		d := reserving{emuDevices(t, 1, need+2000)[0], c.reserve}
		b, err := New(m, []device.Device{d}, Options{Name: "emu", MaxTokens: 16, HeadRows: 32, SplitGB: c.split})
		if c.want == "" {
			if err != nil {
				t.Errorf("reserve %d split %v: %v", c.reserve, c.split, err)
				continue
			}
			b.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reserve %d split %v: err = %v, want %q", c.reserve, c.split, err, c.want)
		}
		if b != nil {
			b.Close()
		}
	}
}

// TestCheckElems: windows whose activation buffers exceed the elementwise
// kernels' 32-bit indexing are refused, the largest one that fits is not.
func TestCheckElems(t *testing.T) {
	s := &arch.Spec{Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 28672} // Llama-3-70B
	limit := maxKernelElems / 28672
	if err := checkElems(s, limit); err != nil {
		t.Errorf("%d tokens: %v", limit, err)
	}
	for _, T := range []int{limit + 1, 131072} {
		if err := checkElems(s, T); err == nil || !strings.Contains(err.Error(), "32-bit indexing") {
			t.Errorf("%d tokens: err = %v", T, err)
		}
	}
}
