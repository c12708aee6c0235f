package reference

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
)

// Environment of TestMoEPeakMemory: QPPL_MOE_PEAK=1 runs it (make
// bench-moe-mem); the child processes it starts get QPPL_MOE_PEAK_CHILD
// (the model directory) and QPPL_MOE_PEAK_T (the window length).
const (
	peakEnv      = "QPPL_MOE_PEAK"
	peakChildEnv = "QPPL_MOE_PEAK_CHILD"
	peakTEnv     = "QPPL_MOE_PEAK_T"
)

// peakReport is what a child process measures of its own backend.
type peakReport struct {
	Stored      int64 // bytes of every Linear as stored (StoredBytes) + dense tensors read
	Scratch     int64 // ws.w: the whole-decoded Linear buffer, bytes
	Activations int64 // every other workspace buffer after the window, bytes
	Expert      int64 // one expert's gate, up and down decoded to float64, bytes
	MaxLinear   int64 // the largest single Linear decoded to float64, bytes
	PeakRSS     int64 // VmHWM of /proc/self/status at the end, bytes
}

// TestMoEPeakMemory measures the peak resident memory of the reference
// backend scoring one window of qwen3_moe and qwen3_5_moe fixtures large
// enough that one expert decoded to float64 is measurable (issue 14:
// peak = packed checkpoint + one expert dense + activations; the reference
// decodes the experts one at a time, and row-decodable formats only by
// panels). Each measurement is a child process (this test binary) whose
// peak RSS the parent reads; a tiny model's peak is
// the process floor (Go runtime, test binary). The peak is the child's
// own VmHWM (/proc/self/status): getrusage's ru_maxrss of a child started
// by os/exec also counts the parent's memory (Go starts children with
// CLONE_VFORK|CLONE_VM, and exec keeps the old mm's high-water mark).
// Skipped unless
// QPPL_MOE_PEAK=1: it writes ~300 MB of fixtures.
func TestMoEPeakMemory(t *testing.T) {
	if dir := os.Getenv(peakChildEnv); dir != "" {
		peakChild(t, dir)
		return
	}
	if os.Getenv(peakEnv) == "" {
		t.Skipf("set %s=1 (make bench-moe-mem) to measure", peakEnv)
	}
	const T = 256
	root := t.TempDir()
	floorDir := filepath.Join(root, "floor")
	fo, err := fixtures.Defaults("qwen3_moe")
	if err != nil {
		t.Fatal(err)
	}
	fo.Init = fixtures.InitRandom
	if err := fixtures.Write(floorDir, fo); err != nil {
		t.Fatal(err)
	}
	floor, _ := peakRun(t, floorDir, 16)
	fmt.Printf("process floor (default qwen3_moe fixture, T=16): peak RSS %.1f MiB\n", mib(floor))
	fmt.Printf("%-12s %-6s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "family", "format", "file", "stored", "expert", "maxLinear", "scratch", "activ.", "expected", "+expert", "peakRSS")
	for _, name := range []string{"qwen3_moe", "qwen3_5_moe"} {
		o, err := fixtures.Defaults(name)
		if err != nil {
			t.Fatal(err)
		}
		// 32 experts of width 1024 on hidden 512, top 4, 2 layers: one
		// expert is 3·512·1024 weights (12 MiB in float64), the experts
		// 100 M weights (200 MB in BF16, 56 MB in W4A16-G128).
		o.Init, o.DType, o.Vocab, o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = fixtures.InitRandom, checkpoint.BF16, 512, 512, 1024, 8, 2, 64
		o.Config = map[string]any{"num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 1024}
		if name == "qwen3_5_moe" {
			o.Config["shared_expert_intermediate_size"] = 1024
		}
		dense := filepath.Join(root, name+"-bf16")
		if err := fixtures.Write(dense, o); err != nil {
			t.Fatal(err)
		}
		packed := filepath.Join(root, name+"-w4a16")
		if err := quantizer.Quantize(dense, packed, "W4A16", quantizer.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ format, dir string }{{"BF16", dense}, {"W4A16", packed}} {
			peak, r := peakRun(t, c.dir, T)
			fi, err := os.Stat(filepath.Join(c.dir, checkpoint.SafetensorsFile))
			if err != nil {
				t.Fatal(err)
			}
			expected := floor + r.Stored + r.Scratch + r.Activations
			fmt.Printf("%-12s %-6s %8.1fM %8.1fM %8.1fM %8.1fM %8.1fM %8.1fM %8.1fM %8.1fM %8.1fM\n", name, c.format,
				mib(fi.Size()), mib(r.Stored), mib(r.Expert), mib(r.MaxLinear), mib(r.Scratch), mib(r.Activations), mib(expected), mib(expected+r.Expert), mib(peak))
		}
	}
	fmt.Println("(MiB; stored: Linears as stored + dense tensors; expert: one expert's gate, up, down in float64; scratch: the whole-decoded Linear buffer (0: every Linear decodes by row panels); activ.: the other workspace buffers; expected = floor + stored + scratch + activ.; +expert adds one expert dense)")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// peakRun scores one window of T tokens of the model in dir in a child
// process and returns its peak RSS in bytes and its report.
func peakRun(t *testing.T, dir string, T int) (int64, peakReport) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMoEPeakMemory$", "-test.count=1")
	cmd.Env = append(os.Environ(), peakChildEnv+"="+dir, peakTEnv+"="+strconv.Itoa(T))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child on %s: %v\n%s", dir, err, out)
	}
	var r peakReport
	found := false
	for _, line := range splitLines(out) {
		if len(line) > 5 && line[:5] == "PEAK " {
			if err := json.Unmarshal([]byte(line[5:]), &r); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("child on %s printed no report:\n%s", dir, out)
	}
	if r.PeakRSS <= 0 {
		t.Skip("no VmHWM in /proc/self/status on this system")
	}
	return r.PeakRSS, r
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return append(out, string(b[start:]))
}

// peakChild opens the model in dir, scores one window and prints its
// report (the child side of TestMoEPeakMemory).
func peakChild(t *testing.T, dir string) {
	T, err := strconv.Atoi(os.Getenv(peakTEnv))
	if err != nil {
		t.Fatal(err)
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := New(m, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	toks := randomTokens(T, m.Config.VocabSize, 3)
	if err := b.LogProbs(context.Background(), backends.Window{Tokens: toks, First: 1}, 0, func(int, []float64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var r peakReport
	spec := b.m.spec
	for i := 0; i < spec.Layers; i++ {
		for _, l := range b.m.layers[i].lin {
			if l != nil {
				r.Stored += l.StoredBytes()
			}
		}
		for _, e := range b.m.layers[i].experts {
			for _, l := range e {
				if l != nil {
					r.Stored += l.StoredBytes()
				}
			}
		}
		if spec.Sparse(i) {
			W, C := spec.MoE.Intermediate, spec.Hidden
			r.Expert = int64(3*W*C) * 8
		}
		for _, l := range spec.LayerLinears(i) {
			r.MaxLinear = max(r.MaxLinear, int64(l.Out*l.In)*8)
		}
	}
	for _, ts := range spec.DenseTensors() {
		if ti, ok := m.Peek(ts.Name); ok {
			r.Stored += ti.Size
		}
	}
	r.Scratch = int64(cap(b.ws.w)) * 8
	r.Activations = workspaceBytes(reflect.ValueOf(&b.ws).Elem()) - r.Scratch
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range splitLines(st) {
			var kb int64
			if n, _ := fmt.Sscanf(line, "VmHWM: %d kB", &kb); n == 1 {
				r.PeakRSS = kb * 1024
			}
		}
	}
	js, _ := json.Marshal(r)
	fmt.Printf("PEAK %s\n", js)
}

// workspaceBytes sums the capacity of every []float64 (and [][]float64)
// reachable from the workspace struct v, following pointers to structs.
func workspaceBytes(v reflect.Value) int64 {
	var n int64
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			n += workspaceBytes(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			n += workspaceBytes(v.Field(i))
		}
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.Float64:
			n += int64(v.Cap()) * 8
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				n += workspaceBytes(v.Index(i))
			}
		}
	}
	return n
}
