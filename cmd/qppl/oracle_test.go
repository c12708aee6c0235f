package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/internal/oracle"
)

// TestEvalMatchesOracle is issue 2's acceptance check, end to end through
// the command line: `qppl eval --tokens --nll-out` on a fixture of every
// architecture gives, token for token, the NLL of the independent
// from-scratch float64 forward pass (internal/oracle) on windows built here
// by hand from compare_q's definition, to 1e-9.
func TestEvalMatchesOracle(t *testing.T) {
	const n, ctx, stride = 70, 24, 16 // range(0, 46, 16): windows at 0, 16, 32
	for _, a := range fixtures.Architectures() {
		t.Run(a, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), a)
			o, err := fixtures.Defaults(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := fixtures.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, uint64(len(a))))
			tokens := make([]int32, n)
			for i := range tokens {
				tokens[i] = int32(rng.IntN(o.Vocab))
			}
			tokFile := filepath.Join(t.TempDir(), "t.i32")
			if err := dataset.WriteTokens(tokFile, tokens); err != nil {
				t.Fatal(err)
			}
			nllFile := filepath.Join(t.TempDir(), "nll.f64")
			var stdout, stderr bytes.Buffer
			code := run([]string{"qppl", "eval", "--model", dir, "--tokens", tokFile,
				"--ctx", strconv.Itoa(ctx), "--stride", strconv.Itoa(stride), "--nll-out", nllFile}, nil, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("eval exit %d: %s", code, stderr.String())
			}
			raw, err := os.ReadFile(nllFile)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float64, len(raw)/8)
			for i := range got {
				got[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}

			m, err := arch.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var want []float64
			for start := 0; start < n-ctx; start += stride { // for a in range(0, n-ctx, stride)
				w := tokens[start : start+ctx]
				lp, err := oracle.LogProbs(m.Config, m.ReadFloat64, w, oracle.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for p := 1; p < ctx; p++ { // targets 1..ctx-1
					want = append(want, -lp[p-1][w[p]])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("--nll-out holds %d values, want %d (3 windows × %d targets)", len(got), len(want), ctx-1)
			}
			for i := range want {
				if d := math.Abs(got[i] - want[i]); !(d <= 1e-9) {
					t.Fatalf("token %d (window %d, target %d): eval NLL %.15g, oracle %.15g, |diff| %.3g",
						i, i/(ctx-1), 1+i%(ctx-1), got[i], want[i], d)
				}
			}
		})
	}
}
