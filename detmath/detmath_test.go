package detmath

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// ulps returns |got − want| in units of the last place of want.
func ulps(got, want float64) float64 {
	if got == want {
		return 0
	}
	u := math.Nextafter(math.Abs(want), math.Inf(1)) - math.Abs(want)
	if want == 0 || math.IsInf(u, 0) {
		u = math.SmallestNonzeroFloat64
	}
	return math.Abs(got-want) / u
}

func TestSpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"Exp(0)", Exp(0), 1}, {"Exp(-0)", Exp(math.Copysign(0, -1)), 1},
		{"Exp(+Inf)", Exp(inf), inf}, {"Exp(-Inf)", Exp(-inf), 0}, {"Exp(NaN)", Exp(nan), nan},
		{"Exp(710)", Exp(710), inf}, {"Exp(-746)", Exp(-746), 0},
		{"Exp(1)", Exp(1), math.E},
		{"Log(1)", Log(1), 0}, {"Log(0)", Log(0), -inf}, {"Log(-1)", Log(-1), nan},
		{"Log(+Inf)", Log(inf), inf}, {"Log(NaN)", Log(nan), nan}, {"Log(e)", Log(math.E), 1},
	} {
		if !(tc.got == tc.want || (tc.got != tc.got && tc.want != tc.want)) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if s, c := Sincos(0); s != 0 || c != 1 {
		t.Errorf("Sincos(0) = %v, %v", s, c)
	}
	if s, c := Sincos(math.Inf(1)); s == s || c == c {
		t.Errorf("Sincos(+Inf) = %v, %v, want NaN", s, c)
	}
}

// bigExp etc. compute 300-bit references by series (arguments reduced
// exactly in big arithmetic), independent of the code under test.
func bigExp(x float64) float64 {
	return bigExpBig(new(big.Float).SetPrec(300).SetFloat64(x))
}

func bigExpBig(x *big.Float) float64 {
	const prec = 300
	// e^x = (e^(x/2^20))^(2^20)
	y := new(big.Float).SetPrec(prec).Set(x)
	y.SetMantExp(y, -20)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for k := 1; k < 40; k++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(k)))
		sum.Add(sum, term)
	}
	for i := 0; i < 20; i++ {
		sum.Mul(sum, sum)
	}
	f, _ := sum.Float64()
	return f
}

func TestExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	worstBig, worstMath := 0.0, 0.0
	for i := 0; i < 200000; i++ {
		x := (r.Float64()*2 - 1) * 740
		if i%2 == 0 {
			x = (r.Float64()*2 - 1) * 30
		}
		got := Exp(x)
		if u := ulps(got, math.Exp(x)); u > worstMath {
			worstMath = u
		}
		if i%400 == 0 && got > 0x1p-1020 {
			if u := ulps(got, bigExp(x)); u > worstBig {
				worstBig = u
			}
		}
	}
	t.Logf("Exp: worst %.2f ulp vs math.Exp, %.2f ulp vs 300-bit", worstMath, worstBig)
	if worstBig > 1 || worstMath > 2 {
		t.Errorf("Exp error too large: %.2f ulp (exact), %.2f ulp (math.Exp)", worstBig, worstMath)
	}
}

func TestLogAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := math.Exp((r.Float64()*2 - 1) * 700)
		if i%2 == 0 {
			x = r.Float64() * 4
		}
		if u := ulps(Log(x), math.Log(x)); u > worst {
			worst = u
		}
	}
	for _, x := range []float64{math.MaxFloat64, 1 + 0x1p-52, 1 - 0x1p-53, 0x1p-1022} {
		if u := ulps(Log(x), math.Log(x)); u > worst {
			worst = u
		}
	}
	// Subnormals (where amd64's math.Log is wrong: it returns -709.09 for
	// 5e-324): against log(x·2^200) − 200·ln2.
	for _, x := range []float64{5e-324, 1e-310, 3e-320} {
		want := math.Log(x*0x1p200) - 200*math.Ln2
		if u := ulps(Log(x), want); u > worst {
			worst = u
		}
	}
	t.Logf("Log: worst %.2f ulp vs math.Log", worst)
	if worst > 2 {
		t.Errorf("Log error %.2f ulp", worst)
	}
}

// bigLog returns log(x) to about 300 bits: x = m·2^e, log m = 2·atanh(s),
// s = (m−1)/(m+1), and ln2 = 2·atanh(1/3).
func bigLog(x float64) *big.Float {
	const prec = 320
	atanh2 := func(s *big.Float) *big.Float { // 2·atanh(s), |s| <= 1/3
		sum := new(big.Float).SetPrec(prec)
		s2 := new(big.Float).SetPrec(prec).Mul(s, s)
		term := new(big.Float).SetPrec(prec).Set(s)
		for k := 0; k < 200; k++ {
			t := new(big.Float).SetPrec(prec).Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(2*k+1)))
			sum.Add(sum, t)
			term.Mul(term, s2)
		}
		return sum.Mul(sum, new(big.Float).SetPrec(prec).SetInt64(2))
	}
	m, e := math.Frexp(x)
	bm := new(big.Float).SetPrec(prec).SetFloat64(m)
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	s := new(big.Float).SetPrec(prec).Quo(new(big.Float).SetPrec(prec).Sub(bm, one), new(big.Float).SetPrec(prec).Add(bm, one))
	third := new(big.Float).SetPrec(prec).Quo(one, new(big.Float).SetPrec(prec).SetInt64(3))
	l := atanh2(s)
	return l.Add(l, new(big.Float).SetPrec(prec).Mul(atanh2(third), new(big.Float).SetPrec(prec).SetInt64(int64(e))))
}

// TestPowAccuracy: in the range RoPE uses (theta up to 1e9, |y| <= 1) Pow
// is within 2 ulp of x^y computed to 300 bits.
func TestPowAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	worst := 0.0
	for i := 0; i < 300; i++ {
		x := math.Exp((r.Float64()*2 - 1) * 20)
		y := r.Float64()*2 - 1
		if i%2 == 0 {
			x, y = []float64{1e4, 5e5, 1e6, 5e8}[i%8/2], -float64(2*r.IntN(64))/128
		}
		ly := bigLog(x)
		ly.Mul(ly, new(big.Float).SetPrec(320).SetFloat64(y))
		want := bigExpBig(ly)
		if u := ulps(Pow(x, y), want); u > worst {
			worst = u
		}
	}
	t.Logf("Pow: worst %.2f ulp vs 300-bit", worst)
	if worst > 2 {
		t.Errorf("Pow error %.2f ulp", worst)
	}
	for _, c := range [][3]float64{{2, 10, 1024}, {1e4, 0.5, 100}, {1, 7, 1}, {5, 0, 1}} {
		if got := Pow(c[0], c[1]); got != c[2] {
			t.Errorf("Pow(%v, %v) = %v, want %v", c[0], c[1], got, c[2])
		}
	}
	for _, c := range [][2]float64{{0, 1}, {-1, 2}, {math.Inf(1), 1}, {2, math.NaN()}} {
		if got := Pow(c[0], c[1]); got == got {
			t.Errorf("Pow(%v, %v) = %v, want NaN", c[0], c[1], got)
		}
	}
}

func TestSincosAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := r.Float64() * 200000
		if i%2 == 0 {
			x = (r.Float64()*2 - 1) * 4
		}
		s, c := Sincos(x)
		// Compare with an absolute tolerance of 2 ulp of 1 when the
		// result is near 0 (argument near a multiple of π/2).
		for _, p := range [][2]float64{{s, math.Sin(x)}, {c, math.Cos(x)}} {
			u := ulps(p[0], p[1])
			if math.Abs(p[1]) < 0.5 {
				u = math.Abs(p[0]-p[1]) / 0x1p-53
			}
			worst = max(worst, u)
		}
	}
	t.Logf("Sincos: worst %.2f ulp vs math", worst)
	if worst > 2 {
		t.Errorf("Sincos error %.2f ulp", worst)
	}
}

// TestFixedBits pins the bits of a few values: the same on every GOARCH
// (run the arm64 test binary under qemu to check).
func TestFixedBits(t *testing.T) {
	h := uint64(14695981039346656037)
	mix := func(v float64) {
		h ^= math.Float64bits(v)
		h *= 1099511628211
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 100000; i++ {
		x := (r.Float64()*2 - 1) * 50
		mix(Exp(x))
		mix(Log(math.Abs(x)))
		s, c := Sincos(x * 1000)
		mix(s)
		mix(c)
		mix(Pow(math.Abs(x)+0.5, x/7))
	}
	t.Logf("hash of 400000 results: %#x", h)
}

func BenchmarkExp(b *testing.B) {
	xs := make([]float64, 4096)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range xs {
		xs[i] = -r.Float64() * 30
	}
	b.Run("detmath", func(b *testing.B) {
		s := 0.0
		for i := 0; i < b.N; i++ {
			s += Exp(xs[i&4095])
		}
		_ = s
	})
	b.Run("math", func(b *testing.B) {
		s := 0.0
		for i := 0; i < b.N; i++ {
			s += math.Exp(xs[i&4095])
		}
		_ = s
	})
}

// TestExpToMatchesExp: the vector path gives Exp's bits, including around
// the range limits, specials and every tail length.
func TestExpToMatchesExp(t *testing.T) {
	if !vecExp {
		t.Log("no vector exp on this machine: ExpTo is the scalar loop")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for n := 0; n < 70; n++ {
		src := make([]float64, n)
		for i := range src {
			switch r.IntN(10) {
			case 0:
				src[i] = []float64{-708, 709, -708.0000001, 709.0000001, math.NaN(), math.Inf(1), math.Inf(-1), -745.2, 0, math.Copysign(0, -1)}[r.IntN(10)]
			case 1:
				src[i] = (r.Float64()*2 - 1) * 760
			default:
				src[i] = (r.Float64()*2 - 1) * 40
			}
		}
		dst := make([]float64, n)
		ExpTo(dst, src)
		for i, x := range src {
			if w := Exp(x); math.Float64bits(dst[i]) != math.Float64bits(w) {
				t.Fatalf("n=%d: ExpTo(%v) = %v, Exp = %v", n, x, dst[i], w)
			}
		}
		ExpTo(src, src) // in place
		for i := range src {
			if math.Float64bits(src[i]) != math.Float64bits(dst[i]) {
				t.Fatalf("n=%d: in-place ExpTo differs at %d", n, i)
			}
		}
	}
	for i := 0; i < 200; i++ {
		src := make([]float64, 4096)
		for j := range src {
			src[j] = -r.Float64() * 50
		}
		dst := make([]float64, len(src))
		ExpTo(dst, src)
		for j, x := range src {
			if w := Exp(x); math.Float64bits(dst[j]) != math.Float64bits(w) {
				t.Fatalf("ExpTo(%v) = %v, Exp = %v", x, dst[j], w)
			}
		}
	}
}

func BenchmarkExpTo(b *testing.B) {
	src := make([]float64, 4096)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range src {
		src[i] = -r.Float64() * 30
	}
	dst := make([]float64, len(src))
	for i := 0; i < b.N; i++ {
		ExpTo(dst, src)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
}
