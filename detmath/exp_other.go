//go:build !amd64

package detmath

const vecExp = false

func expTo(dst, src []float64) {
	for i, x := range src {
		dst[i] = Exp(x)
	}
}
