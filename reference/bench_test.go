package reference

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/gemm"
	"github.com/qppl/qppl/quant"
)

const benchModelEnv = "QPPL_WRITE_BENCH_MODEL"

// TestWriteBenchModel is a helper, not a test: the benchmark runs the test
// binary with QPPL_WRITE_BENCH_MODEL=DIR so that the model is generated in a
// separate process and its memory does not count in the benchmark's peak RSS.
func TestWriteBenchModel(t *testing.T) {
	dir := os.Getenv(benchModelEnv)
	if dir == "" {
		t.Skip("helper for BenchmarkForward_SmolLM2Shaped_T512")
	}
	if err := fixtures.Write(dir, fixtures.SmolLM2Shaped()); err != nil {
		t.Fatal(err)
	}
}

// cpuSeconds returns the process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSSMB returns VmHWM from /proc/self/status in MB (0 if unavailable).
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// BenchmarkForward_SmolLM2Shaped_T512 times one 512-token window (all 511
// targets scored) through a random BF16 model of SmolLM2-135M's shape
// (fixtures.SmolLM2Shaped: vocab 49152, hidden 576, 30 layers, 9 heads, 3
// key/value heads, intermediate 1536, tied head). The model is generated
// once by a child process into a temp dir (or taken from
// $QPPL_BENCH_MODEL_DIR when set). Reports tokens/s and the process's peak
// RSS (VmHWM) in MB.
func BenchmarkForward_SmolLM2Shaped_T512(b *testing.B) {
	dir := os.Getenv("QPPL_BENCH_MODEL_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteBenchModel$", "-test.count=1")
		cmd.Env = append(os.Environ(), benchModelEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("generating the model: %v\n%s", err, out)
		}
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	t0 := time.Now()
	be, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	load := time.Since(t0)
	toks := make([]int32, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range toks {
		toks[i] = int32(r.IntN(49152))
	}
	w := backends.Window{Tokens: toks, First: 1}
	cpu0 := cpuSeconds()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sc, err := be.Score(context.Background(), w, backends.Request{})
		if err != nil {
			b.Fatal(err)
		}
		if len(sc.NLL) != 511 || math.IsNaN(sc.NLL[0]) {
			b.Fatalf("bad scores: %d NLLs", len(sc.NLL))
		}
	}
	b.StopTimer()
	// CPU seconds per window: on a shared machine wall time depends on the
	// other load; CPU time (all threads) is a steadier measure of the work.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu_s/op")
	b.ReportMetric(float64(len(toks)*b.N)/b.Elapsed().Seconds(), "tokens/s")
	flop := be.m.windowFLOP(len(toks), len(toks)-1) * float64(b.N)
	peak := gemm.MachinePeak()
	b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(100*flop/b.Elapsed().Seconds()/1e9/peak.GFLOPs(), "%peak")
	b.ReportMetric(peakRSSMB(), "peakRSS_MB")
	b.ReportMetric(load.Seconds(), "load_s")
}

// BenchmarkForwardKernels times the window of
// BenchmarkForward_SmolLM2Shaped_T512 with every assembly gemm kernel of
// this CPU (e.g. avx2 and avx512), interleaved (each round runs every
// kernel once, so all see the same machine load), and reports each one's
// median wall and CPU seconds and its speed relative to the first
// assembly kernel: the figure behind the default kernel choice.
func BenchmarkForwardKernels(b *testing.B) {
	dir := os.Getenv("QPPL_BENCH_MODEL_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteBenchModel$", "-test.count=1")
		cmd.Env = append(os.Environ(), benchModelEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("generating the model: %v\n%s", err, out)
		}
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		b.Fatal(err)
	}
	ks := gemm.Kernels()[1:]
	if len(ks) < 2 {
		b.Skipf("kernels %v: nothing to compare", gemm.Kernels())
	}
	bes := make([]*Backend, len(ks))
	for i, kn := range ks {
		if bes[i], err = newBackendKernel(m.Config, checkpointSource{m: m, scheme: scheme}, 0, kn); err != nil {
			b.Fatal(err)
		}
	}
	toks := make([]int32, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range toks {
		toks[i] = int32(r.IntN(m.Config.VocabSize))
	}
	w := backends.Window{Tokens: toks, First: 1}
	wall := make([][]float64, len(ks))
	cpu := make([][]float64, len(ks))
	var first []float64
	for i := 0; i < b.N; i++ {
		for j, be := range bes {
			c0, t0 := cpuSeconds(), time.Now()
			sc, err := be.Score(context.Background(), w, backends.Request{})
			if err != nil {
				b.Fatal(err)
			}
			wall[j] = append(wall[j], time.Since(t0).Seconds())
			cpu[j] = append(cpu[j], cpuSeconds()-c0)
			if j == 0 {
				first = sc.NLL
			} else {
				for p := range first {
					if math.Float64bits(sc.NLL[p]) != math.Float64bits(first[p]) {
						b.Fatalf("kernel %s: NLL[%d] = %v, %s %v", ks[j], p, sc.NLL[p], ks[0], first[p])
					}
				}
			}
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for j, kn := range ks {
		b.ReportMetric(med(wall[j]), "wall_s_"+kn)
		b.ReportMetric(med(cpu[j]), "cpu_s_"+kn)
		if j > 0 {
			b.ReportMetric(med(wall[0])/med(wall[j]), "x_wall_"+kn+"_vs_"+ks[0])
			b.ReportMetric(med(cpu[0])/med(cpu[j]), "x_cpu_"+kn+"_vs_"+ks[0])
		}
	}
}

const moeBenchEnv = "QPPL_WRITE_MOE_BENCH_MODEL"

// moeBenchOptions is a qwen3_moe fixture with 64 experts of width 256 on
// both layers, top 4: 2·64·3·256·256 = 25.2M expert weights (201 MB as
// float64, 100 MB as F32), 13 MB packed as W4A16.
func moeBenchOptions() fixtures.Options {
	o, _ := fixtures.Defaults("qwen3_moe")
	o.Vocab, o.Hidden, o.Intermediate, o.HeadDim, o.Init = 1024, 256, 512, 64, fixtures.InitRandom
	o.Config = map[string]any{"num_experts": 64, "num_experts_per_tok": 4, "moe_intermediate_size": 256, "mlp_only_layers": []int{}}
	return o
}

// TestWriteMoEBenchModel is a helper of BenchmarkMoE_W4A16_PeakRSS (run in
// a child process so that writing the model does not count in the peak).
func TestWriteMoEBenchModel(t *testing.T) {
	dir := os.Getenv(moeBenchEnv)
	if dir == "" {
		t.Skip("helper for BenchmarkMoE_W4A16_PeakRSS")
	}
	dense := filepath.Join(dir, "dense")
	if err := fixtures.Write(dense, moeBenchOptions()); err != nil {
		t.Fatal(err)
	}
	if err := quantizer.Quantize(dense, filepath.Join(dir, "w4a16"), "W4A16", quantizer.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkMoE_W4A16_PeakRSS scores one 256-token window of a W4A16
// qwen3_moe (moeBenchOptions) with the reference and reports the process's
// peak RSS next to the packed checkpoint size and the float64 size of all
// experts: the reference keeps the checkpoint packed and decodes one
// expert matrix at a time (TestMixtureMemory checks the scratch size).
func BenchmarkMoE_W4A16_PeakRSS(b *testing.B) {
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteMoEBenchModel$", "-test.count=1")
	cmd.Env = append(os.Environ(), moeBenchEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("generating the model: %v\n%s", err, out)
	}
	q := filepath.Join(dir, "w4a16")
	m, err := arch.OpenDir(q)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	be, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	toks := make([]int32, 256)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range toks {
		toks[i] = int32(r.IntN(1024))
	}
	w := backends.Window{Tokens: toks, First: 1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := be.Score(context.Background(), w, backends.Request{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st, err := os.Stat(filepath.Join(q, "model.safetensors"))
	if err != nil {
		b.Fatal(err)
	}
	o := moeBenchOptions()
	experts := float64(o.Layers*64*3*256*o.Hidden) * 8
	b.ReportMetric(peakRSSMB(), "peakRSS_MB")
	b.ReportMetric(float64(st.Size())/(1<<20), "packed_MB")
	b.ReportMetric(experts/(1<<20), "experts_f64_MB")
	b.ReportMetric(float64(be.m.scratch*8)/(1<<20), "scratch_MB")
}

// windowFLOP counts 2× the multiply-adds of one window of T tokens with
// `scored` head rows: the Linears, attention in 64-row blocks over the keys
// each block sees (q·kᵀ and p·v), and the head.
func (m *model) windowFLOP(T, scored int) float64 {
	d := m.dims
	hd, kvd := d.H*d.D, d.KV*d.D
	linear := float64(d.C*hd + 2*d.C*kvd + hd*d.C + 3*d.C*d.I)
	var att float64
	for r0 := 0; r0 < T; r0 += 64 {
		r1 := min(T, r0+64)
		att += 2 * float64((r1-r0)*r1*d.D)
	}
	return 2 * (float64(d.L)*(float64(T)*linear+float64(d.H)*att) + float64(scored*d.V*d.C))
}
