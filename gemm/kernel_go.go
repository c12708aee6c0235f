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

// asmKernel is an assembly micro-kernel the CPU supports.
type asmKernel struct {
	name string
	fn   kernel
}
