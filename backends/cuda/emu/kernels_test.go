//go:build cgo

package emu

// Per-kernel tests of backends/cuda/kernels run through the emulator against
// straightforward float64 computations (the reference's definitions).
//
// Error budget. Kernels compute in fp32 (unit roundoff u = 2^-24 ≈ 6e-8).
// A length-n reduction has a first-order error bound of n·u relative to the
// sum of magnitudes; with the block reductions used here (per-thread strided
// partial sums of length n/256, then 5 butterfly levels and ≤ 32 warp
// partials) the bound is (n/256 + 40)·u. Pointwise operations add a few u.
// Where an input is rounded to bf16/fp16 by the kernel's contract, the
// float64 computation rounds the same input first, so these tolerances
// do not depend on the activation precision.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
)

const u32 = 0x1p-24

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func TestRMSNorm(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range []struct{ rows, cols, block int }{{1, 1, 32}, {3, 7, 32}, {5, 96, 64}, {4, 1000, 128}, {2, 80, 256}} {
		x, w := randF32(rng, sh.rows*sh.cols, 3), randF32(rng, sh.cols, 1)
		eps := float32(1e-5)
		px, pw, po := upF32(t, d, x), upF32(t, d, w), allocT(t, d, 4*len(x))
		launch(t, d, device.KRMSNorm, device.D1(sh.rows), device.D1(sh.block), 0, po, px, pw, int32(sh.rows), int32(sh.cols), eps)
		want := make([]float64, len(x))
		for r := 0; r < sh.rows; r++ {
			ss := 0.0
			for c := 0; c < sh.cols; c++ {
				v := float64(x[r*sh.cols+c])
				ss += v * v
			}
			inv := 1 / math.Sqrt(ss/float64(sh.cols)+float64(float32(eps)))
			for c := 0; c < sh.cols; c++ {
				want[r*sh.cols+c] = float64(x[r*sh.cols+c]) * inv * float64(w[c])
			}
		}
		checkClose(t, "rms_norm", downF32(t, d, po, len(x)), want, 1e-30, float64(sh.cols/sh.block+48)*u32)
	}
}

func TestRopeSiluAddBiasEmbed(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(5, 6))
	T, H, D := 5, 3, 10
	x := randF32(rng, T*H*D, 1)
	cs, sn := make([]float32, T*D/2), make([]float32, T*D/2)
	for tt := 0; tt < T; tt++ {
		for j := 0; j < D/2; j++ {
			a := float64(tt) * math.Pow(10000, -2*float64(j)/float64(D))
			cs[tt*D/2+j], sn[tt*D/2+j] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	px := upF32(t, d, x)
	launch(t, d, device.KRope, device.D1(2), device.D1(32), 0, px, upF32(t, d, cs), upF32(t, d, sn), int32(T), int32(H), int32(D))
	want := make([]float64, len(x))
	for tt := 0; tt < T; tt++ {
		for h := 0; h < H; h++ {
			o := (tt*H + h) * D
			for j := 0; j < D/2; j++ {
				c, s := float64(cs[tt*D/2+j]), float64(sn[tt*D/2+j])
				x1, x2 := float64(x[o+j]), float64(x[o+j+D/2])
				want[o+j] = x1*c - x2*s
				want[o+j+D/2] = x2*c + x1*s
			}
		}
	}
	checkClose(t, "rope", downF32(t, d, px, len(x)), want, 4*u32, 4*u32)

	g, up := randF32(rng, 77, 4), randF32(rng, 77, 1)
	po := allocT(t, d, 4*77)
	launch(t, d, device.KSiluMul, device.D1(1), device.D1(32), 0, po, upF32(t, d, g), upF32(t, d, up), int32(77))
	want = make([]float64, 77)
	for i := range want {
		gv := float64(g[i])
		want[i] = gv / (1 + math.Exp(-gv)) * float64(up[i])
	}
	checkClose(t, "silu_mul", downF32(t, d, po, 77), want, 1e-30, 8*u32)

	a, b := randF32(rng, 12, 1), randF32(rng, 4, 1)
	pa := upF32(t, d, a)
	launch(t, d, device.KAddBiasRows, device.D1(1), device.D1(32), 0, pa, upF32(t, d, b), int32(3), int32(4))
	launch(t, d, device.KAddInplace, device.D1(1), device.D1(32), 0, pa, upF32(t, d, b[:1]), int32(1))
	want = make([]float64, 12)
	for i := range want {
		want[i] = float64(a[i] + b[i%4])
		if i == 0 {
			want[i] = float64(a[0] + b[0] + b[0])
		}
	}
	checkClose(t, "bias+add", downF32(t, d, pa, 12), want, 0, 0)

	// embedding gather from a bf16 table
	V, C := 6, 5
	tab := randF32(rng, V*C, 1)
	tb := make([]byte, 2*len(tab))
	for i, v := range tab {
		binary.LittleEndian.PutUint16(tb[2*i:], bf16RNE(v))
	}
	ids := []int32{3, 0, 5, 3}
	pe := allocT(t, d, 4*len(ids)*C)
	launch(t, d, device.KEmbedGather, device.D1(1), device.D1(64), 0, pe, upBytes(t, d, tb), int32(device.BF16), upI32(t, d, ids), int32(len(ids)), int32(C), int32(V))
	want = nil
	for _, id := range ids {
		want = append(want, roundTo(tab[int(id)*C:int(id+1)*C], device.BF16)...)
	}
	checkClose(t, "embed_gather", downF32(t, d, pe, len(ids)*C), want, 0, 0)
}

// attention64 is the float64 definition: softmax over keys j <= i, and
// j > i-W when W > 0 (sliding window).
func attention64(q, k, v []float64, T, H, KVH, D, W int, scale float64) []float64 {
	out := make([]float64, T*H*D)
	for h := 0; h < H; h++ {
		kh := h / (H / KVH)
		for i := 0; i < T; i++ {
			s := make([]float64, i+1)
			mx := math.Inf(-1)
			for j := 0; j <= i; j++ {
				for dd := 0; dd < D; dd++ {
					s[j] += q[(i*H+h)*D+dd] * k[(j*KVH+kh)*D+dd]
				}
				s[j] *= scale
				mx = math.Max(mx, s[j])
			}
			sum := 0.0
			for j := range s {
				if W > 0 && j <= i-W {
					s[j] = 0
					continue
				}
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j := range s {
				for dd := 0; dd < D; dd++ {
					out[(i*H+h)*D+dd] += s[j] / sum * v[(j*KVH+kh)*D+dd]
				}
			}
		}
	}
	return out
}

func TestAttention(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ T, H, KVH, D, W int }{{1, 1, 1, 4, 0}, {70, 4, 2, 20, 0}, {33, 2, 2, 64, 0}, {130, 3, 1, 8, 0}, {40, 2, 1, 160, 0}, {64, 1, 1, 12, 0}, {65, 2, 1, device.AttnMaxHead, 0},
		{70, 4, 2, 20, 1}, {130, 3, 1, 8, 37}, {130, 2, 2, 16, 64}, {40, 2, 1, 160, 7}} {
		for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
			q, k, v := randF32(rng, sh.T*sh.H*sh.D, 1), randF32(rng, sh.T*sh.KVH*sh.D, 1), randF32(rng, sh.T*sh.KVH*sh.D, 1)
			po := allocT(t, d, 4*len(q))
			scale := float32(1 / math.Sqrt(float64(sh.D)))
			grid := device.Dim3{X: (sh.T + device.AttnBlockQ - 1) / device.AttnBlockQ, Y: sh.H, Z: 1}
			launch(t, d, device.KAttention, grid, device.D1(device.AttnBlockQ), 2*device.AttnTileK(sh.D)*sh.D*4, po,
				upF32(t, d, q), upF32(t, d, k), upF32(t, d, v), int32(sh.T), int32(sh.H), int32(sh.KVH), int32(sh.D), scale, int32(dt), int32(sh.W))
			want := attention64(roundTo(q, dt), roundTo(k, dt), roundTo(v, dt), sh.T, sh.H, sh.KVH, sh.D, sh.W, float64(scale))
			// budget: scores (D products), exp/rescaling (a few u per key), T-term sums
			checkClose(t, "attention "+dt.String(), downF32(t, d, po, len(q)), want, float64(sh.T+sh.D+16)*u32, float64(sh.T+sh.D+16)*u32)
		}
	}
}

func TestLogitsStats(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(9, 10))
	rows, V, K := 4, 1000, 3
	x := randF32(rng, rows*V, 3)
	// ties for top-k: row 1 has its maximum twice (ids 10 and 700)
	x[1*V+700], x[1*V+10] = 20, 20
	targets := []int32{5, 700, -1, 999}
	base := make([]float32, rows*V)
	codes := make([]byte, 2*rows*V)
	aux := make([]float32, 2*rows)
	for r := 0; r < rows; r++ {
		lb := logSoftmax64(randF32(rng, V, 2))
		lb[7] = -30 // below llama.cpp's floor of -16 in the u16 records
		hi := math.Inf(-1)
		for _, v := range lb {
			hi = math.Max(hi, v)
		}
		lo := hi - 16
		sc := float32(hi-lo) / 65535
		aux[2*r], aux[2*r+1] = sc, float32(lo)
		for c, v := range lb {
			base[r*V+c] = float32(v)
			code := uint16(0)
			if v > lo {
				code = uint16(math.Round((v - lo) / float64(sc)))
			}
			binary.LittleEndian.PutUint16(codes[2*(r*V+c):], code)
		}
	}
	base[2*V+3] = float32(math.Inf(-1))
	px, pt := upF32(t, d, x), upI32(t, d, targets)
	for _, kind := range []int32{device.BaseNone, device.BaseF32, device.BaseU16} {
		pn, pk, ptop := allocT(t, d, 4*rows), allocT(t, d, 4*rows), allocT(t, d, 4*rows*K)
		var pb, pa device.Ptr
		switch kind {
		case device.BaseF32:
			pb = upF32(t, d, base)
		case device.BaseU16:
			pb, pa = upBytes(t, d, codes), upF32(t, d, aux)
		}
		launch(t, d, device.KLogitsStats, device.D1(rows), device.D1(256), 0, px, int32(rows), int32(V), pt, pn, pb, kind, pa, pk, int32(K), ptop)
		nll := downF32(t, d, pn, rows)
		for r := 0; r < rows; r++ {
			lq := logSoftmax64(x[r*V : (r+1)*V])
			if targets[r] < 0 {
				if !math.IsNaN(float64(nll[r])) {
					t.Errorf("row %d without target: nll %v, want NaN", r, nll[r])
				}
			} else {
				checkClose(t, "nll", nll[r:r+1], []float64{-lq[targets[r]]}, 64*u32*8, 64*u32)
			}
			if kind != device.BaseNone {
				kl := 0.0
				for c := 0; c < V; c++ {
					var b float64
					if kind == device.BaseF32 {
						b = float64(base[r*V+c])
					} else {
						code := binary.LittleEndian.Uint16(codes[2*(r*V+c):])
						b = float64(aux[2*r]*float32(code) + aux[2*r+1])
						if b <= -16 {
							continue
						}
						b = math.Min(b, 0)
					}
					if math.IsInf(b, -1) {
						continue
					}
					kl += math.Exp(b) * (b - lq[c])
				}
				// budget: V terms of size ~|b - lq| ≤ 40 weighted by p; plus lse error
				checkClose(t, "kl", downF32(t, d, pk, rows)[r:r+1], []float64{kl}, 1e-5, 1e-5)
			}
			top := downI32(t, d, ptop, rows*K)[r*K : (r+1)*K]
			want := topK64(x[r*V:(r+1)*V], K)
			for j := range want {
				if top[j] != want[j] {
					t.Errorf("row %d top-%d = %v, want %v", r, K, top, want)
					break
				}
			}
		}
	}
}

func logSoftmax64(x []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

func topK64(x []float32, k int) []int32 {
	var out []int32
	used := map[int]bool{}
	for len(out) < k {
		best := -1
		for i, v := range x {
			if !used[i] && (best < 0 || v > x[best]) {
				best = i
			}
		}
		used[best] = true
		out = append(out, int32(best))
	}
	return out
}

// TestLogitsStatsSmallVocab: vocabularies smaller than a warp and than the
// block (most threads own no column), top-k over the whole vocabulary.
func TestLogitsStatsSmallVocab(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, V := range []int{1, 7, 33} {
		rows := 3
		x := randF32(rng, rows*V, 2)
		targets := make([]int32, rows)
		for r := range targets {
			targets[r] = int32((r * 5) % V)
		}
		pn, ptop := allocT(t, d, 4*rows), allocT(t, d, 4*rows*V)
		launch(t, d, device.KLogitsStats, device.D1(rows), device.D1(256), 0, upF32(t, d, x), int32(rows), int32(V), upI32(t, d, targets),
			pn, device.Ptr(0), int32(device.BaseNone), device.Ptr(0), allocT(t, d, 4*rows), int32(V), ptop)
		nll, top := downF32(t, d, pn, rows), downI32(t, d, ptop, rows*V)
		for r := 0; r < rows; r++ {
			lq := logSoftmax64(x[r*V : (r+1)*V])
			checkClose(t, fmt.Sprintf("V=%d nll", V), nll[r:r+1], []float64{-lq[targets[r]]}, 64*u32*8, 64*u32)
			want := topK64(x[r*V:(r+1)*V], V)
			for j := range want {
				if top[r*V+j] != want[j] {
					t.Errorf("V=%d row %d: top = %v, want %v", V, r, top[r*V:(r+1)*V], want)
					break
				}
			}
		}
	}
}

// TestAttentionSharedMemoryOverrun: a launch that gives the attention
// kernel less dynamic shared memory than its key/value tiles need (host
// and kernel disagreeing on the tile size) is an error in the emulator;
// on a GPU it would read and write past the allocation silently.
func TestAttentionSharedMemoryOverrun(t *testing.T) {
	d := newTestDevice(t)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, D := range []int{64, 160} {
		T, H := 8, 1
		q, kv := upF32(t, d, randF32(rng, T*H*D, 1)), upF32(t, d, randF32(rng, T*H*D, 1))
		po := allocT(t, d, 4*T*H*D)
		need := 2 * device.AttnTileK(D) * D * 4
		for _, shared := range []int{need, need - 4} {
			err := d.Launch(device.KAttention, device.Dim3{X: 1, Y: H, Z: 1}, device.D1(device.AttnBlockQ), shared, po, q, kv, kv,
				int32(T), int32(H), int32(H), int32(D), float32(0.125), int32(device.F32), int32(0))
			if shared == need && err != nil {
				t.Errorf("D=%d: %d bytes of shared memory: %v", D, shared, err)
			}
			if shared < need && (err == nil || !strings.Contains(err.Error(), "dynamic shared memory")) {
				t.Errorf("D=%d: %d bytes (< %d): err = %v, want an overrun error", D, shared, need, err)
			}
		}
	}
}
