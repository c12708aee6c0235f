package device

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const samplePTX = `
.version 7.8
.target sm_90
.address_size 64

	// .globl	rms_norm
.visible .entry rms_norm(
	.param .u64 rms_norm_param_0,
	.param .u64 rms_norm_param_1,
	.param .u64 rms_norm_param_2,
	.param .u32 rms_norm_param_3,
	.param .u32 rms_norm_param_4,
	.param .f32 rms_norm_param_5
)
{
	ret;
}
`

// TestCheckPTX: the embedded PTX's parameter lists are compared with the
// Go launch table; a kernel whose .cu changed without a rebuild (a
// parameter added, a type changed) or that is missing is an error naming it.
func TestCheckPTX(t *testing.T) {
	table := map[string]KernelInfo{KRMSNorm: {"pppiif", "norm"}}
	if err := CheckPTX("norm", []byte(samplePTX), table); err != nil {
		t.Fatalf("matching PTX refused: %v", err)
	}
	for _, c := range []struct {
		name, sig, want string
	}{
		{"extra Go argument", "pppiiff", "rms_norm has PTX parameters pppwwf, the Go launch table says pppwwff"},
		{"type changed", "pppfif", "the Go launch table says pppfwf"},
		{"unsigned matches 32-bit", "pppuif", ""},
	} {
		err := CheckPTX("norm", []byte(samplePTX), map[string]KernelInfo{KRMSNorm: {c.sig, "norm"}})
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
	err := CheckPTX("norm", []byte(samplePTX), map[string]KernelInfo{KRMSNorm: {"pppiif", "norm"}, "new_kernel": {"p", "norm"}})
	if err == nil || !strings.Contains(err.Error(), "kernel new_kernel is missing") {
		t.Errorf("missing kernel: %v", err)
	}
}

// TestBuiltPTXMatchesTable checks the PTX that `make cuda` / `make
// cuda-check` built (skipped when it has not been built): every kernel of
// Kernels() is in its source's module with the table's parameter list.
func TestBuiltPTXMatchesTable(t *testing.T) {
	dir := filepath.Join("..", "gpu", "ptx")
	table := Kernels()
	for _, src := range Sources() {
		ptx, err := os.ReadFile(filepath.Join(dir, src+".ptx"))
		if err != nil {
			t.Skipf("no built PTX (%v): run make cuda-check", err)
		}
		if err := CheckPTX(src, ptx, table); err != nil {
			t.Error(err)
		}
	}
}

func TestArgSlotsAndFormat(t *testing.T) {
	args := []any{Ptr(0x1000), int32(-1), uint32(7), float32(1.5)}
	s := ArgSlots(args)
	want := []uint64{0x1000, 0xffffffff, 7, 0x3fc00000}
	for i := range want {
		if s[i] != want[i] {
			t.Errorf("slot %d = %#x, want %#x", i, s[i], want[i])
		}
	}
	if f := FormatArgs(args); f != "(0x1000, -1, 7, 1.5)" {
		t.Errorf("FormatArgs = %s", f)
	}
}

// TestBatchedGemmValidate: shapes, leading dimensions and types.
func TestBatchedGemmValidate(t *testing.T) {
	ok := BatchedGemm{M: 2, N: 3, K: 4, A: 1, B: 1, C: 1, LDA: 4, LDB: 4, LDC: 3, StrideA: 8, StrideB: 12, StrideC: 6, Batch: 2, TransB: true, AType: BF16, BType: BF16}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b, c := ok.Extents()
	if a != 8+1*4+4 || b != 12+2*4+4 || c != 6+1*3+3 {
		t.Errorf("extents %d %d %d", a, b, c)
	}
	bad := ok
	bad.LDB = 3
	if bad.Validate() == nil {
		t.Error("LDB < K with TransB accepted")
	}
	bad = ok
	bad.TransB = false // B is [K][N]: LDB 4 ≥ N 3 is fine
	if err := bad.Validate(); err != nil {
		t.Error(err)
	}
	bad.BType = F32
	if bad.Validate() == nil {
		t.Error("mixed types accepted")
	}
}
