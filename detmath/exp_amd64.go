package detmath

import (
	"os"

	"golang.org/x/sys/cpu"
)

// expAVX2 is ExpTo's AVX2+FMA body (exp_amd64.s): it stops at the first
// group of four holding a value outside [-708, 709] (or NaN) and returns
// how many elements it did.
//
//go:noescape
func expAVX2(dst, src []float64) int

// vecExp reports whether ExpTo uses the assembly (read once: the CPU's
// features and QPPL_NOASM=1 do not change while the process runs).
var vecExp = cpu.X86.HasAVX2 && cpu.X86.HasFMA && os.Getenv("QPPL_NOASM") != "1"

func expTo(dst, src []float64) {
	i := 0
	for vecExp && i+4 <= len(src) {
		i += expAVX2(dst[i:len(src)], src[i:])
		if i+4 <= len(src) { // a group with a lane out of range
			for _, x := range src[i : i+4] {
				dst[i] = Exp(x)
				i++
			}
		}
	}
	for ; i < len(src); i++ {
		dst[i] = Exp(src[i])
	}
}
