package device

import (
	"errors"
	"fmt"
)

// Ptr is a device address (a CUdeviceptr on the GPU, a host address of
// emulator-owned memory in emu). Ptr + n addresses the byte n further.
type Ptr uint64

// Dim3 is a CUDA launch dimension.
type Dim3 struct{ X, Y, Z int }

// D1 returns the one-dimensional Dim3{x,1,1}.
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

// Count returns X*Y*Z.
func (d Dim3) Count() int { return d.X * d.Y * d.Z }

// DType is an element type of a GEMM operand or of an activation buffer.
// The numeric values are the ones the kernels use (kernels/common.cuh).
type DType int32

const (
	F32  DType = 0
	BF16 DType = 1
	F16  DType = 2
)

// Size returns the element size in bytes.
func (t DType) Size() int {
	if t == F32 {
		return 4
	}
	return 2
}

func (t DType) String() string {
	switch t {
	case F32:
		return "fp32"
	case BF16:
		return "bf16"
	case F16:
		return "fp16"
	}
	return fmt.Sprintf("dtype(%d)", int32(t))
}

// ParseDType maps a --precision value to a DType.
func ParseDType(s string) (DType, error) {
	switch s {
	case "bf16", "":
		return BF16, nil
	case "fp16", "f16":
		return F16, nil
	case "fp32", "f32":
		return F32, nil
	}
	return 0, fmt.Errorf("unknown precision %q (want bf16, fp16 or fp32)", s)
}

// Gemm is C[M][N] (fp32, row-major, leading dimension N) =
// A[M][K] (row-major, type AType) · B[N][K]ᵀ (row-major, type BType),
// accumulated in fp32: C[m][n] = Σ_k A[m][k]·B[n][k]. If Accumulate is
// set the product is added to C instead of overwriting it. AType and BType
// must be equal (cuBLAS GemmEx has no mixed inputs).
type Gemm struct {
	M, N, K      int
	A, B, C      Ptr
	AType, BType DType
	Accumulate   bool
}

// Validate checks the shape and types.
func (g Gemm) Validate() error {
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return fmt.Errorf("gemm: bad shape M=%d N=%d K=%d", g.M, g.N, g.K)
	}
	if g.AType != g.BType {
		return fmt.Errorf("gemm: mixed input types %v and %v", g.AType, g.BType)
	}
	if g.AType.Size() == 0 || g.A == 0 || g.B == 0 || g.C == 0 {
		return errors.New("gemm: nil operand")
	}
	return nil
}

// Launch limits shared by every GPU the kernels target (compute
// capability 8.0 and later). The emulator enforces them too, so a launch
// that a GPU would refuse fails in the default build's tests.
const (
	MaxBlockThreads = 1024      // threads per block
	MaxBlockZ       = 64        // blockDim.z
	MaxGridX        = 1<<31 - 1 // gridDim.x
	MaxGridYZ       = 65535     // gridDim.y and gridDim.z
	// MaxDynamicShared is the dynamic shared memory a launch may request
	// without opting in through cuFuncSetAttribute (which the gpu package
	// does not do); the kernels' static __shared__ arrays (≤ 256 bytes)
	// count against the same 48 KB.
	MaxDynamicShared = 48<<10 - 256
)

// CheckGeometry checks a launch's grid, block and dynamic shared memory
// against the limits above.
func CheckGeometry(name string, grid, block Dim3, sharedBytes int) error {
	switch {
	case grid.X <= 0 || grid.Y <= 0 || grid.Z <= 0 || block.X <= 0 || block.Y <= 0 || block.Z <= 0:
		return fmt.Errorf("launch %s: bad geometry grid %v block %v", name, grid, block)
	case grid.X > MaxGridX || grid.Y > MaxGridYZ || grid.Z > MaxGridYZ:
		return fmt.Errorf("launch %s: grid %v exceeds the CUDA limits (x ≤ %d, y and z ≤ %d)", name, grid, MaxGridX, MaxGridYZ)
	case block.X > MaxBlockThreads || block.Y > MaxBlockThreads || block.Z > MaxBlockZ || block.Count() > MaxBlockThreads:
		return fmt.Errorf("launch %s: block %v exceeds the CUDA limits (%d threads, z ≤ %d)", name, block, MaxBlockThreads, MaxBlockZ)
	case sharedBytes < 0 || sharedBytes > MaxDynamicShared:
		return fmt.Errorf("launch %s: %d bytes of dynamic shared memory (limit %d without opt-in)", name, sharedBytes, MaxDynamicShared)
	}
	return nil
}

// ErrOutOfMemory is wrapped by Alloc when the device has no room.
var ErrOutOfMemory = errors.New("out of device memory")

// Device runs the kernels of backends/cuda/kernels.
//
// Arguments of Launch are Ptr (a device pointer), int32, uint32 or float32,
// in the order of the kernel's parameters (kernel signatures: Signatures).
type Device interface {
	Name() string
	Alloc(bytes int64) (Ptr, error)
	Free(p Ptr) error
	CopyIn(dst Ptr, src []byte) error  // host → device
	CopyOut(dst []byte, src Ptr) error // device → host
	Launch(kernel string, grid, block Dim3, sharedBytes int, args ...any) error
	Gemm(g Gemm) error
	Sync() error
	// MemInfo returns the free and total device memory in bytes.
	MemInfo() (free, total int64, err error)
	Close() error
}

// Reserver is an optional Device capability: memory the device needs for
// itself beyond the backend's allocations (a GPU's kernel local memory,
// library workspaces, allocation granularity). The memory plan leaves it
// free; a device without the method reserves nothing (the emulator).
type Reserver interface {
	Reserve() int64
}

// CheckArgs checks args against the signature string sig of kernel name:
// one letter per parameter, 'p' pointer, 'i' int32, 'u' uint32, 'f' float32.
func CheckArgs(name, sig string, args []any) error {
	if len(args) != len(sig) {
		return fmt.Errorf("launch %s: %d arguments, kernel takes %d (%s)", name, len(args), len(sig), sig)
	}
	for i, a := range args {
		var k byte
		switch a.(type) {
		case Ptr:
			k = 'p'
		case int32:
			k = 'i'
		case uint32:
			k = 'u'
		case float32:
			k = 'f'
		default:
			return fmt.Errorf("launch %s: argument %d has unsupported Go type %T", name, i, a)
		}
		if k != sig[i] {
			return fmt.Errorf("launch %s: argument %d is %c, kernel expects %c (signature %s)", name, i, k, sig[i], sig)
		}
	}
	return nil
}
