// Package detmath owns the elementary functions of qppl's float64
// reference (exp, log, pow, sin/cos) computed so that they give the same bits on
// every GOARCH.
//
// Go's math.Exp, math.Log, math.Sin and math.Cos do not: amd64 runs
// assembly for exp and log, and on arm64 (also ppc64le, s390x, riscv64) the
// compiler may fuse x*y+z in the pure-Go versions into one FMA, so the last
// bit differs between machines. Here every multiply-add is an explicit
// math.FMA (one rounding, the same everywhere) and every other product is
// rounded on its own (float64(x*y)), so the code has one meaning in IEEE
// arithmetic. Accuracy: within 2 ulp of the exact value (tests compare
// with math and with 300-bit math/big references).
package detmath

import "math"

// Exp returns e**x. Exp(+Inf) = +Inf, Exp(-Inf) = 0, Exp(NaN) = NaN;
// results that underflow are subnormal or 0, overflow gives +Inf.
func Exp(x float64) float64 {
	const (
		overflow  = 0x1.62e42fefa39efp+9  // 709.78…: largest x with a finite result
		underflow = -0x1.74910d52d3052p+9 // -745.13…: below, the result rounds to 0
		log2e     = 0x1.71547652b82fep+0
		ln2hi     = 0x1.62e42fefa39efp-1
		ln2lo     = 0x1.abc9e3b39803fp-56
		magic     = 0x1.8p52 // adding it rounds to an integer (|t| < 2^51)
	)
	switch {
	case x != x:
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	}
	// x = n·ln2 + r, |r| <= ln2/2 (a few ulp more after rounding n).
	n := math.FMA(x, log2e, magic) - magic
	r := math.FMA(-n, ln2hi, x)
	r = math.FMA(-n, ln2lo, r)
	// exp(r) by its Taylor series to r^13 (truncation < 2^-60 relative).
	p := 1.0 / 6227020800 // 1/13!
	p = math.FMA(p, r, 1.0/479001600)
	p = math.FMA(p, r, 1.0/39916800)
	p = math.FMA(p, r, 1.0/3628800)
	p = math.FMA(p, r, 1.0/362880)
	p = math.FMA(p, r, 1.0/40320)
	p = math.FMA(p, r, 1.0/5040)
	p = math.FMA(p, r, 1.0/720)
	p = math.FMA(p, r, 1.0/120)
	p = math.FMA(p, r, 1.0/24)
	p = math.FMA(p, r, 1.0/6)
	p = math.FMA(p, r, 0.5)
	p = math.FMA(p, r, 1)
	p = math.FMA(p, r, 1)
	// Scale by 2^n in at most two exact steps (the last may round into
	// the subnormal range).
	k := int(n)
	switch {
	case k > 1023:
		return float64(p*pow2(k-1)) * 2
	case k < -1022:
		return float64(p*pow2(k+60)) * 0x1p-60
	}
	return p * pow2(k)
}

// pow2 returns 2^k for -1022 <= k <= 1023.
func pow2(k int) float64 { return math.Float64frombits(uint64(k+1023) << 52) }

// Log returns the natural logarithm of x. Log(+Inf) = +Inf, Log(0) =
// -Inf, Log(x < 0) = NaN, Log(NaN) = NaN.
func Log(x float64) float64 {
	switch {
	case x != x || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	hi, lo := logParts(x)
	return hi + lo
}

// logParts returns log(x) = hi + lo for finite x > 0, with hi = e·ln2hi
// exact and |lo| <= 0.35 + e·2^-33.
func logParts(x float64) (hi, lo float64) {
	const (
		ln2hi  = 0x1.62e42fee00000p-1 // ln2 with 21 trailing zero bits: e·ln2hi is exact
		ln2lo  = 0x1.a39ef35793c76p-33
		sqrt2h = 0x1.6a09e667f3bcdp-1 // sqrt(2)/2
	)
	// x = m·2^e with m in [sqrt(2)/2, sqrt(2)).
	m, e := math.Frexp(x) // m in [0.5, 1)
	if m < sqrt2h {
		m *= 2
		e--
	}
	f := m - 1 // exact (Sterbenz)
	// log(1+f) = 2·atanh(s), s = f/(2+f): = f − hfsq + s·(hfsq + R) with
	// R = Σ_{k>=1} 2·z^k/(2k+1), z = s², |s| < 0.1716 (z^12 term < 2^-70).
	s := f / (2 + f)
	z := float64(s * s)
	R := 2.0 / 25
	R = math.FMA(R, z, 2.0/23)
	R = math.FMA(R, z, 2.0/21)
	R = math.FMA(R, z, 2.0/19)
	R = math.FMA(R, z, 2.0/17)
	R = math.FMA(R, z, 2.0/15)
	R = math.FMA(R, z, 2.0/13)
	R = math.FMA(R, z, 2.0/11)
	R = math.FMA(R, z, 2.0/9)
	R = math.FMA(R, z, 2.0/7)
	R = math.FMA(R, z, 2.0/5)
	R = math.FMA(R, z, 2.0/3)
	R = float64(R * z)
	hfsq := float64(0.5 * float64(f*f))
	fe := float64(e)
	l := math.FMA(s, hfsq+R, float64(fe*ln2lo))
	return float64(fe * ln2hi), f - (hfsq - l)
}

// Pow returns x**y for finite x > 0 and finite y (NaN otherwise), as
// exp(y·log x) with the product carried in two parts, so the result is
// within about 2 ulp (math.Pow is not bit-identical across GOARCHes).
func Pow(x, y float64) float64 {
	switch {
	case !(x > 0) || math.IsInf(x, 0) || y != y || math.IsInf(y, 0):
		return math.NaN()
	case y == 0 || x == 1:
		return 1
	}
	hi, lo := logParts(x)
	p1 := float64(y * hi)
	q := math.FMA(y, hi, -p1) + float64(y*lo)
	ph := p1 + q
	pl := (p1 - ph) + q // |p1| >= |q| unless p1 = 0: exact remainder
	r := Exp(ph)
	if r == 0 || math.IsInf(r, 0) {
		return r
	}
	return math.FMA(r, pl, r)
}

// Sincos returns Sin(x), Cos(x). It is accurate for |x| < 2^26 (RoPE
// angles are at most a position, far below); beyond that, and for
// non-finite x, it returns NaN, NaN.
func Sincos(x float64) (sin, cos float64) {
	const (
		twoOverPi = 0x1.45f306dc9c883p-1
		pio2a     = 0x1.921fb54442d18p+0 // π/2 = pio2a + pio2b + pio2c + O(2^-163)
		pio2b     = 0x1.1a62633145c07p-54
		pio2c     = -0x1.f1976b7ed8fbcp-110
		magic     = 0x1.8p52
	)
	if !(math.Abs(x) < 0x1p26) {
		return math.NaN(), math.NaN()
	}
	// x = j·π/2 + r, |r| <= π/4 (a few ulp more).
	j := math.FMA(x, twoOverPi, magic) - magic
	r := math.FMA(-j, pio2a, x)
	r = math.FMA(-j, pio2b, r)
	r = math.FMA(-j, pio2c, r)
	z := float64(r * r)
	// sin(r) = r + r·z·S(z), Taylor to r^19; cos(r) = 1 − z/2 + z²·C(z), to r^20.
	S := -1.0 / 121645100408832000 // -1/19!
	S = math.FMA(S, z, 1.0/355687428096000)
	S = math.FMA(S, z, -1.0/1307674368000)
	S = math.FMA(S, z, 1.0/6227020800)
	S = math.FMA(S, z, -1.0/39916800)
	S = math.FMA(S, z, 1.0/362880)
	S = math.FMA(S, z, -1.0/5040)
	S = math.FMA(S, z, 1.0/120)
	S = math.FMA(S, z, -1.0/6)
	s := math.FMA(float64(r*z), S, r)
	C := 1.0 / 2432902008176640000 // 1/20!
	C = math.FMA(C, z, -1.0/6402373705728000)
	C = math.FMA(C, z, 1.0/20922789888000)
	C = math.FMA(C, z, -1.0/87178291200)
	C = math.FMA(C, z, 1.0/479001600)
	C = math.FMA(C, z, -1.0/3628800)
	C = math.FMA(C, z, 1.0/40320)
	C = math.FMA(C, z, -1.0/720)
	C = math.FMA(C, z, 1.0/24)
	hz := float64(0.5 * z)
	w := 1 - hz
	c := w + (((1 - w) - hz) + float64(float64(z*z)*C))
	switch int64(j) & 3 {
	case 0:
		return s, c
	case 1:
		return c, -s
	case 2:
		return -s, -c
	default:
		return -c, s
	}
}

// ExpTo sets dst[i] = Exp(src[i]) for every i (dst may be src; len(dst)
// >= len(src)). On amd64 with AVX2+FMA (unless QPPL_NOASM=1) it computes
// four at a time in assembly with exactly Exp's operations, so the bits are
// Exp's.
func ExpTo(dst, src []float64) {
	_ = dst[:len(src)]
	expTo(dst, src)
}
