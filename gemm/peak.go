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
// widest vector unit per core (AVX-512: 32 FLOP/cycle, except on AMD Zen 4
// — family 19h — whose two FMA pipes are 256 bits wide and execute a
// 512-bit FMA in two halves: 16, as AVX2+FMA: 16, arm64 NEON: 8, else 4)
// at the clock a core reaches running FMAs, measured (amd64: a 256-bit FMA
// loop timed in wall time on a locked thread, ≈0.3 s; see measuredGHz), else the
// maximum clock the kernel reports (cpufreq/cpuinfo_max_freq, else the
// highest "cpu MHz" of /proc/cpuinfo, which in a virtual machine is often
// the base clock: a core boosting above it would then exceed "100%").
func MachinePeak() Peak {
	p := Peak{Cores: runtime.GOMAXPROCS(0), FlopsPerCycle: 4, Features: "scalar/SSE2"}
	info := readCPUInfo()
	switch {
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F && info.vendor == "AuthenticAMD" && info.family == 0x19:
		p.FlopsPerCycle, p.Features = 16, "AVX-512F on AMD Zen 4: 2×4-lane FMA, 512-bit ops in two halves"
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F:
		p.FlopsPerCycle, p.Features = 32, "AVX-512F: 2×8-lane FMA"
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		p.FlopsPerCycle, p.Features = 16, "AVX2+FMA: 2×4-lane FMA"
	case runtime.GOARCH == "arm64":
		p.FlopsPerCycle, p.Features = 8, "NEON: 2×2-lane FMA"
	}
	if ghz := measuredGHz(); ghz > 0 {
		p.GHz, p.ClockSource = ghz, "measured: 256-bit FMA loop, best wall time of a locked thread"
		return p
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); err == nil {
		if khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && khz > 0 {
			p.GHz, p.ClockSource = khz/1e6, "cpufreq cpuinfo_max_freq"
			return p
		}
	}
	if info.mhz > 0 {
		p.GHz, p.ClockSource = info.mhz/1e3, "/proc/cpuinfo cpu MHz"
	}
	return p
}

// cpuInfo is what MachinePeak reads from /proc/cpuinfo (zero when absent).
type cpuInfo struct {
	vendor string  // vendor_id, e.g. AuthenticAMD
	family int     // cpu family
	mhz    float64 // the highest cpu MHz
}

func readCPUInfo() cpuInfo {
	var info cpuInfo
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return info
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "vendor_id":
			info.vendor = v
		case "cpu family":
			info.family, _ = strconv.Atoi(v)
		case "cpu MHz":
			if mhz, err := strconv.ParseFloat(v, 64); err == nil && mhz > info.mhz {
				info.mhz = mhz
			}
		}
	}
	return info
}
