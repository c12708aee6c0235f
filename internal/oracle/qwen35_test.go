package oracle

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestChunkedDeltaRuleMatchesRecurrent: the chunked gated delta rule the
// oracle runs (torch_chunk_gated_delta_rule's algebra) equals the plain
// recurrent form (torch_recurrent_gated_delta_rule, written out below)
// in float64 for chunk sizes from 1 (no intra-chunk system) to longer than
// the sequence, with decays from strong to none (g = 0).
func TestChunkedDeltaRuleMatchesRecurrent(t *testing.T) {
	const T, dk, dv = 150, 5, 3
	r := rand.New(rand.NewPCG(7, 1))
	norm := func(n int) []float64 {
		x := make([]float64, n)
		var s float64
		for i := range x {
			x[i] = r.NormFloat64()
			s += x[i] * x[i]
		}
		for i := range x {
			x[i] /= math.Sqrt(s)
		}
		return x
	}
	q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
	beta, g := make([]float64, T), make([]float64, T)
	for i := range q {
		q[i], k[i], v[i] = norm(dk), norm(dk), make([]float64, dv)
		for c := range v[i] {
			v[i][c] = r.NormFloat64()
		}
		beta[i] = r.Float64()
		g[i] = -3 * r.Float64()
		if i%10 == 0 {
			g[i] = 0
		}
	}
	// Recurrent: S ← e^g S; u = β(v − Sᵀk); S ← S + k uᵀ; o = Sᵀq.
	S := make([][]float64, dk)
	for i := range S {
		S[i] = make([]float64, dv)
	}
	want := make([][]float64, T)
	for t0 := 0; t0 < T; t0++ {
		for i := range S {
			for c := range S[i] {
				S[i][c] *= math.Exp(g[t0])
			}
		}
		u := make([]float64, dv)
		for c := range u {
			var m float64
			for i := range S {
				m += S[i][c] * k[t0][i]
			}
			u[c] = beta[t0] * (v[t0][c] - m)
		}
		want[t0] = make([]float64, dv)
		for i := range S {
			for c := range S[i] {
				S[i][c] += k[t0][i] * u[c]
			}
		}
		for c := range want[t0] {
			for i := range S {
				want[t0][c] += S[i][c] * q[t0][i]
			}
		}
	}
	for _, size := range []int{1, 2, 7, 64, 200} {
		got := chunkedDeltaRule(q, k, v, beta, g, size)
		var worst float64
		for t0 := range got {
			for c := range got[t0] {
				worst = math.Max(worst, math.Abs(got[t0][c]-want[t0][c]))
			}
		}
		if worst > 1e-12 {
			t.Errorf("chunk %d: max |chunked − recurrent| = %g", size, worst)
		}
	}
}
