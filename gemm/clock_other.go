//go:build !amd64

package gemm

// measuredGHz: no measurement off amd64 (MachinePeak uses the clock the
// kernel reports).
func measuredGHz() float64 { return 0 }
