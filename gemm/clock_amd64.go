package gemm

import (
	"runtime"
	"time"

	"golang.org/x/sys/cpu"
)

// fmaSpin runs n iterations of 12 independent 4-lane FMAs (clock_amd64.s).
//
//go:noescape
func fmaSpin(n int)

// measuredGHz estimates the clock one core runs float64 FMAs at: a loop of
// independent 256-bit FMAs at 16 FLOP per cycle (two 4-lane FMA pipes,
// every AVX2+FMA core of the last decade), on a locked OS thread. The
// shortest wall time of seven runs of ≈40 ms: being descheduled only
// lengthens a run, and wall time is exact where the thread's CPU time is
// counted in scheduler ticks (±4 ms on a 30 ms run gave 3.7–4.3 GHz on one
// machine). 0 without AVX2+FMA.
func measuredGHz() float64 {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 15_000_000
	best := time.Duration(0)
	for r := 0; r < 7; r++ {
		t0 := time.Now()
		fmaSpin(n)
		if d := time.Since(t0); d > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	if best == 0 {
		return 0
	}
	return float64(n) * 96 / 16 / best.Seconds() / 1e9
}
