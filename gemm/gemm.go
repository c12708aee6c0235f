package gemm

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// Micro-tile and cache blocking. Results do not depend on any of these
// (see the package documentation); they only set the speed.
const (
	mr = 6 // rows of A per micro-kernel
	nr = 8 // columns of B per micro-kernel
	// kcMax is the largest depth of a packed block; a product's depth is
	// cut into equal blocks of at most kcMax (576 → one block of 576,
	// 1536 → three of 512), never a short last block: each block costs a
	// load and store of the C tile, and a short one costs as much as a
	// long one. (On Zen 4, 576 deep ran 8–10 % faster in one block than in
	// 256+256+64.)
	kcMax   = 768
	mcBlock = 96  // rows of A per L2 block (96×kc×8 ≤ 576 KiB)
	ncBlock = 128 // columns of B per packed block (128×kc×8 ≤ 768 KiB, L2)
	// serialWork is the product size (m·n·k) below which a call runs on
	// the calling goroutine.
	serialWork = 1 << 17
)

// kernel computes one mr×nr tile: acc = load ? C : 0, then for p in
// [0, k) in order, acc[i][j] = fma(a[p·mr+i], b[p·nr+j], acc[i][j]), then C
// = acc. a holds k·mr values, b k·nr values, c the tile at row stride ldc.
type kernel func(k int, a, b, c []float64, ldc int, load bool)

// Kernel names accepted by NewKernel.
const (
	KernelAuto   = ""       // the fastest kernel the CPU supports (see New)
	KernelGo     = "go"     // pure Go with math.FMA
	KernelAVX2   = "avx2"   // amd64 AVX2+FMA assembly, 6×8 tiles
	KernelAVX512 = "avx512" // amd64 AVX-512F assembly, 24×8 tiles (AVX2 at the edges)
	KernelNEON   = "neon"   // arm64 NEON (FMLA) assembly
)

// Environment variables read by New and NewKernel(…, KernelAuto).
const (
	// NoAsmEnv=1 forces the pure-Go kernel.
	NoAsmEnv = "QPPL_NOASM"
	// KernelEnv names the kernel to use instead of the fastest (e.g.
	// avx2 on an AVX-512 machine); it must be one of Kernels().
	KernelEnv = "QPPL_GEMM_KERNEL"
)

// Kernels lists the kernels that run on this CPU, fallback first: every
// assembly kernel its features support that passed its start-up bit-for-bit
// check.
func Kernels() []string {
	ks := []string{KernelGo}
	for _, k := range verifiedKernels() {
		ks = append(ks, k.name)
	}
	return ks
}

// Unverified lists the assembly kernels this CPU's features support but
// that failed their start-up bit-for-bit check against the Go kernel, so
// are not offered (tests fail when it is not empty: a kernel must not
// silently drop out).
func Unverified() []string {
	var ks []string
	for _, k := range asmKernels() {
		if !k.verified {
			ks = append(ks, k.name)
		}
	}
	return ks
}

func verifiedKernels() []asmKernel {
	var ks []asmKernel
	for _, k := range asmKernels() {
		if k.verified {
			ks = append(ks, k)
		}
	}
	return ks
}

// Engine runs products on up to Threads goroutines, reusing its packing
// buffers across calls. It is not safe for concurrent use.
type Engine struct {
	name    string
	kern    kernel
	wide    wideKernel // nil, or widePanels tiles per call (full tiles only)
	threads int
	ap      []float64   // packed A, shared by the goroutines of a call
	bp      [][]float64 // per goroutine: one packed kc×nc block of B
	bd      [][]float64 // per goroutine (MulNTRows): the decoded rows of one column block
}

// New returns an Engine with the fastest kernel this CPU supports: the Go
// fallback when the environment sets QPPL_NOASM=1, the kernel named by
// QPPL_GEMM_KERNEL when set (New panics if that kernel does not run here;
// NewKernel returns the error). threads <= 0 means runtime.GOMAXPROCS(0).
func New(threads int) *Engine {
	e, err := NewKernel(threads, KernelAuto)
	if err != nil {
		panic(err)
	}
	return e
}

// NewKernel is New with an explicit kernel name (see Kernels).
func NewKernel(threads int, name string) (*Engine, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	e := &Engine{threads: threads}
	if name == KernelAuto && os.Getenv(NoAsmEnv) != "1" {
		if env := os.Getenv(KernelEnv); env != "" {
			name = env
		}
	}
	switch {
	case name == KernelAuto && os.Getenv(NoAsmEnv) == "1", name == KernelGo:
		e.name, e.kern = KernelGo, kernGo
	case name == KernelAuto:
		e.name, e.kern = KernelGo, kernGo
		if ks := verifiedKernels(); len(ks) > 0 {
			k := ks[len(ks)-1]
			e.name, e.kern, e.wide = k.name, k.fn, k.wide
		}
	default:
		for _, k := range verifiedKernels() {
			if k.name == name {
				e.name, e.kern, e.wide = k.name, k.fn, k.wide
			}
		}
		if e.kern == nil {
			return nil, fmt.Errorf("gemm: kernel %q does not run on this CPU (have %v)", name, Kernels())
		}
	}
	e.bp = make([][]float64, threads)
	e.bd = make([][]float64, threads)
	return e, nil
}

// Kernel names the micro-kernel in use.
func (e *Engine) Kernel() string { return e.name }

// Threads is the number of goroutines a call may use.
func (e *Engine) Threads() int { return e.threads }

// Worker returns a single-goroutine engine with the same kernel and its own
// buffers, for callers that run products in parallel themselves.
func (e *Engine) Worker() *Engine {
	return &Engine{name: e.name, kern: e.kern, wide: e.wide, threads: 1, bp: make([][]float64, 1), bd: make([][]float64, 1)}
}

// MulNT sets c[i][j] = Σ_p a[i][p]·b[j][p] for i < m, j < n, p < k: C = A·Bᵀ
// with A [m][k] (row stride lda), B [n][k] (ldb), C [m][n] (ldc).
func (e *Engine) MulNT(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	e.mul(m, n, k, a, lda, b, ldb, true, c, ldc)
}

// RowsFunc writes rows [r0, r1) of a [n][k] matrix, row-major, into dst
// (len (r1-r0)·k). MulNTRows calls it from several goroutines at once, for
// disjoint ranges.
type RowsFunc func(r0, r1 int, dst []float64) error

// MulNTRows is MulNT with B [n][k] produced by rows, one column block at a
// time: each goroutine decodes the rows of the block it computes into its
// own buffer (at most 128·k values) and packs them into panels, so B is
// never held whole. Every row is decoded once per call. The bits are
// MulNT's. The first error of rows is returned (C is then incomplete).
func (e *Engine) MulNTRows(m, n, k int, a []float64, lda int, rows RowsFunc, c []float64, ldc int) error {
	return e.mulRows(m, n, k, a, lda, rows, c, ldc)
}

// MulNN sets c[i][j] = Σ_p a[i][p]·b[p][j]: C = A·B with A [m][k], B [k][n].
func (e *Engine) MulNN(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	e.mul(m, n, k, a, lda, b, ldb, false, c, ldc)
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func checkOperand(what string, s []float64, rows, cols, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols || len(s) < (rows-1)*ld+cols {
		panic(fmt.Sprintf("gemm: %s: %d×%d with stride %d does not fit in %d elements", what, rows, cols, ld, len(s)))
	}
}

func (e *Engine) mul(m, n, k int, a []float64, lda int, b []float64, ldb int, transB bool, c []float64, ldc int) {
	if transB {
		checkOperand("B", b, n, k, ldb)
	} else {
		checkOperand("B", b, k, n, ldb)
	}
	_ = e.run(m, n, k, a, lda, b, ldb, transB, nil, c, ldc)
}

func (e *Engine) mulRows(m, n, k int, a []float64, lda int, rows RowsFunc, c []float64, ldc int) error {
	return e.run(m, n, k, a, lda, nil, 0, true, rows, c, ldc)
}

// run computes C = A·op(B) with B either in memory (rows nil) or decoded
// by rows, one column block per task.
func (e *Engine) run(m, n, k int, a []float64, lda int, b []float64, ldb int, transB bool, rows RowsFunc, c []float64, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative size %d×%d×%d", m, n, k))
	}
	checkOperand("A", a, m, k, lda)
	checkOperand("C", c, m, n, ldc)
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return nil
	}
	mp := (m + mr - 1) / mr * mr
	panels := mp / mr
	kc := depthBlock(k)
	e.ap = grow(e.ap, mp*k)
	ap := e.ap

	threads := e.threads
	if m*n*k < serialWork {
		threads = 1
	}
	// Column blocks of nc = ncBlock columns; rows split into chunks only
	// when there are too few column blocks to keep every goroutine busy.
	// With B decoded by rows, the column blocks narrow instead (down to nr
	// columns), so that every row of B is decoded exactly once.
	nc := ncBlock
	if blocks := (n + nc - 1) / nc; rows != nil && blocks < 2*threads {
		nc = max(nr, ((n+2*threads-1)/(2*threads)+nr-1)/nr*nr)
	} else if threads > 1 && blocks%threads != 0 && blocks < 8*threads {
		// Few blocks that do not divide among the goroutines (576
		// columns: 5 blocks on 2 threads, one idles for a fifth of the
		// product): narrower blocks, a multiple of threads of them.
		want := (blocks + threads - 1) / threads * threads
		nc = max(nr, ((n+want-1)/want+nr-1)/nr*nr)
	}
	colBlocks := (n + nc - 1) / nc
	chunks := 1
	if rows == nil && colBlocks < 2*threads {
		chunks = min(panels, (2*threads+colBlocks-1)/colBlocks)
	}
	chunkPanels := (panels + chunks - 1) / chunks
	chunks = (panels + chunkPanels - 1) / chunkPanels
	tasks := colBlocks * chunks

	var nextA, nextT atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	var failed atomic.Bool
	work := func(w int, wait func()) {
		for {
			p := int(nextA.Add(1)) - 1
			if p >= panels {
				break
			}
			packAPanel(ap, a, lda, m, mp, k, kc, p)
		}
		wait()
		e.bp[w] = grow(e.bp[w], ncBlock*kc)
		bp := e.bp[w]
		for !failed.Load() {
			t := int(nextT.Add(1)) - 1
			if t >= tasks {
				break
			}
			jb, ch := t/chunks, t%chunks
			j0, j1 := jb*nc, min(n, (jb+1)*nc)
			r0, r1 := ch*chunkPanels, min(panels, (ch+1)*chunkPanels)
			if rows == nil {
				e.block(ap, mp, m, k, kc, b, ldb, transB, bp, c, ldc, j0, j1, r0, r1)
				continue
			}
			e.bd[w] = grow(e.bd[w], (j1-j0)*k)
			bd := e.bd[w]
			if err := rows(j0, j1, bd); err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				failed.Store(true)
				break
			}
			e.block(ap, mp, m, k, kc, bd, k, true, bp, c[j0:], ldc, 0, j1-j0, r0, r1)
		}
	}
	if threads <= 1 {
		work(0, func() {})
		return firstErr
	}
	threads = min(threads, max(tasks, panels))
	// Every goroutine packs A panels, then waits until all of A is packed
	// before it multiplies.
	var packed sync.WaitGroup
	packed.Add(threads)
	barrier := func() { packed.Done(); packed.Wait() }
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w, barrier)
		}()
	}
	wg.Wait()
	return firstErr
}

// depthBlock returns the depth of the packed blocks of a product of depth
// k: the equal split of k into blocks of at most kcMax.
func depthBlock(k int) int {
	blocks := (k + kcMax - 1) / kcMax
	return (k + blocks - 1) / blocks
}

// packAPanel packs rows [p·mr, p·mr+mr) of A (zero rows past m) for every
// k block of depth kc: block starting at k0 (depth kb) holds panel p at
// k0·mp + p·mr·kb, element [q][i] at +q·mr+i.
func packAPanel(ap, a []float64, lda, m, mp, k, kc, p int) {
	i0 := p * mr
	for k0 := 0; k0 < k; k0 += kc {
		kb := min(kc, k-k0)
		dst := ap[k0*mp+p*mr*kb : k0*mp+(p+1)*mr*kb]
		if i0+mr <= m { // a whole panel
			interleaveRows(dst, a, i0*lda+k0, lda, kb, mr)
			continue
		}
		for i := 0; i < mr; i++ {
			if i0+i >= m {
				for q := 0; q < kb; q++ {
					dst[q*mr+i] = 0
				}
				continue
			}
			row := a[(i0+i)*lda+k0 : (i0+i)*lda+k0+kb]
			for q, v := range row {
				dst[q*mr+i] = v
			}
		}
	}
}

// interleaveRows writes w rows of src (kb values each, the first at base,
// ld apart) into dst column by column: dst[q·w+i] = row i's value q. Two
// rows per pass keep the reads sequential and the writes in cache (w is
// mr or nr, both even).
func interleaveRows(dst, src []float64, base, ld, kb, w int) {
	dst = dst[:kb*w]
	for i := 0; i < w; i += 2 {
		r0 := src[base+i*ld : base+i*ld+kb]
		r1 := src[base+(i+1)*ld : base+(i+1)*ld+kb]
		for q := range r0 {
			d := dst[q*w+i : q*w+i+2]
			d[0], d[1] = r0[q], r1[q]
		}
	}
}

// packB packs columns [j0, j1) and depths [k0, k0+kb) of B into bp: micro-
// panel r (columns j0+r·nr…) at r·nr·kb, element [q][j] at +q·nr+j, zero
// columns past j1.
func packB(bp, b []float64, ldb int, transB bool, j0, j1, k0, kb int) {
	for r := 0; j0+r*nr < j1; r++ {
		dst := bp[r*nr*kb : (r+1)*nr*kb]
		jr := j0 + r*nr
		w := min(nr, j1-jr)
		if transB && w == nr {
			interleaveRows(dst, b, jr*ldb+k0, ldb, kb, nr)
			continue
		}
		if transB {
			for j := 0; j < nr; j++ {
				if j >= w {
					for q := 0; q < kb; q++ {
						dst[q*nr+j] = 0
					}
					continue
				}
				row := b[(jr+j)*ldb+k0 : (jr+j)*ldb+k0+kb]
				for q, v := range row {
					dst[q*nr+j] = v
				}
			}
			continue
		}
		for q := 0; q < kb; q++ {
			d := dst[q*nr : q*nr+nr]
			src := b[(k0+q)*ldb+jr : (k0+q)*ldb+jr+w]
			copy(d, src)
			clear(d[w:])
		}
	}
}

// block computes C rows [r0·mr, min(m, r1·mr)) × columns [j0, j1) over the
// whole depth k, in k blocks of depth kc.
func (e *Engine) block(ap []float64, mp, m, k, kc int, b []float64, ldb int, transB bool, bp []float64, c []float64, ldc, j0, j1, r0, r1 int) {
	var tmp [mr * nr]float64
	for k0 := 0; k0 < k; k0 += kc {
		kb := min(kc, k-k0)
		packB(bp, b, ldb, transB, j0, j1, k0, kb)
		load := k0 > 0
		for rc := r0; rc < r1; rc += mcBlock / mr {
			rce := min(r1, rc+mcBlock/mr)
			for jr := j0; jr < j1; jr += nr {
				bpan := bp[(jr-j0)*kb : (jr-j0+nr)*kb]
				w := min(nr, j1-jr)
				for p := rc; p < rce; p++ {
					i0 := p * mr
					if e.wide != nil && w == nr && p+widePanels <= rce && i0+widePanels*mr <= m {
						e.wide(kb, ap[k0*mp+p*mr*kb:k0*mp+(p+widePanels)*mr*kb], mr*kb, bpan, c[i0*ldc+jr:], ldc, load)
						p += widePanels - 1
						continue
					}
					apan := ap[k0*mp+p*mr*kb : k0*mp+(p+1)*mr*kb]
					h := min(mr, m-i0)
					if h == mr && w == nr {
						e.kern(kb, apan, bpan, c[i0*ldc+jr:], ldc, load)
						continue
					}
					if load {
						for i := 0; i < h; i++ {
							copy(tmp[i*nr:i*nr+w], c[(i0+i)*ldc+jr:])
						}
					}
					e.kern(kb, apan, bpan, tmp[:], nr, load)
					for i := 0; i < h; i++ {
						copy(c[(i0+i)*ldc+jr:(i0+i)*ldc+jr+w], tmp[i*nr:i*nr+w])
					}
				}
			}
		}
	}
}
