//go:build cuda

package cuda

// Dequantization kernels on a real GPU (make gpu-check): bit-identical to
// package quant like on the emulator, and timed per format at the shapes of
// one Llama-3.1-8B window.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/gpu"
)

func openGPU0(t *testing.T) *gpu.Device {
	t.Helper()
	d, err := gpu.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestDequantizeKernelsOnGPU runs the emulator's dequantization cases
// (linearCases, shapeCases, the throughput formats) on the GPU.
func TestDequantizeKernelsOnGPU(t *testing.T) {
	d := openGPU0(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, l := range linearCases(rng) {
		checkDequantKernel(t, d, l, 0)
	}
	rng = rand.New(rand.NewPCG(16, 8))
	for _, l := range shapeCases(rng) {
		for _, off := range []int{0, 2} {
			checkDequantKernel(t, d, l, off)
		}
	}
	for _, f := range rateFormats() {
		checkDequantKernel(t, d, f.make(rng, 256, 4096), 0)
	}
}

// TestDequantThroughput times every format's kernel into a bf16 scratch at
// the Linear shapes of one Llama-3.1-8B layer (q|k|v and gate|up fused, as
// the backend runs them) and reports, per format, the time for the 32
// layers of one window, the bytes moved (dequantBytes) and the rate
// against the memory bus's peak; $QPPL_DQ_REPORT receives the table.
func TestDequantThroughput(t *testing.T) {
	d := openGPU0(t)
	info := d.Info()
	peak := 2 * float64(info.MemClockKHz) * 1e3 * float64(info.MemBusBits) / 8 // DDR: two transfers per clock
	shapes := []struct {
		name    string
		out, in int
	}{{"q|k|v", 6144, 4096}, {"o", 4096, 4096}, {"gate|up", 28672, 4096}, {"down", 4096, 14336}}
	const layers, reps = 32, 10
	var rep strings.Builder
	fmt.Fprintf(&rep, "dequantization into bf16, Llama-3.1-8B layer shapes × %d layers (one window), %s, memory peak %.0f GB/s:\n", layers, info.Name, peak/1e9)
	fmt.Fprintf(&rep, "  %-32s %9s %10s %10s %8s\n", "format", "B/weight", "ms/window", "GB/s", "of peak")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range rateFormats() {
		var secs float64
		var moved, weights int64
		for _, s := range shapes {
			h, err := prepareLinear(f.make(rng, s.out, s.in), device.BF16)
			if err != nil {
				t.Fatal(err)
			}
			dl, err := upload(d, h)
			if err != nil {
				t.Fatal(err)
			}
			scratch, err := d.Alloc(int64(s.out * s.in * 2))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dl.weight(d, scratch, device.BF16); err != nil { // warm-up
				t.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < reps; i++ {
				if _, err := dl.weight(d, scratch, device.BF16); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			secs += time.Since(start).Seconds() / reps
			r, w := dequantBytes(h, device.BF16)
			moved += r + w
			weights += int64(s.out * s.in)
			for _, p := range dl.ptrs {
				d.Free(p)
			}
			d.Free(scratch)
		}
		rate := float64(moved) / secs
		fmt.Fprintf(&rep, "  %-32s %9.3f %10.2f %10.0f %7.0f%%\n", f.name, float64(moved)/float64(weights), layers*secs*1e3, rate/1e9, 100*rate/peak)
	}
	fmt.Fprintf(&rep, "docs/cuda.md's budget: W4A16 ≈ 2.52 B/weight, ≈ 5.9 ms per 8B window at 3.0 TB/s (≈ 11 ms with the GEMM's read of the scratch)\n")
	t.Log("\n" + rep.String())
	if path := os.Getenv("QPPL_DQ_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(rep.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
