package gemm

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/cpu"
)

// fmaSpin runs n iterations of 12 independent 4-lane FMAs (clock_amd64.s).
//
//go:noescape
func fmaSpin(n int)

// measuredGHz estimates the clock one core runs float64 FMAs at: a loop of
// independent 256-bit FMAs, timed in the thread's CPU time (so time spent
// descheduled on a loaded machine does not count), at 16 FLOP per cycle
// (two 4-lane FMA pipes, every AVX2+FMA core of the last decade). The best
// of three runs of ≈30 ms; 0 without AVX2+FMA.
func measuredGHz() float64 {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 10_000_000
	best := 0.0
	for r := 0; r < 3; r++ {
		c0 := threadCPU()
		fmaSpin(n)
		if s := threadCPU() - c0; s > 0 {
			best = max(best, float64(n)*96/16/s/1e9)
		}
	}
	return best
}

// threadCPU is the calling thread's user+system CPU seconds.
func threadCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
