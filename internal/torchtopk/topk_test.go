package torchtopk

import (
	"slices"
	"testing"
)

// TestIndicesMatchTorch: torch.topk(torch.tensor([x], dtype=float32), k)
// .indices from torch 1.13.0 on the CPU (Debian python3-torch, x86-64),
// ties included: both algorithms (nth_element + sort for k·64 > n,
// partial_sort for k·64 ≤ n), std::sort's insertion-sort and introsort
// paths (k - 1 > 16).
func TestIndicesMatchTorch(t *testing.T) {
	fill := func(n int, f func(i int) float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	zero := func(int) float64 { return 0 }
	for _, c := range []struct {
		x    []float64
		k    int
		want []int
	}{
		{fill(8, zero), 1, []int{6}},
		{fill(8, zero), 2, []int{6, 5}},
		{fill(8, zero), 3, []int{6, 5, 4}},
		{[]float64{1, 2, 2, 0, 2, 0, 0, 0}, 1, []int{1}},
		{[]float64{1, 2, 2, 0, 2, 0, 0, 0}, 2, []int{1, 4}},
		{[]float64{1, 2, 2, 0, 2, 0, 0, 0}, 3, []int{1, 4, 2}},
		{[]float64{0, 0, 0, 0, 0, 0, 0, 5}, 2, []int{7, 5}},
		{[]float64{0, 0, 0, 0, 0, 0, 0, 5}, 3, []int{7, 5, 4}},
		{[]float64{3, 1, 3, 1, 3, 1, 3, 1}, 3, []int{2, 4, 6}},
		{[]float64{1, 1, 0, 0, 0, 0, 1, 1}, 3, []int{1, 7, 6}},
		{fill(128, zero), 8, []int{84, 87, 86, 85, 82, 81, 88, 83}},
		{fill(256, zero), 8, []int{172, 169, 170, 171, 174, 175, 168, 173}},
		{fill(512, zero), 8, []int{7, 4, 1, 3, 5, 0, 2, 6}},
		{fill(1024, zero), 8, []int{7, 4, 1, 3, 5, 0, 2, 6}},
		{fill(64, func(i int) float64 { return float64(i * 7 % 5) }), 8, []int{22, 52, 12, 17, 42, 27, 32, 47}},
		{fill(128, func(i int) float64 { return float64(i % 3) }), 8, []int{35, 44, 86, 41, 89, 38, 92, 29}},
		{fill(1024, func(i int) float64 { return float64(i * 5 % 4) }), 8, []int{7, 11, 27, 3, 19, 31, 23, 15}},
		{fill(256, func(i int) float64 { return float64(i * 11 % 6) }), 8, []int{157, 133, 49, 139, 145, 151, 43, 31}},
		{fill(40, zero), 4, []int{28, 26, 27, 25}},
		{fill(17, zero), 16, []int{8, 16, 15, 14, 13, 12, 11, 10, 9, 4, 1, 2, 3, 6, 7, 0}},
		{fill(40, func(i int) float64 { return float64(i % 2) }), 25, []int{39, 11, 9, 7, 5, 3, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 1, 34, 14, 4, 32, 16}},
	} {
		if got := Indices(c.x, c.k); !slices.Equal(got, c.want) {
			t.Errorf("n %d k %d %v…: %v, torch %v", len(c.x), c.k, c.x[:min(8, len(c.x))], got, c.want)
		}
	}
}

// TestIndicesAreTopK: without ties, the k largest in descending order.
func TestIndicesAreTopK(t *testing.T) {
	x := make([]float64, 300)
	for i := range x {
		x[i] = float64((i*7919)%1009) + 0.5
	}
	for _, k := range []int{1, 4, 8, 17, 100, 300} {
		got := Indices(x, k)
		s := slices.Clone(x)
		slices.Sort(s)
		slices.Reverse(s)
		for j, i := range got {
			if x[i] != s[j] {
				t.Fatalf("k %d: position %d holds %v, want %v", k, j, x[i], s[j])
			}
		}
	}
}
