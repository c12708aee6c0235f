package gemm

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"
)

// Peak is a machine's nominal float64 peak: Cores × FlopsPerCycle × GHz.
type Peak struct {
	Cores         int     // logical CPUs the process may use
	FlopsPerCycle int     // float64 FLOP per cycle per core from the vector features
	GHz           float64 // clock; 0 when unknown
	Features      string  // what FlopsPerCycle assumes
	ClockSource   string  // where GHz comes from
}

// GFLOPs returns the peak in GFLOP/s (0 when the clock is unknown).
func (p Peak) GFLOPs() float64 { return float64(p.Cores*p.FlopsPerCycle) * p.GHz }

// MachinePeak estimates this machine's float64 peak: two FMA pipes of the
// widest vector unit per core (AVX-512: 32 FLOP/cycle, AVX2+FMA: 16, arm64
// NEON: 8, else 4) at the maximum clock the kernel reports
// (cpufreq/cpuinfo_max_freq, else the highest "cpu MHz" of /proc/cpuinfo).
func MachinePeak() Peak {
	p := Peak{Cores: runtime.GOMAXPROCS(0), FlopsPerCycle: 4, Features: "scalar/SSE2"}
	switch {
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F:
		p.FlopsPerCycle, p.Features = 32, "AVX-512F: 2×8-lane FMA"
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		p.FlopsPerCycle, p.Features = 16, "AVX2+FMA: 2×4-lane FMA"
	case runtime.GOARCH == "arm64":
		p.FlopsPerCycle, p.Features = 8, "NEON: 2×2-lane FMA"
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); err == nil {
		if khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && khz > 0 {
			p.GHz, p.ClockSource = khz/1e6, "cpufreq cpuinfo_max_freq"
			return p
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			k, v, ok := strings.Cut(s.Text(), ":")
			if !ok || strings.TrimSpace(k) != "cpu MHz" {
				continue
			}
			if mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && mhz/1e3 > p.GHz {
				p.GHz, p.ClockSource = mhz/1e3, "/proc/cpuinfo cpu MHz"
			}
		}
	}
	return p
}
