package reference

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	for _, kn := range gemm.Kernels() {
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
	for _, kn := range gemm.Kernels() {
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
