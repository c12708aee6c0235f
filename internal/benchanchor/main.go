// Command benchanchor is `make bench`'s whole-process benchmark of the
// float64 reference against its anchor, PyTorch float64 + OpenBLAS
// (../shared/bench): it generates the benchmark models with qppl fixture /
// qppl quantize (cached in -dir), then, interleaved -repeats times, runs
// bench_torch.py and `qppl eval` on the same 512-token window and prints
// `go test -bench`-style result lines (ratio torch/qppl, tokens/s, GFLOP/s,
// % of the machine's float64 peak, peak RSS) that mk/bench.mk tabulates.
//
// Core scaling: each repeat also runs `qppl eval` with GOMAXPROCS=1, right
// after the run on all the cores the benchmark may use (N), and reports the
// forward pass's speed-up t(1)/t(N) (the eval JSON's timing: forward, head
// and scoring, model load excluded) and its efficiency speed-up/N (goal ≥
// 0.8). Both come from the same repeats, interleaved, so they see the same
// machine load; on a shared machine they are still only indicative.
//
// The ratio follows ../shared/bench/README.md: torch's forward time (median
// of its timed runs, model load and warm-up excluded) over qppl's whole
// process (start-up, load, tokens, forward, head, report). Each repeat runs
// the two back to back, so both see the same machine load.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/qppl/qppl/internal/atomicfile"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gemm"
)

// shape is one benchmark model.
type shape struct {
	name    string   // result name
	fixture []string // qppl fixture arguments (without --out)
	scheme  string   // qppl quantize scheme, "" for the dense fixture
	torch   bool     // time the PyTorch anchor too (dense only)
}

var shapes = map[string]shape{
	"smollm2": {name: "SmolLM2_135M_BF16", fixture: []string{"--preset", "smollm2", "--init", "random", "--seed", "0"}, torch: true},
	"llama1b": {name: "Llama_1B_W4A16", fixture: []string{"--arch", "llama", "--vocab", "128256", "--hidden", "2048",
		"--intermediate", "8192", "--layers", "16", "--heads", "32", "--kv-heads", "8", "--max-pos", "2048",
		"--dtype", "bf16", "--tied", "--init", "random", "--seed", "0"}, scheme: "W4A16"},
}

func main() {
	qppl := flag.String("qppl", "bin/qppl", "qppl binary")
	shared := flag.String("shared", "../shared", "the shared data folder (bench/ holds the PyTorch anchor)")
	dir := flag.String("dir", "", "folder caching the generated models (default: a temporary folder)")
	names := flag.String("shapes", "smollm2,llama1b", "comma-separated: smollm2, llama1b")
	repeats := flag.Int("repeats", 2, "interleaved torch/qppl(N threads)/qppl(1 thread) rounds per shape")
	threads := flag.Int("threads", 2, "threads for torch (qppl uses GOMAXPROCS)")
	n := flag.Int("n", 512, "window length")
	flag.Parse()
	if err := run(*qppl, *shared, *dir, *names, *repeats, *threads, *n); err != nil {
		fmt.Fprintln(os.Stderr, "benchanchor:", err)
		os.Exit(1)
	}
}

func run(qppl, shared, dir, names string, repeats, threads, n int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "qppl-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	peak := gemm.MachinePeak()
	fmt.Printf("# machine float64 peak %.1f GFLOP/s = %d cores × %d FLOP/cycle (%s) × %.3f GHz (%s); gemm kernel %s\n",
		peak.GFLOPs(), peak.Cores, peak.FlopsPerCycle, peak.Features, peak.GHz, peak.ClockSource, gemm.New(1).Kernel())
	torchOK := torchAvailable(shared)
	for _, name := range strings.Split(names, ",") {
		sh, ok := shapes[name]
		if !ok {
			return fmt.Errorf("unknown shape %q", name)
		}
		model, err := prepare(qppl, dir, name, sh)
		if err != nil {
			return err
		}
		m, err := checkpoint.OpenDir(model)
		if err != nil {
			return err
		}
		cfg := m.Config
		m.Close()
		toks := filepath.Join(dir, fmt.Sprintf("tokens-%d-%d.i32", cfg.VocabSize, n+1))
		if err := writeTokens(toks, n+1, cfg.VocabSize); err != nil {
			return err
		}
		flop := forwardFLOP(cfg, n)
		doTorch := sh.torch && torchOK
		if sh.torch && !torchOK {
			fmt.Printf("# %s: PyTorch anchor skipped: /usr/bin/python3 cannot import torch and numpy (apt-get install -y python3-torch python3-numpy)\n", sh.name)
		}
		var tq, tt, ratios, qcpu, tcpu, rss, fwdN, fwd1, qcpu1, outside []float64
		for r := 0; r < repeats; r++ {
			load0 := loadavg()
			if doTorch {
				fwd, cpu, err := runTorch(shared, dir, model, toks, n, threads)
				if err != nil {
					return err
				}
				tt, tcpu = append(tt, fwd), append(tcpu, cpu)
			}
			wall, cpu, maxrss, fwd, err := runQppl(qppl, dir, model, toks, n, 0)
			if err != nil {
				return err
			}
			tq, qcpu, rss, fwdN = append(tq, wall), append(qcpu, cpu), append(rss, maxrss), append(fwdN, fwd)
			outside = append(outside, wall-fwd)
			_, cpu1, _, fwd1r, err := runQppl(qppl, dir, model, toks, n, 1)
			if err != nil {
				return err
			}
			fwd1, qcpu1 = append(fwd1, fwd1r), append(qcpu1, cpu1)
			line := fmt.Sprintf("# %s repeat %d: qppl eval %.2f s wall, %.2f CPU-s, peak RSS %.0f MB; forward %.2f s on %d threads, %.2f s on 1 (×%.2f)",
				sh.name, r+1, wall, cpu, maxrss, fwd, peak.Cores, fwd1r, fwd1r/fwd)
			if doTorch {
				ratios = append(ratios, tt[r]/wall)
				line += fmt.Sprintf("; torch forward %.2f s (process %.2f CPU-s); ratio %.2f", tt[r], tcpu[r], tt[r]/wall)
			}
			fmt.Printf("%s; load average %s → %s\n", line, load0, loadavg())
		}
		q := median(tq)
		bench := "BenchmarkAnchor_" + sh.name + fmt.Sprintf("_T%d", n)
		if doTorch {
			fmt.Printf("%s/torch_f64_forward 1 %.0f ns/op %.2f tokens/s %.1f GFLOP/s %.1f %%peak %.2f process_cpu_s\n",
				bench, median(tt)*1e9, float64(n)/median(tt), flop/median(tt)/1e9, 100*flop/median(tt)/1e9/peak.GFLOPs(), median(tcpu))
		}
		line := fmt.Sprintf("%s/qppl_eval_process 1 %.0f ns/op %.2f tokens/s %.1f GFLOP/s %.1f %%peak %.0f peakRSS_MB %.0f packed_MB %.2f process_cpu_s %.2f outside_fwd_s %.1f fwd_%%peak",
			bench, q*1e9, float64(n)/q, flop/q/1e9, 100*flop/q/1e9/peak.GFLOPs(), slices.Max(rss), packedMB(model), median(qcpu), median(outside),
			100*flop/median(fwdN)/1e9/peak.GFLOPs())
		if doTorch {
			line += fmt.Sprintf(" %.2f x_torch", median(ratios))
		}
		fmt.Println(line)
		speedups := make([]float64, len(fwd1))
		for i := range fwd1 {
			speedups[i] = fwd1[i] / fwdN[i]
		}
		sp := median(speedups)
		fmt.Printf("%s/qppl_forward_scaling 1 %.0f ns/op %.2f fwd_s_1thread %.2f fwd_s_%dthreads %.2f speedup_%dthreads %.2f per_core_efficiency %.2f process_cpu_s_1thread %.2f process_cpu_s\n",
			bench, median(fwdN)*1e9, median(fwd1), median(fwdN), peak.Cores, sp, peak.Cores, sp/float64(peak.Cores), median(qcpu1), median(qcpu))
	}
	fmt.Println("# x_torch = torch float64 forward seconds / qppl whole-process seconds (median of interleaved pairs; > 1: qppl faster).")
	fmt.Printf("# fwd_%%peak: the FLOP count over the forward, head and scoring seconds of the eval JSON, against the peak above.\n")
	fmt.Println("# outside_fwd_s: whole-process wall seconds minus the forward, head and scoring (start-up, load, tokens, report; the model hash runs beside the forward).")
	fmt.Println("# packed_MB: the checkpoint's weight files; peakRSS_MB should stay near packed + activations + logits + panels.")
	fmt.Println("# process_cpu_s: CPU-seconds of the whole process (torch's runs the forward twice: warm-up and timed). Wall times and")
	fmt.Println("# x_torch vary with the machine's load: compare runs on a quiet machine.")
	fmt.Println("# speedup_N = forward seconds with GOMAXPROCS=1 / with N (median of interleaved pairs); per_core_efficiency = speedup/N (goal ≥ 0.8).")
	fmt.Println("# On a loaded machine the scheduler shares cores per thread, so speedup_N says little there; compare the process CPU-seconds.")
	return nil
}

// prepare generates (once) the model of a shape under dir.
func prepare(qppl, dir, name string, sh shape) (string, error) {
	dense := filepath.Join(dir, name+"-dense")
	if _, err := os.Stat(filepath.Join(dense, "config.json")); err != nil {
		args := append([]string{"fixture"}, sh.fixture...)
		if err := runQuiet(qppl, append(args, "--out", dense)...); err != nil {
			return "", err
		}
	}
	if sh.scheme == "" {
		return dense, nil
	}
	q := filepath.Join(dir, name+"-"+strings.ToLower(sh.scheme))
	if _, err := os.Stat(filepath.Join(q, "config.json")); err != nil {
		if err := runQuiet(qppl, "quantize", "--model", dense, "--scheme", sh.scheme, "--out", q); err != nil {
			return "", err
		}
	}
	return q, nil
}

func runQuiet(bin string, args ...string) error {
	fmt.Printf("# %s %s\n", bin, strings.Join(args, " "))
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return nil
}

// writeTokens writes n seeded random token ids below vocab.
func writeTokens(path string, n, vocab int) error {
	r := rand.New(rand.NewPCG(0, uint64(vocab)))
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(r.IntN(vocab)))
	}
	return atomicfile.WriteBytes(path, b, 0o644)
}

// forwardFLOP counts the multiply-adds (×2) of one qppl window of n
// tokens: every Linear on n positions, attention in 64-row blocks over the
// keys they can see, the head on the n−1 scored positions.
func forwardFLOP(c *checkpoint.Config, n int) float64 {
	C, I, V, L := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.VocabSize), float64(c.NumHiddenLayers)
	H, KV := c.NumAttentionHeads, c.NumKeyValueHeads
	if KV == 0 {
		KV = H
	}
	D := c.HeadDim
	if D == 0 {
		D = c.HiddenSize / H
	}
	hd, kvd := float64(H*D), float64(KV*D)
	linear := C*hd + 2*C*kvd + hd*C + 3*C*I
	var att float64
	for r0 := 0; r0 < n; r0 += 64 {
		r1 := min(n, r0+64)
		att += 2 * float64((r1-r0)*r1*D) // q·kᵀ and p·v
	}
	return 2 * (L*(float64(n)*linear+float64(H)*att) + float64(n-1)*V*C)
}

func torchAvailable(shared string) bool {
	if _, err := os.Stat(filepath.Join(shared, "bench", "bench_torch.py")); err != nil {
		return false
	}
	return exec.Command("/usr/bin/python3", "-c", "import torch, numpy").Run() == nil
}

// runTorch returns torch's forward seconds (median of its timed runs) and
// the CPU seconds of its whole process.
func runTorch(shared, dir, model, toks string, n, threads int) (float64, float64, error) {
	bench := filepath.Join(shared, "bench")
	js := filepath.Join(dir, "torch.json")
	cmd := exec.Command(filepath.Join(bench, "with_openblas.sh"), "/usr/bin/python3", filepath.Join(bench, "bench_torch.py"),
		"--model", model, "--n", fmt.Sprint(n), "--threads", fmt.Sprint(threads), "--repeats", "1",
		"--dtypes", "float64", "--tokens", toks, "--json", js)
	cmd.Env = append(os.Environ(), fmt.Sprintf("OPENBLAS_NUM_THREADS=%d", threads))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("bench_torch.py: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(js)
	if err != nil {
		return 0, 0, err
	}
	var out struct {
		Results map[string]struct {
			Median float64 `json:"seconds_median"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", js, err)
	}
	r, ok := out.Results["float64"]
	if !ok || !(r.Median > 0) {
		return 0, 0, fmt.Errorf("%s: no float64 result", js)
	}
	return r.Median, cpuOf(cmd.ProcessState), nil
}

// runQppl times one whole `qppl eval` process on the window (with
// GOMAXPROCS=procs when procs > 0) and returns also its forward seconds
// (the JSON's timing).
func runQppl(qppl, dir, model, toks string, n, procs int) (wall, cpu, maxrssMB, fwd float64, err error) {
	js := filepath.Join(dir, "qppl-eval.json")
	cmd := exec.Command(qppl, "eval", "--model", model, "--tokens", toks, "--ctx", fmt.Sprint(n),
		"--stride", fmt.Sprint(n), "--rows", "1", "--backend", "reference", "--json", js)
	if procs > 0 {
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", procs))
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("qppl eval: %v\n%s", err, stderr.String())
	}
	wall = time.Since(t0).Seconds()
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, 0, 0, errors.New("no rusage for qppl eval")
	}
	b, err := os.ReadFile(js)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	var out struct {
		Timing *struct {
			Seconds float64 `json:"seconds"`
		} `json:"timing"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%s: %w", js, err)
	}
	if out.Timing == nil || !(out.Timing.Seconds > 0) {
		return 0, 0, 0, 0, fmt.Errorf("%s: no timing", js)
	}
	return wall, cpuOf(cmd.ProcessState), float64(ru.Maxrss) / 1024, out.Timing.Seconds, nil
}

// packedMB is the size of the model's weight files (*.safetensors) in MB.
func packedMB(dir string) float64 {
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return float64(n) / (1 << 20)
}

func cpuOf(ps *os.ProcessState) float64 { return (ps.UserTime() + ps.SystemTime()).Seconds() }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:1], "")
}
