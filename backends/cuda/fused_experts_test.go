package cuda

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
)

// TestFusedExpertsEmu: the emulated backend reads experts stored fused and
// 3-D (experts.gate_up_proj, experts.down_proj: package quant opens each
// expert's gate, up and down rows as its own Linear, uploaded and addressed
// per expert) and gives the same NLL bits as the per-expert layout of the
// same weights, for every MoE family the CUDA backend computes.
func TestFusedExpertsEmu(t *testing.T) {
	toks := testTokens(40, 300, 6)
	for _, a := range []string{"qwen3_moe", "qwen3_5_moe"} {
		t.Run(a, func(t *testing.T) {
			nll := func(experts string) []float64 {
				o, err := fixtures.Defaults(a)
				if err != nil {
					t.Fatal(err)
				}
				o.Vocab, o.Init, o.Experts, o.DType = 300, fixtures.InitRandom, experts, checkpoint.BF16
				dir := filepath.Join(t.TempDir(), experts)
				if err := fixtures.Write(dir, o); err != nil {
					t.Fatal(err)
				}
				b, err := New(openModel(t, dir), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
				if err != nil {
					t.Fatal(err)
				}
				return sc.NLL
			}
			f, p := nll(fixtures.ExpertsFused), nll(fixtures.ExpertsPerExpert)
			for i := range f {
				if math.Float64bits(f[i]) != math.Float64bits(p[i]) {
					t.Fatalf("NLL[%d]: fused %v, per-expert %v", i, f[i], p[i])
				}
			}
		})
	}
}

// TestRefusesGemma4MoE: the Gemma 4 mixture of experts has no CUDA path
// yet; New refuses it naming the operation (a refusal that stays when the
// dense gemma4_text gains its kernels).
func TestRefusesGemma4MoE(t *testing.T) {
	o, err := fixtures.Defaults("gemma4_text")
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init, o.Variant = 300, fixtures.InitRandom, "moe"
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	_, err = New(openModel(t, dir), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64})
	if !errors.Is(err, arch.ErrUnsupported) || !strings.Contains(err.Error(), "mixture of experts") {
		t.Errorf("New: %v, want a refusal naming Gemma 4's mixture of experts", err)
	}
}
