package reference

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gemm"
	"github.com/qppl/qppl/quant"
)

// bitsEqual fails on the first element whose bits differ.
func bitsEqual(t *testing.T, what string, got, want [][]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for p := range want {
		for v := range want[p] {
			if math.Float64bits(got[p][v]) != math.Float64bits(want[p][v]) {
				t.Fatalf("%s: pos %d id %d: %v, want %v (bits differ)", what, p, v, got[p][v], want[p][v])
			}
		}
	}
}

// everyKernel returns every gemm kernel this CPU runs, the Go fallback
// first, and fails when an assembly kernel that the CPU's features support
// dropped out at its start-up bit-for-bit check: the bit tests below would
// otherwise pass without ever running it.
func everyKernel(t *testing.T) []string {
	t.Helper()
	if u := gemm.Unverified(); len(u) > 0 {
		t.Fatalf("gemm kernels %v are supported by this CPU but failed their start-up check (offered: %v)", u, gemm.Kernels())
	}
	ks := gemm.Kernels()
	t.Logf("gemm kernels compared: %v", ks)
	return ks
}

// TestForwardBitIdenticalAcrossKernelsAndThreads: whole forward passes
// (every log-prob of a 150-token window, GQA, qwen3 q/k norms, biases) give
// the same bits with every gemm kernel this CPU runs (assembly and the Go
// fallback) and 1, 2 and 7 goroutines.
func TestForwardBitIdenticalAcrossKernelsAndThreads(t *testing.T) {
	cfg := *testConfigs()["qwen3-qknorm-headdim6"]
	cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.HeadDim = 64, 192, 300, 16
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 6, 2
	src := randomWeights(&cfg, 5)
	toks := randomTokens(150, cfg.VocabSize, 6)
	var want [][]float64
	for _, kn := range everyKernel(t) {
		for _, th := range []int{1, 2, 7} {
			b, err := newBackendKernel(&cfg, src, th, kn)
			if err != nil {
				t.Fatal(err)
			}
			got := allLogProbs(t, b, toks)
			if want == nil {
				want = got
				continue
			}
			bitsEqual(t, fmt.Sprintf("kernel %s threads %d", kn, th), got, want)
		}
	}
}

// TestTinyWT2MistralNLLBitIdentical: the trained model of ../shared, a
// 256-token window of the golden token stream: the NLL of every target has
// the same bits with every kernel and 1, 2 and 7 goroutines.
func TestTinyWT2MistralNLLBitIdentical(t *testing.T) {
	dir := sharedPath("models", "tiny-wt2-mistral")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("tiny-wt2-mistral not found: %v", err)
	}
	toks := readTokens(t, sharedPath("golden", "tokens", "mistral.test-joined.special1.i32"), 256)
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	var want []float64
	for _, kn := range everyKernel(t) {
		for _, th := range []int{1, 2, 7} {
			b, err := newBackendKernel(m.Config, checkpointSource{m: m, scheme: scheme}, th, kn)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = sc.NLL
				continue
			}
			for i := range want {
				if math.Float64bits(sc.NLL[i]) != math.Float64bits(want[i]) {
					t.Fatalf("kernel %s threads %d: NLL[%d] = %v, want %v", kn, th, i, sc.NLL[i], want[i])
				}
			}
		}
	}
	if len(gemm.Kernels()) < 2 {
		t.Logf("only the Go kernel runs here: thread counts compared, kernels not")
	}
}

// crossArchEnv names a directory shared by test runs on different GOARCHes
// (make arm64-check): the first run writes each test's hash of result bits
// there, later runs (e.g. the arm64 test binary under qemu) must match it.
const crossArchEnv = "QPPL_CROSSARCH_DIR"

func crossArch(t *testing.T, name string, bits []float64) {
	t.Helper()
	h := uint64(14695981039346656037) // FNV-1a over the bits
	for _, v := range bits {
		u := math.Float64bits(v)
		for i := 0; i < 8; i++ {
			h ^= u >> (8 * i) & 0xff
			h *= 1099511628211
		}
	}
	dir := os.Getenv(crossArchEnv)
	if dir == "" {
		t.Logf("%s: hash of %d result bits %#016x (set %s to compare across GOARCHes)", name, len(bits), h, crossArchEnv)
		return
	}
	path := filepath.Join(dir, name+".hash")
	got := fmt.Sprintf("%#016x %d\n", h, len(bits))
	want, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: wrote %s (%s)", name, path, runtime.GOARCH)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("%s on %s: result bits hash %q, another GOARCH wrote %q", name, runtime.GOARCH, got, want)
	}
	t.Logf("%s on %s: same bits as %s", name, runtime.GOARCH, path)
}

// TestCrossArchBits hashes every log-prob of a synthetic window, KL
// divergences between its positions, and the NLLs of a tiny-wt2-mistral
// window, after checking that every gemm kernel of this CPU (Go fallback,
// AVX2, AVX-512 / NEON) gives the same bits; with QPPL_CROSSARCH_DIR set,
// runs on different GOARCHes must produce the same hashes (make
// arm64-check runs the amd64 binary, then the arm64 one under qemu).
func TestCrossArchBits(t *testing.T) {
	cfg := *testConfigs()["qwen3-qknorm-headdim6"]
	cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.HeadDim = 64, 192, 300, 16
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 6, 2
	// randomWeights' values depend on the GOARCH (NormFloat64, and
	// mean + x·sd may be fused): redraw every tensor from bits alone.
	src := randomWeights(&cfg, 5)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, name := range slices.Sorted(maps.Keys(src.t)) {
		mt := src.t[name]
		for i := range mt.data {
			u := float64(rng.Uint64()>>11)*0x1p-53 - 0.5 // exact
			switch {
			case len(mt.shape) == 2:
				mt.data[i] = u * 0.25
			case strings.HasSuffix(name, "norm.weight"):
				mt.data[i] = 1 + float64(u*0.2)
			default:
				mt.data[i] = u * 0.2
			}
		}
	}
	// Every kernel this CPU runs must give the same bits; the hash then
	// compares them with the other GOARCH's.
	var rows [][]float64
	for _, kn := range everyKernel(t) {
		b, err := newBackendKernel(&cfg, src, 2, kn)
		if err != nil {
			t.Fatal(err)
		}
		got := allLogProbs(t, b, randomTokens(100, cfg.VocabSize, 6))
		if rows == nil {
			rows = got
			continue
		}
		bitsEqual(t, "synthetic log-probs, kernel "+kn, got, rows)
	}
	var all []float64
	for _, row := range rows {
		all = append(all, row...)
	}
	crossArch(t, "synthetic-qwen3-logprobs", all)
	// KL divergence as Score computes it against a base store: each
	// position's distribution against the next one's.
	kls := make([]float64, len(rows)-1)
	probs := make([]float64, cfg.VocabSize)
	for i := range kls {
		var err error
		if kls[i], err = klDiv(rows[i], rows[i+1], probs); err != nil {
			t.Fatal(err)
		}
	}
	crossArch(t, "synthetic-qwen3-kl", kls)

	dir := sharedPath("models", "tiny-wt2-mistral")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("tiny-wt2-mistral not found: %v", err)
	}
	toks := readTokens(t, sharedPath("golden", "tokens", "mistral.test-joined.special1.i32"), 128)
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tb, err := New(m, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := tb.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := quant.Parse(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, kn := range gemm.Kernels() {
		b, err := newBackendKernel(m.Config, checkpointSource{m: m, scheme: scheme}, 2, kn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
		if err != nil {
			t.Fatal(err)
		}
		bitsEqual(t, "tiny-wt2-mistral NLL, kernel "+kn, [][]float64{got.NLL}, [][]float64{sc.NLL})
	}
	crossArch(t, "tiny-wt2-mistral-nll", sc.NLL)
}
