package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
)

// roundDT rounds x to dtype dt exactly as the kernels' round_dt (through
// the emulator's conversions, checked bit for bit in package emu).
func roundDT(x float32, dt device.DType) float64 {
	switch dt {
	case device.BF16:
		b := math.Float32bits(x)
		b += 0x7fff + (b>>16)&1
		return float64(math.Float32frombits(b &^ 0xffff))
	case device.F16:
		return float64(f16(x))
	}
	return float64(x)
}

// f16 rounds to the nearest fp16 value (ties to even) for |x| in the
// normal and subnormal fp16 range used here.
func f16(x float32) float32 {
	a := math.Abs(float64(x))
	if a == 0 {
		return x
	}
	e := math.Floor(math.Log2(a))
	if e < -14 {
		e = -14
	}
	step := math.Ldexp(1, int(e)-10)
	q := math.RoundToEven(a/step) * step
	return float32(math.Copysign(q, float64(x)))
}

// attentionF64 is causal GQA attention in float64 of inputs rounded to dt:
// out[i][h] = Σ_{j<=i} softmax_j(q_i·k_j·scale) v_j (reference.attention),
// with sinks[h] (when not nil) as one more logit of each head's softmax
// that weights no value (gpt-oss).
func attentionF64(q, k, v []float32, T, H, KVH, D, W int, dt device.DType, sinks []float32) []float64 {
	scale := float64(float32(1 / math.Sqrt(float64(D))))
	out := make([]float64, T*H*D)
	G := H / KVH
	for h := 0; h < H; h++ {
		kv := h / G
		for i := 0; i < T; i++ {
			s := make([]float64, i+1)
			mx := math.Inf(-1)
			for j := 0; j <= i; j++ {
				var dot float64
				for d := 0; d < D; d++ {
					dot += roundDT(q[(i*H+h)*D+d], dt) * roundDT(k[(j*KVH+kv)*D+d], dt)
				}
				s[j] = dot * scale
				mx = math.Max(mx, s[j])
			}
			var l float64
			if sinks != nil {
				sk := float64(sinks[h])
				mx = math.Max(mx, sk)
				l = math.Exp(sk - mx)
			}
			for j := range s {
				if W > 0 && j <= i-W { // outside the sliding window
					s[j] = 0
					continue
				}
				s[j] = math.Exp(s[j] - mx)
				l += s[j]
			}
			for d := 0; d < D; d++ {
				var acc float64
				for j := 0; j <= i; j++ {
					acc += s[j] * roundDT(v[(j*KVH+kv)*D+d], dt)
				}
				out[(i*H+h)*D+d] = acc / l
			}
		}
	}
	return out
}

func f32le(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// TestTensorCoreAttention runs the GEMM + softmax attention (attend) on the
// emulator against float64 attention of the same rounded inputs, on
// awkward shapes (GQA, head_dim 20 and 80, T across chunk boundaries),
// in every dtype, with the whole window in one chunk and split into
// chunks of query rows and of heads; and against the CUDA-core `attention`
// kernel (the path of a device without batched GEMMs).
func TestTensorCoreAttention(t *testing.T) {
	devs := emuDevices(t, 1, 1<<30)
	d := devs[0]
	shapes := []struct {
		T, H, KVH, D, W int
		sinks           bool // gpt-oss's attention sinks
	}{{1, 1, 1, 8, 0, false}, {70, 4, 2, 20, 0, false}, {130, 2, 1, 80, 0, false}, {33, 6, 3, 16, 0, false},
		{70, 4, 2, 20, 16, false}, {130, 2, 1, 80, 1, false}, {33, 6, 3, 16, 40, false},
		{70, 4, 2, 20, 16, true}, {33, 6, 3, 16, 0, true}, {1, 1, 1, 8, 0, true}}
	const u = 1.0 / (1 << 24)
	for _, sh := range shapes {
		rng := rand.New(rand.NewSource(int64(sh.T*1000 + sh.D)))
		gen := func(n int, amp float64) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32((rng.Float64()*2 - 1) * amp)
			}
			return x
		}
		q, k, v := gen(sh.T*sh.H*sh.D, 3), gen(sh.T*sh.KVH*sh.D, 3), gen(sh.T*sh.KVH*sh.D, 1)
		var sinks []float32
		if sh.sinks {
			sinks = gen(sh.H, 4)
		}
		for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
			want := attentionF64(q, k, v, sh.T, sh.H, sh.KVH, sh.D, sh.W, dt, sinks)
			for _, capBytes := range []int64{0, 3000, 40000} {
				name := fmt.Sprintf("T%d H%d KVH%d D%d W%d sinks %v %v cap %d", sh.T, sh.H, sh.KVH, sh.D, sh.W, sh.sinks, dt, capBytes)
				b := &Backend{spec: &arch.Spec{Heads: sh.H, KVHeads: sh.KVH, HeadDim: sh.D}, gemmDT: dt, attnCap: capBytes}
				ds := &devState{d: d}
				var ptrs []device.Ptr
				alloc := func(p *device.Ptr, data []byte, n int64) {
					var err error
					if *p, err = d.Alloc(max(n, 1)); err != nil {
						t.Fatal(err)
					}
					ptrs = append(ptrs, *p)
					if data != nil {
						if err := d.CopyIn(*p, data); err != nil {
							t.Fatal(err)
						}
					}
				}
				alloc(&ds.q, f32le(q), int64(4*len(q)))
				alloc(&ds.k, f32le(k), int64(4*len(k)))
				alloc(&ds.v, f32le(v), int64(4*len(v)))
				alloc(&ds.att, nil, int64(4*len(q)))
				var sinkPtr device.Ptr
				if sinks != nil {
					alloc(&sinkPtr, f32le(sinks), int64(4*len(sinks)))
				}
				ao, as, aw := attnBuffers(sh.T, sh.H, sh.D, dt, b.scoreCap())
				alloc(&ds.qa, nil, ao)
				alloc(&ds.ka, nil, ao)
				alloc(&ds.va, nil, ao)
				alloc(&ds.scores, nil, as)
				alloc(&ds.weights, nil, aw)
				if err := b.attend(ds, sh.T, sh.W, sinkPtr); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				raw := make([]byte, 4*len(q))
				if err := d.CopyOut(raw, ds.att); err != nil {
					t.Fatal(err)
				}
				// budget: D products and T weights accumulated in fp32, the
				// softmax's exp/sum, and the weights' split into dt parts
				tol := float64(sh.T+sh.D+16) * u
				worst := 0.0
				for i, w := range want {
					g := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
					e := math.Abs(g-w) / (tol * (1 + math.Abs(w)))
					if !(e <= 1) {
						t.Fatalf("%s: element %d = %v, want %v (%.3g × tolerance)", name, i, g, w, e)
					}
					worst = math.Max(worst, e)
				}
				if capBytes == 0 && sinks != nil {
					// the CUDA-core kernel has no sinks: refused, not ignored
					old := &Backend{spec: b.spec, gemmDT: dt}
					if err := old.attend(&devState{d: noBatched{d}, q: ds.q, k: ds.k, v: ds.v, att: ds.att}, sh.T, sh.W, sinkPtr); err == nil {
						t.Fatalf("%s: sinks on a device without batched GEMMs accepted", name)
					}
				} else if capBytes == 0 {
					t.Logf("%s: worst error %.2f of the tolerance", name, worst)
					// the CUDA-core `attention` kernel on the same inputs agrees
					// with the GEMM path within both paths' tolerances
					old := &Backend{spec: b.spec, gemmDT: dt}
					oldDev := &devState{d: noBatched{d}, q: ds.q, k: ds.k, v: ds.v}
					alloc(&oldDev.att, nil, int64(4*len(q)))
					if err := old.attend(oldDev, sh.T, sh.W, 0); err != nil {
						t.Fatalf("%s: attention kernel: %v", name, err)
					}
					rawOld := make([]byte, len(raw))
					if err := d.CopyOut(rawOld, oldDev.att); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						g := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
						o := float64(math.Float32frombits(binary.LittleEndian.Uint32(rawOld[4*i:])))
						if e := math.Abs(g - o); !(e <= 2*tol*(1+math.Abs(want[i]))) {
							t.Fatalf("%s: element %d: GEMM path %v, attention kernel %v", name, i, g, o)
						}
					}
				}
				for _, p := range ptrs {
					d.Free(p)
				}
			}
		}
	}
}

// noBatched hides a device's batched GEMMs, so attend runs the
// `attention` kernel.
type noBatched struct{ device.Device }

// TestAttnGeometry: chunks cover the window and respect the budget.
func TestAttnGeometry(t *testing.T) {
	for _, c := range []struct {
		T, H  int
		dt    device.DType
		cap   int64
		R, hb int
	}{
		{2048, 32, device.BF16, attnScoreCap, 2048, 12}, // 40 MiB per head: 12 heads per chunk
		{2048, 32, device.F32, attnScoreCap, 2048, 16},
		{131072, 64, device.BF16, attnScoreCap, 409, 1},
		{70, 4, device.F32, 3000, 5, 1},
		{1, 1, device.BF16, 0, 1, 0},
	} {
		R, hb := attnGeometry(c.T, c.H, c.dt, c.cap)
		if c.cap == 0 {
			continue
		}
		if R != c.R || hb != c.hb {
			t.Errorf("attnGeometry(%d, %d, %v, %d) = %d rows × %d heads, want %d × %d", c.T, c.H, c.dt, c.cap, R, hb, c.R, c.hb)
		}
	}
}
