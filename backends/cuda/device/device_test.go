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

func TestCheckGeometry(t *testing.T) {
	for _, c := range []struct {
		grid, block Dim3
		shared      int
		want        string // "" = accepted
	}{
		{D1(1), D1(1), 0, ""},
		{Dim3{MaxGridX, MaxGridYZ, MaxGridYZ}, Dim3{32, 32, 1}, MaxDynamicShared, ""},
		{Dim3{1, MaxGridYZ + 1, 1}, D1(64), 0, "exceeds the CUDA limits"},
		{Dim3{1, 1, MaxGridYZ + 1}, D1(64), 0, "exceeds the CUDA limits"},
		{D1(MaxGridX + 1), D1(64), 0, "exceeds the CUDA limits"},
		{D1(1), D1(1025), 0, "1024 threads"},
		{D1(1), Dim3{64, 32, 1}, 0, "1024 threads"},
		{D1(1), Dim3{1, 1, 65}, 0, "1024 threads"},
		{D1(1), D1(32), 48 << 10, "dynamic shared memory"},
		{D1(1), D1(32), -1, "dynamic shared memory"},
		{Dim3{0, 1, 1}, D1(32), 0, "bad geometry"},
		{D1(1), Dim3{32, 0, 1}, 0, "bad geometry"},
	} {
		err := CheckGeometry("k", c.grid, c.block, c.shared)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("grid %v block %v shared %d: err = %v, want %q", c.grid, c.block, c.shared, err, c.want)
		}
	}
	// The attention kernel's largest request stays within the limit.
	for d := 1; d <= AttnMaxHead; d++ {
		if s := 2 * AttnTileK(d) * d * 4; s > MaxDynamicShared {
			t.Errorf("head_dim %d: attention asks for %d bytes of shared memory", d, s)
		}
	}
}
