package gemm

import "math"

// kernGo is the portable micro-kernel: the same FMA chains as the assembly,
// in the same order (each element's chain runs over p ascending; the order
// in which different elements advance does not matter).
func kernGo(k int, a, b, c []float64, ldc int, load bool) {
	a, b = a[:k*mr], b[:k*nr]
	for i := 0; i < mr; i++ {
		row := (*[nr]float64)(c[i*ldc : i*ldc+nr])
		var c0, c1, c2, c3, c4, c5, c6, c7 float64
		if load {
			c0, c1, c2, c3, c4, c5, c6, c7 = row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]
		}
		for p := 0; p < k; p++ {
			ai := a[p*mr+i]
			bv := (*[nr]float64)(b[p*nr : p*nr+nr])
			c0 = math.FMA(ai, bv[0], c0)
			c1 = math.FMA(ai, bv[1], c1)
			c2 = math.FMA(ai, bv[2], c2)
			c3 = math.FMA(ai, bv[3], c3)
			c4 = math.FMA(ai, bv[4], c4)
			c5 = math.FMA(ai, bv[5], c5)
			c6 = math.FMA(ai, bv[6], c6)
			c7 = math.FMA(ai, bv[7], c7)
		}
		row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] = c0, c1, c2, c3, c4, c5, c6, c7
	}
}

// widePanels is the number of consecutive A panels a wideKernel computes.
const widePanels = 4

// wideKernel computes widePanels mr×nr tiles stacked down the rows against
// one B micro-panel: tile t reads its A panel at a[t·astride:] and its C
// rows at c[t·mr·ldc:], each exactly as kernel would (so the bits are the
// same; only the register blocking differs).
type wideKernel func(k int, a []float64, astride int, b, c []float64, ldc int, load bool)

// kernGoWide is wideKernel in pure Go: the specification of the wide
// assembly kernels, and a way to test the engine's wide-tile path on any
// CPU.
func kernGoWide(k int, a []float64, astride int, b, c []float64, ldc int, load bool) {
	for t := 0; t < widePanels; t++ {
		kernGo(k, a[t*astride:], b, c[t*mr*ldc:], ldc, load)
	}
}

// wideAgrees checks wide against kernGoWide, bit for bit, on a few small
// products (depths 1, 3 and 17, with and without loading C, signed zeros
// and values of very different magnitudes).
func wideAgrees(wide wideKernel) bool {
	const ldc = nr + 3
	for _, k := range []int{1, 3, 17} {
		astride := k*mr + 5
		a := make([]float64, (widePanels-1)*astride+k*mr)
		b := make([]float64, k*nr)
		x := uint64(0x9e3779b97f4a7c15)
		next := func() float64 { // exact dyadic values from a fixed generator
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v := float64(int64(x>>11)-1<<52) * 0x1p-52
			return math.Ldexp(v, int(x%41)-20)
		}
		for i := range a {
			a[i] = next()
		}
		for i := range b {
			b[i] = next()
		}
		a[0], b[1] = math.Copysign(0, -1), math.Copysign(0, -1)
		for _, load := range []bool{false, true} {
			want := make([]float64, widePanels*mr*ldc)
			for i := range want {
				want[i] = next()
			}
			got := append([]float64(nil), want...)
			kernGoWide(k, a, astride, b, want, ldc, load)
			wide(k, a, astride, b, got, ldc, load)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					return false
				}
			}
		}
	}
	return true
}

// asmKernel is an assembly micro-kernel the CPU supports: fn for single
// tiles, and wide (nil if none) for widePanels tiles at once. verified is
// false when the kernel failed its start-up bit-for-bit check: it is then
// never offered.
type asmKernel struct {
	name     string
	fn       kernel
	wide     wideKernel
	verified bool
}
