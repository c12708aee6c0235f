//go:build cuda && cudaown

package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/gpu"
)

// TestOpenWithoutGPU: a binary of the own binding starts on a machine
// without a usable GPU (this test runs at all), and Open reports
// gpu.ErrNoGPU with the driver's reason and the fallback backends.
// On a machine with a GPU it checks nothing and is skipped.
func TestOpenWithoutGPU(t *testing.T) {
	d, err := gpu.Open(0)
	if err == nil {
		d.Close()
		t.Skip("a GPU is present")
	}
	if !errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("Open failed for another reason: %v", err)
	}
	for _, want := range []string{"no usable NVIDIA GPU", "--backend reference", "emu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(err.Error(), "cuInit") && !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("error %q does not say why (cuInit result or missing libcuda.so.1)", err)
	}
	t.Log(err)
}
