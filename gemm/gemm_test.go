package gemm

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fmaChain is the specification of every product: one FMA chain per
// element in ascending k, from +0.
func fmaChain(m, n, k int, a []float64, lda int, b []float64, ldb int, transB bool, c []float64, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var acc float64
			for p := 0; p < k; p++ {
				var bv float64
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				acc = math.FMA(a[i*lda+p], bv, acc)
			}
			c[i*ldc+j] = acc
		}
	}
}

func randSlice(r *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4))
	}
	return s
}

type shape struct{ m, n, k int }

var shapes = []shape{
	{1, 1, 1}, {1, 1, 7}, {5, 7, 3}, {6, 8, 1}, {6, 8, 256}, {7, 9, 257},
	{13, 17, 255}, {1, 130, 33}, {130, 1, 33}, {64, 64, 64}, {64, 200, 64},
	{64, 64, 513}, {97, 129, 300}, {130, 300, 600}, {512, 192, 576},
	{37, 1000, 70}, {200, 40, 1100}, {31, 20, 1537}, {50, 33, 2304},
}

// kernelGoWide names a test-only engine: the pure-Go kernel with the wide
// (widePanels tiles per call) path that the AVX-512 kernel takes, so the
// engine's wide-tile dispatch is tested on every CPU.
const kernelGoWide = "go-wide"

func kernelNames(t *testing.T) []string {
	if u := Unverified(); len(u) > 0 {
		t.Fatalf("kernels %v are supported by this CPU but failed their start-up bit-for-bit check", u)
	}
	ks := Kernels()
	if len(ks) == 1 {
		t.Logf("only the Go kernel runs on this CPU")
	}
	if !hasAVX512() {
		t.Logf("no AVX-512 on this CPU: the avx512 kernel is not tested here")
	}
	return append(ks, kernelGoWide)
}

// testEngine is NewKernel, plus kernelGoWide.
func testEngine(t *testing.T, threads int, name string) *Engine {
	t.Helper()
	if name == kernelGoWide {
		e, err := NewKernel(threads, KernelGo)
		if err != nil {
			t.Fatal(err)
		}
		e.name, e.wide = kernelGoWide, kernGoWide
		return e
	}
	e, err := NewKernel(threads, name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestMulMatchesFMAChainBitForBit: every kernel at 1, 2 and 7 goroutines
// gives exactly the bits of the FMA-chain specification, for NT and NN, on
// edge and odd shapes, with padded strides.
func TestMulMatchesFMAChainBitForBit(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range shapes {
		for _, transB := range []bool{true, false} {
			lda, ldc := s.k+3, s.n+5
			ldb := s.k + 1
			brows := s.n
			if !transB {
				ldb, brows = s.n+2, s.k
			}
			a := randSlice(r, s.m*lda)
			b := randSlice(r, brows*ldb)
			want := make([]float64, s.m*ldc)
			fmaChain(s.m, s.n, s.k, a, lda, b, ldb, transB, want, ldc)
			for _, kn := range kernelNames(t) {
				for _, th := range []int{1, 2, 7} {
					e := testEngine(t, th, kn)
					got := make([]float64, s.m*ldc)
					for i := range got {
						got[i] = 12345 // C is overwritten, padding left alone
					}
					if transB {
						e.MulNT(s.m, s.n, s.k, a, lda, b, ldb, got, ldc)
					} else {
						e.MulNN(s.m, s.n, s.k, a, lda, b, ldb, got, ldc)
					}
					for i := 0; i < s.m; i++ {
						for j := 0; j < ldc; j++ {
							g, w := got[i*ldc+j], want[i*ldc+j]
							if j >= s.n {
								w = 12345
							}
							if math.Float64bits(g) != math.Float64bits(w) {
								t.Fatalf("%v transB=%v kernel %s threads %d: c[%d][%d] = %v (%#x), want %v (%#x)",
									s, transB, kn, th, i, j, g, math.Float64bits(g), w, math.Float64bits(w))
							}
						}
					}
				}
			}
		}
	}
}

// TestMulNTRows: B decoded by rows gives MulNT's bits for every shape,
// kernel and thread count; every row is decoded exactly once, in blocks
// of at most 128 rows; the first decode error is returned.
func TestMulNTRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range shapes {
		lda, ldc := s.k+3, s.n+5
		a := randSlice(r, s.m*lda)
		b := randSlice(r, s.n*s.k)
		want := make([]float64, s.m*ldc)
		fmaChain(s.m, s.n, s.k, a, lda, b, s.k, true, want, ldc)
		for _, kn := range kernelNames(t) {
			for _, th := range []int{1, 2, 7, 64} {
				e := testEngine(t, th, kn)
				seen := make([]atomic.Int32, s.n)
				rows := func(r0, r1 int, dst []float64) error {
					if r1-r0 > ncBlock || len(dst) != (r1-r0)*s.k {
						return fmt.Errorf("rows [%d, %d) into %d", r0, r1, len(dst))
					}
					for j := r0; j < r1; j++ {
						seen[j].Add(1)
					}
					copy(dst, b[r0*s.k:r1*s.k])
					return nil
				}
				got := make([]float64, s.m*ldc)
				for i := range got {
					got[i] = 12345
				}
				if err := e.MulNTRows(s.m, s.n, s.k, a, lda, rows, got, ldc); err != nil {
					t.Fatalf("%v %s threads %d: %v", s, kn, th, err)
				}
				for j := range seen {
					if n := seen[j].Load(); n != 1 && s.k > 0 {
						t.Fatalf("%v %s threads %d: row %d decoded %d times", s, kn, th, j, n)
					}
				}
				for i := 0; i < s.m; i++ {
					for j := 0; j < ldc; j++ {
						g, w := got[i*ldc+j], want[i*ldc+j]
						if j >= s.n {
							w = 12345
						}
						if math.Float64bits(g) != math.Float64bits(w) {
							t.Fatalf("%v %s threads %d: c[%d][%d] = %v, want %v", s, kn, th, i, j, g, w)
						}
					}
				}
			}
		}
	}
	boom := errors.New("boom")
	err := New(2).MulNTRows(64, 300, 64, make([]float64, 64*64), 64, func(r0, r1 int, dst []float64) error {
		if r0 <= 200 && 200 < r1 {
			return boom
		}
		return nil
	}, make([]float64, 64*300), 300)
	if !errors.Is(err, boom) {
		t.Fatalf("decode error: got %v", err)
	}
}

// TestEngineReuse: an Engine reused across calls of different shapes (its
// buffers grown and shrunk) still gives the specification's bits.
func TestEngineReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, kn := range kernelNames(t) {
		e := testEngine(t, 2, kn)
		w := e.Worker()
		for it, s := range []shape{{300, 300, 700}, {5, 3, 2}, {100, 257, 9}, {300, 300, 700}} {
			a, b := randSlice(r, s.m*s.k), randSlice(r, s.n*s.k)
			want := make([]float64, s.m*s.n)
			fmaChain(s.m, s.n, s.k, a, s.k, b, s.k, true, want, s.n)
			for _, eng := range []*Engine{e, w} {
				got := make([]float64, s.m*s.n)
				eng.MulNT(s.m, s.n, s.k, a, s.k, b, s.k, got, s.n)
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("%s call %d %v: element %d = %v, want %v", kn, it, s, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestMulAccuracy: against the exact product (math/big, 300 bits), every
// element is within the standard bound k·u·Σ|a||b| (u = 2⁻⁵³); in practice
// far inside it.
func TestMulAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 9, 11, 700
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c := make([]float64, m*n)
	New(2).MulNT(m, n, k, a, k, b, k, c, n)
	worst := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			exact := new(big.Float).SetPrec(300)
			abs := 0.0
			for p := 0; p < k; p++ {
				x := new(big.Float).SetPrec(300).SetFloat64(a[i*k+p])
				x.Mul(x, new(big.Float).SetPrec(300).SetFloat64(b[j*k+p]))
				exact.Add(exact, x)
				abs += math.Abs(a[i*k+p] * b[j*k+p])
			}
			ex, _ := exact.Float64()
			err := math.Abs(c[i*n+j] - ex)
			bound := float64(k) * 0x1p-53 * abs
			if err > bound {
				t.Fatalf("c[%d][%d] = %v, exact %v: error %g > bound %g", i, j, c[i*n+j], ex, err, bound)
			}
			worst = max(worst, err/abs)
		}
	}
	t.Logf("worst relative error (to Σ|a||b|): %.3g (bound %.3g)", worst, float64(k)*0x1p-53)
}

func TestNoAsmEnv(t *testing.T) {
	t.Setenv("QPPL_NOASM", "1")
	if k := New(1).Kernel(); k != KernelGo {
		t.Fatalf("QPPL_NOASM=1: kernel %q, want %q", k, KernelGo)
	}
	t.Setenv("QPPL_NOASM", "")
	if k, ks := New(1).Kernel(), Kernels(); k != ks[len(ks)-1] {
		t.Fatalf("default kernel %q, want the last of %v", k, ks)
	}
	if _, err := NewKernel(1, "nosuch"); err == nil {
		t.Fatal("unknown kernel accepted")
	}
}

// TestKernelEnv: QPPL_GEMM_KERNEL picks any kernel of Kernels() (e.g.
// avx2 on an AVX-512 machine), QPPL_NOASM=1 still wins, and an unknown or
// unavailable name is an error naming the kernels that run here.
func TestKernelEnv(t *testing.T) {
	t.Setenv(NoAsmEnv, "")
	for _, kn := range Kernels() {
		t.Setenv(KernelEnv, kn)
		e, err := NewKernel(1, KernelAuto)
		if err != nil || e.Kernel() != kn {
			t.Fatalf("%s=%s: kernel %v, %v", KernelEnv, kn, e, err)
		}
		if (e.wide != nil) != (kn == KernelAVX512) {
			t.Fatalf("%s: wide kernel %v", kn, e.wide != nil)
		}
	}
	t.Setenv(KernelEnv, "avx2")
	t.Setenv(NoAsmEnv, "1")
	if k := New(1).Kernel(); k != KernelGo {
		t.Fatalf("QPPL_NOASM=1 with %s=avx2: kernel %q", KernelEnv, k)
	}
	t.Setenv(NoAsmEnv, "")
	t.Setenv(KernelEnv, "nosuch")
	if _, err := NewKernel(1, KernelAuto); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("%s=nosuch: err %v", KernelEnv, err)
	}
}

// TestAVX512Offered: on a CPU with AVX-512F the avx512 kernel is offered
// (it passed its bit-for-bit self-check) and is the default; the
// self-check itself accepts the Go specification and rejects a kernel
// that rounds the product and the sum separately.
func TestAVX512Offered(t *testing.T) {
	if !wideAgrees(kernGoWide) {
		t.Fatal("self-check rejects the Go specification")
	}
	unfused := func(k int, a []float64, astride int, b, c []float64, ldc int, load bool) {
		for tt := 0; tt < widePanels; tt++ {
			for i := 0; i < mr; i++ {
				for j := 0; j < nr; j++ {
					acc := 0.0
					if load {
						acc = c[(tt*mr+i)*ldc+j]
					}
					for p := 0; p < k; p++ {
						acc += float64(a[tt*astride+p*mr+i] * b[p*nr+j])
					}
					c[(tt*mr+i)*ldc+j] = acc
				}
			}
		}
	}
	if wideAgrees(unfused) {
		t.Fatal("self-check accepts an unfused kernel")
	}
	ks := Kernels()
	if !hasAVX512() {
		if slices.Contains(ks, KernelAVX512) {
			t.Fatalf("avx512 offered without AVX-512F: %v", ks)
		}
		t.Skip("no AVX-512F on this CPU")
	}
	if !slices.Contains(ks, KernelAVX512) || slices.Contains(Unverified(), KernelAVX512) {
		t.Fatalf("CPU has AVX-512F but the avx512 kernel failed its self-check: offered %v, unverified %v", ks, Unverified())
	}
	t.Setenv(NoAsmEnv, "")
	t.Setenv(KernelEnv, "")
	if k := New(1).Kernel(); k != KernelAVX512 {
		t.Fatalf("default kernel %q on an AVX-512 CPU", k)
	}
}

func TestBadOperandsPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(e *Engine)
	}{
		{"short A", func(e *Engine) { e.MulNT(2, 2, 2, make([]float64, 3), 2, make([]float64, 4), 2, make([]float64, 4), 2) }},
		{"short C", func(e *Engine) { e.MulNN(2, 2, 2, make([]float64, 4), 2, make([]float64, 4), 2, make([]float64, 3), 2) }},
		{"stride < cols", func(e *Engine) { e.MulNT(2, 2, 2, make([]float64, 4), 1, make([]float64, 4), 2, make([]float64, 4), 2) }},
		{"negative", func(e *Engine) { e.MulNT(-1, 2, 2, nil, 2, nil, 2, nil, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f(New(1))
		})
	}
}

func TestZeroDepthClearsC(t *testing.T) {
	c := []float64{1, 2, 3, 4}
	New(1).MulNT(2, 2, 0, nil, 0, nil, 0, c, 2)
	for i, v := range c {
		if v != 0 {
			t.Fatalf("c[%d] = %v after a k=0 product", i, v)
		}
	}
}

func BenchmarkMulNT(b *testing.B) {
	for _, s := range []shape{{512, 1536, 576}, {512, 576, 1536}, {64, 49152, 576}} {
		for _, kn := range Kernels() {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", s.m, s.n, s.k, kn), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				a, bb := randSlice(r, s.m*s.k), randSlice(r, s.n*s.k)
				c := make([]float64, s.m*s.n)
				e, _ := NewKernel(0, kn)
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					e.MulNT(s.m, s.n, s.k, a, s.k, bb, s.k, c, s.n)
				}
				flop := 2 * float64(s.m*s.n*s.k) * float64(b.N)
				b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// On a shared machine, FLOP per CPU-second is the steadier figure.
				b.ReportMetric(flop/(cpuSeconds()-cpu0)/1e9, "GFLOP/cpu_s")
			})
		}
	}
}

// BenchmarkKernels times every kernel on the same products, interleaved
// (rounds of one product per kernel, single-threaded), and reports each
// kernel's GFLOP/s per CPU-second and its speed relative to the first
// assembly kernel. Interleaving makes the ratios meaningful on a shared
// machine, where absolute figures are not.
func BenchmarkKernels(b *testing.B) {
	for _, s := range []shape{{240, 512, 512}, {512, 1536, 576}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			a, bb := randSlice(r, s.m*s.k), randSlice(r, s.n*s.k)
			c := make([]float64, s.m*s.n)
			ks := Kernels()
			cpu := make([]float64, len(ks))
			for i := 0; i < b.N; i++ {
				for round := 0; round < 3; round++ {
					for j, kn := range ks {
						e, _ := NewKernel(1, kn)
						c0 := cpuSeconds()
						e.MulNT(s.m, s.n, s.k, a, s.k, bb, s.k, c, s.n)
						cpu[j] += cpuSeconds() - c0
					}
				}
			}
			flop := 2 * float64(s.m*s.n*s.k) * float64(3*b.N)
			for j, kn := range ks {
				b.ReportMetric(flop/cpu[j]/1e9, "GFLOP/cpu_s_"+kn)
				if len(ks) > 1 {
					b.ReportMetric(cpu[1]/cpu[j], "x_"+kn+"_vs_"+ks[1])
				}
			}
		})
	}
}

// cpuSeconds returns the process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func TestMachinePeak(t *testing.T) {
	p := MachinePeak()
	t.Logf("%+v: %.1f GFLOP/s", p, p.GFLOPs())
	if p.Cores < 1 || p.FlopsPerCycle < 4 || p.GHz < 0 || p.GHz > 10 {
		t.Fatalf("implausible peak %+v", p)
	}
}
