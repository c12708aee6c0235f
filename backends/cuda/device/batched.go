package device

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// BatchedGemm is, for b < Batch, the row-major product
//
//	C_b[M][N] (+)= Alpha · A_b[M][K] · op(B_b)
//
// with A_b at A + b·StrideA elements (row stride LDA), op(B_b) = B_b[N][K]ᵀ
// when TransB (row stride LDB), else B_b[K][N], and C_b fp32 at
// C + b·StrideC elements (row stride LDC). Products are accumulated in
// fp32 (cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F on a GPU; the
// emulator sums in increasing k). Strides and leading dimensions count
// elements of the operand's type. AType and BType must be equal.
type BatchedGemm struct {
	M, N, K                   int
	A, B, C                   Ptr
	AType, BType              DType
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int64
	Batch                     int
	TransB                    bool
	Alpha                     float32
	Accumulate                bool
}

// Validate checks shapes, leading dimensions and types.
func (g BatchedGemm) Validate() error {
	switch {
	case g.M <= 0 || g.N <= 0 || g.K <= 0 || g.Batch <= 0:
		return fmt.Errorf("batched gemm: bad shape M=%d N=%d K=%d batch %d", g.M, g.N, g.K, g.Batch)
	case g.AType != g.BType:
		return fmt.Errorf("batched gemm: mixed input types %v and %v", g.AType, g.BType)
	case g.A == 0 || g.B == 0 || g.C == 0:
		return errors.New("batched gemm: nil operand")
	case g.LDA < g.K || g.LDC < g.N || (g.TransB && g.LDB < g.K) || (!g.TransB && g.LDB < g.N):
		return fmt.Errorf("batched gemm: leading dimensions %d/%d/%d too small for M=%d N=%d K=%d", g.LDA, g.LDB, g.LDC, g.M, g.N, g.K)
	case g.StrideA < 0 || g.StrideB < 0 || g.StrideC < 0:
		return errors.New("batched gemm: negative stride")
	}
	return nil
}

// Extents returns the number of elements of A, B and C the product
// touches from their base pointers.
func (g BatchedGemm) Extents() (a, b, c int64) {
	a = int64(g.Batch-1)*g.StrideA + int64(g.M-1)*int64(g.LDA) + int64(g.K)
	if g.TransB {
		b = int64(g.Batch-1)*g.StrideB + int64(g.N-1)*int64(g.LDB) + int64(g.K)
	} else {
		b = int64(g.Batch-1)*g.StrideB + int64(g.K-1)*int64(g.LDB) + int64(g.N)
	}
	c = int64(g.Batch-1)*g.StrideC + int64(g.M-1)*int64(g.LDC) + int64(g.N)
	return a, b, c
}

// BatchedGemmer is a Device that runs strided batched GEMMs (the
// tensor-core attention's QKᵀ and PV products). Both the GPU and the
// emulator implement it.
type BatchedGemmer interface {
	BatchedGemm(g BatchedGemm) error
}

// ArgSlots converts launch arguments (already checked by CheckArgs) to
// 8-byte little-endian parameter slots, a 4-byte scalar in the low bytes.
func ArgSlots(args []any) []uint64 {
	s := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case Ptr:
			s[i] = uint64(v)
		case int32:
			s[i] = uint64(uint32(v))
		case uint32:
			s[i] = uint64(v)
		case float32:
			s[i] = uint64(math.Float32bits(v))
		}
	}
	return s
}

// FormatArgs renders launch arguments for an error message (pointers in
// hex).
func FormatArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if p, ok := a.(Ptr); ok {
			parts[i] = fmt.Sprintf("%#x", uint64(p))
		} else {
			parts[i] = fmt.Sprint(a)
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
