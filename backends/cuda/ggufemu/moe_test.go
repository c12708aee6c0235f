package ggufemu_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare/verify"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/ggufgen"
	"github.com/qppl/qppl/reference"
)

// TestGGUFMoEOnEmu: quantized GGUF files of the mixture-of-experts
// architectures (qwen3moe; llama with experts, i.e. mixtral), written by
// qppl's converter (byte for byte llama_model_quantize's,
// TestConvertQuantizedMatchesLlamaCpp) as Q8_0, Q4_K_M (q4_K, q5_K, q6_K
// and q8_0 mixed; the F32 router) and IQ4_XS. cuda.NewGGUF uploads every
// expert as its 2-D slice of the stacked ffn_*_exps blocks and decodes it
// with dq_ggml: (1) the emulator's NLL on the packed file equals, bit for
// bit, its NLL on the same file decoded to F32 (fp32 and bf16); (2)
// `qppl verify`'s comparison (verify.Run) of the emulator with the float64
// reference passes with verify's default tolerances in fp32, with max
// |ΔNLL| within the weight-only bound 1e-4 (docs/cuda.md).
func TestGGUFMoEOnEmu(t *testing.T) {
	for _, a := range []string{"qwen3_moe", "mixtral"} {
		dir, _ := ggufFixture(t, a, func(o *fixtures.Options) {
			o.Vocab, o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 300, 256, 256, 4, 2, 64
			o.Init = fixtures.InitRandom
			if a == "qwen3_moe" {
				o.Config["moe_intermediate_size"] = 256
			}
		})
		for _, ft := range []string{"Q8_0", "Q4_K_M", "IQ4_XS"} {
			t.Run(a+"/"+ft, func(t *testing.T) {
				q := filepath.Join(t.TempDir(), ft+".gguf")
				if err := gguf.ConvertFile(dir, q, gguf.ConvertOptions{FileType: ft}); err != nil {
					t.Fatal(err)
				}
				deq := filepath.Join(t.TempDir(), "deq.gguf")
				if err := ggufgen.Dequantize(q, deq); err != nil {
					t.Fatal(err)
				}
				m, md := openGGUF(t, q), openGGUF(t, deq)
				toks := testTokens(64, m.Config.VocabSize, 7)
				for _, prec := range []string{"fp32", "bf16"} {
					got, want := scoreNLL(t, emuGGUF(t, m, prec), toks), scoreNLL(t, emuGGUF(t, md, prec), toks)
					if j := sameBits(got, want); j >= 0 {
						t.Errorf("%s: packed NLL[%d] = %v, decoded F32 file %v", prec, j, got[j], want[j])
					}
				}
				ref, err := reference.NewGGUF(m, reference.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				ws := []backends.Window{{Index: 0, Tokens: toks, First: 16}}
				rep, err := verify.Run(context.Background(), ref, emuGGUF(t, m, "fp32"), ws, verify.Options{Tolerances: verify.DefaultTolerances("fp32", false), Layers: m.Spec.Layers, ProbeWindows: -1})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s fp32: max |ΔNLL| %.3g, mean %.3g, mean KL %.3g, PPL %.6g vs %.6g, top-1 %.3f", a, ft, rep.MaxAbsNLLDiff, rep.MeanAbsNLLDiff, rep.MeanKL, rep.PPL[0], rep.PPL[1], rep.Top1Agreement)
				if !rep.Pass {
					t.Errorf("verify fails: %v", rep.Failures)
				}
				if !(rep.MaxAbsNLLDiff <= 1e-4) {
					t.Errorf("fp32: max |ΔNLL| %.3g > 1e-4", rep.MaxAbsNLLDiff)
				}
			})
		}
	}
}
