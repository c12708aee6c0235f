//go:build cgo

package emu

import (
	"strings"
	"testing"
)

// TestShuffleSemantics checks the emulated warp shuffles and a shared
// memory exchange across __syncthreads against CUDA's definitions.
func TestShuffleSemantics(t *testing.T) {
	grid, block := 2, 64
	out, msg := selftest(0, grid, block)
	if msg != "" {
		t.Fatal(msg)
	}
	for b := 0; b < grid; b++ {
		for th := 0; th < block; th++ {
			v := func(lane int) float32 { return float32(lane*10 + b) }
			warp, lane := th/32*32, th%32
			want := [4]float32{v(warp + lane ^ 5), v(th), v(th), v(block - 1 - th)}
			if lane+3 < 32 {
				want[1] = v(th + 3)
			}
			if lane-2 >= 0 {
				want[2] = v(th - 2)
			}
			got := out[(b*block+th)*4 : (b*block+th)*4+4]
			for k := range want {
				if got[k] != want[k] {
					t.Fatalf("block %d thread %d op %d: %v, want %v", b, th, k, got[k], want[k])
				}
			}
		}
	}
}

func TestBarrierMisuseIsAnError(t *testing.T) {
	if _, msg := selftest(1, 1, 32); !strings.Contains(msg, "deadlock") {
		t.Errorf("divergent shuffle/barrier: %q, want a deadlock error", msg)
	}
	if _, msg := selftest(2, 1, 32); !strings.Contains(msg, "sync=0") {
		t.Errorf("barrier in a sync=0 kernel: %q", msg)
	}
	// 48 threads: the second warp has 16 lanes, a full-mask shuffle there
	// is undefined on a GPU
	if _, msg := selftest(0, 1, 48); !strings.Contains(msg, "partial warp") {
		t.Errorf("full-mask shuffle with 48 threads: %q, want a partial-warp error", msg)
	}
}

// TestVectorStores: the dequantization kernels' 16-byte stores write four
// words, and a misaligned one (a fault on a GPU) is an error.
func TestVectorStores(t *testing.T) {
	out, msg := selftest(3, 1, 32)
	if msg != "" {
		t.Fatal(msg)
	}
	if want := []float32{1, 2, 3, 4}; out[0] != want[0] || out[1] != want[1] || out[2] != want[2] || out[3] != want[3] {
		t.Errorf("aligned 16-byte store wrote %v, want %v", out[:4], want)
	}
	if _, msg := selftest(3, 2, 32); !strings.Contains(msg, "misaligned 16-byte vector store") {
		t.Errorf("store at out+4 bytes: %q, want a misaligned-store error", msg)
	}
}
