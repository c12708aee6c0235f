package cuda

import (
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
)

// writeQuantized writes fixture arch (small sizes) and its quantization
// with scheme ("" = dense) and returns the model directory.
func writeQuantized(t *testing.T, arch, scheme string, bf16 bool) string {
	t.Helper()
	o, err := fixtures.Defaults(arch)
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab = 260
	if bf16 {
		o.DType = "BF16"
	}
	dense := filepath.Join(t.TempDir(), "dense")
	if err := fixtures.Write(dense, o); err != nil {
		t.Fatal(err)
	}
	if scheme == "" {
		return dense
	}
	q := filepath.Join(t.TempDir(), scheme)
	if err := quantizer.Quantize(dense, q, scheme, quantizer.Options{Seed: 3, GroupSize: groupSize(scheme)}); err != nil {
		t.Fatalf("%s %s: %v", arch, scheme, err)
	}
	return q
}

// TestSchemesAgainstReference: every architecture × every quantization
// scheme of fixtures/quantizer, emulated kernels in fp32 against the float64
// reference decoding the same files. Tolerances (docs/cuda.md): weight-only
// schemes max |ΔNLL| ≤ 2e-4, mean ≤ 2e-5 (measured ≤ 4e-5, one token of
// qwen3_5 BNB-NF4 1.5e-4 with mean 5.7e-6: fp32 rounding through the
// delta-rule recurrence); schemes with activation
// quantization max ≤ 5e-2 and mean ≤ 5e-3 (fp32 vs float64 inputs move an
// activation code across a rounding boundary now and then; each flip
// shifts the logits by about one code step: measured up to max 0.035,
// mean 9.8e-4 for mixtral BNB-INT8). The act_quant kernel itself is
// checked exactly in actquant_test.go. A fixture whose activations sit on
// rounding midpoints by construction fails here (the gemma tied bigram
// fixtures did: docs/cuda.md).
func TestSchemesAgainstReference(t *testing.T) {
	archs := cudaArchs(t)
	if testing.Short() {
		archs = archs[:1]
	}
	for _, a := range archs {
		for _, sc := range quantizer.Schemes() {
			dir := writeQuantized(t, a, sc, false)
			maxd, meand, _ := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64}, testTokens(64, 256, 9))
			tol, tolMean := 2e-4, 2e-5
			if quantizer.QuantizesActivations(sc) {
				tol, tolMean = 5e-2, 5e-3
			}
			t.Logf("%s %-14s max |ΔNLL| %.3g mean %.3g", a, sc, maxd, meand)
			if !(maxd <= tol && meand <= tolMean) { // NaN-safe
				t.Errorf("%s %s: max |ΔNLL| %.3g mean %.3g, tolerance %g, %g", a, sc, maxd, meand, tol, tolMean)
			}
		}
	}
}

// groupSize gives the group schemes groups of 32 so that the 64-wide
// fixture has several groups (and act-order permutes across them).
func groupSize(scheme string) int {
	switch scheme {
	case "W4A16", "W4A16-ASYM", "W4A16-ACTORDER", "GPTQ", "GPTQ-ACTORDER", "AWQ", "FP8-BLOCK", "AWQ-QUANT-CONFIG",
		"AUTOROUND-GPTQ", "AUTOROUND-AWQ", "AUTOROUND":
		return 32
	}
	return 0
}
