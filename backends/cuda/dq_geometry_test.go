package cuda

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
)

// TestDqGeometryMatchesHeader: the Go launch geometry uses the numbers the
// kernels were written for (kernels/dq.cuh), and covers every output of
// awkward shapes with grids inside the CUDA limits.
func TestDqGeometryMatchesHeader(t *testing.T) {
	src, err := os.ReadFile("kernels/dq.cuh")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (DQ_\w+) (\d+)`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]], _ = strconv.Atoi(m[2])
	}
	for name, v := range map[string]int{"DQ_V": dqV, "DQ_CV": dqCV, "DQ_TX": dqTX, "DQ_TY": dqTY} {
		if defs[name] != v {
			t.Errorf("kernels/dq.cuh %s = %d, dq_geometry.go has %d", name, defs[name], v)
		}
	}
	for _, c := range []struct{ N, K int }{{1, 1}, {13, 70}, {152064, 3584}, {262144, 8}, {4096, 14336}} {
		g, b := dqRowGrid(c.N, c.K)
		if err := device.CheckGeometry("row", g, b, 0); err != nil {
			t.Errorf("%d×%d: %v", c.N, c.K, err)
		}
		if g.X*b.Y < c.N || g.Y*b.X*dqV < c.K {
			t.Errorf("%d×%d: row grid %v block %v misses outputs", c.N, c.K, g, b)
		}
		g, b = dqColGrid(c.N, c.K)
		if err := device.CheckGeometry("col", g, b, 0); err != nil {
			t.Errorf("%d×%d: %v", c.N, c.K, err)
		}
		if g.X*b.X < c.N || g.Y*b.Y*dqCV < c.K {
			t.Errorf("%d×%d: column grid %v block %v misses outputs", c.N, c.K, g, b)
		}
	}
}
