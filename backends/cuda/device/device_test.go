package device

import (
	"strings"
	"testing"
)

func TestParseDTypeAndGemmValidate(t *testing.T) {
	for s, want := range map[string]DType{"": BF16, "bf16": BF16, "fp16": F16, "f16": F16, "fp32": F32, "f32": F32} {
		if got, err := ParseDType(s); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseDType("fp8"); err == nil || !strings.Contains(err.Error(), "bf16, fp16 or fp32") {
		t.Errorf("ParseDType(fp8): %v", err)
	}
	ok := Gemm{M: 1, N: 2, K: 3, A: 8, B: 16, C: 24, AType: BF16, BType: BF16}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	for _, g := range []Gemm{{M: 0, N: 1, K: 1, A: 1, B: 1, C: 1}, {M: 1, N: 1, K: 1, A: 1, B: 1, C: 1, AType: F32, BType: BF16}, {M: 1, N: 1, K: 1, B: 1, C: 1}} {
		if g.Validate() == nil {
			t.Errorf("%+v accepted", g)
		}
	}
	for _, k := range Kernels() {
		if !strings.Contains(strings.Join(Sources(), " "), k.Source) || strings.Trim(k.Sig, "pifu") != "" {
			t.Errorf("kernel entry %+v", k)
		}
	}
}
