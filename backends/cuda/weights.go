package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// dtypeCode maps a safetensors float dtype to a kernel dtype code.
func dtypeCode(dt string) (device.DType, bool) {
	switch dt {
	case "F32":
		return device.F32, true
	case "BF16":
		return device.BF16, true
	case "F16":
		return device.F16, true
	}
	return 0, false
}

// encodeAs writes values (exact in dtype dt, as package quant decoded them
// from the checkpoint) back into dt's bytes.
func encodeAs(dt device.DType, v []float64) []byte {
	b := make([]byte, len(v)*dt.Size())
	for i, x := range v {
		switch dt {
		case device.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		case device.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(x))>>16))
		case device.F16:
			binary.LittleEndian.PutUint16(b[2*i:], f16Bits(float32(x)))
		}
	}
	return b
}

// f16Bits converts a float32 that is exactly representable in fp16.
func f16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a == 0:
		return sign
	case a >= 0x7f800000:
		return sign | 0x7c00 | uint16(a>>13)&0x3ff
	case a >= 0x38800000: // normal
		return sign | uint16((a-0x38000000)>>13)
	default: // subnormal: a multiple of 2^-24
		return sign | uint16(math.Float32frombits(a)*(1<<24))
	}
}

func u32Bytes(w []uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func i32Bytes(w []int32) []byte {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func f64ToF32Bytes(x []float64) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	}
	return b
}

// actParams are act_quant's arguments for one Linear's input quantizer.
type actParams struct {
	kind, gsize, dynamic, sym int32
	scale, zp, gscale         float32
	threshold                 float32 // AQLLMInt8: the outlier threshold
	// tensor: one dynamic symmetric scale for the whole input matrix
	// (act_amax + act_quant_tensor; its amax lives in the dequantization
	// scratch, which the weight only fills after the input is quantized)
	tensor bool
}

// gemmInput returns the act_quant kind the forward pass launches and the
// factor the GEMM output is then multiplied by (1: none). NVFP4 inputs are
// written as e2m1 · (E4M3 block scale), exact in every GEMM dtype, and the
// GEMM output is multiplied by 1/gscale: the order of an FP4 tensor-core
// GEMM (block-scaled products, global scales in the epilogue). Writing
// e2m1 · s/gscale in bf16 would round each input by up to 2^-9 relative,
// the same rounding in every token where a channel is constant, which can
// move a later Linear's E4M3 group scale across a rounding boundary in
// every row at once (TestNVFP4InputExactInGEMMDType).
func (p *actParams) gemmInput() (kind int32, post float32) {
	if p.kind == device.AQNVFP4 {
		return device.AQNVFP4Block, float32(1 / float64(p.gscale))
	}
	return p.kind, 1
}

func newActParams(module string, a quant.ActQuantizer) (*actParams, error) {
	if a == nil {
		return nil, nil
	}
	q, ok := a.(*quant.ActQuant)
	if !ok {
		return nil, fmt.Errorf("cuda: %s: unsupported activation quantizer %T", module, a)
	}
	p := &actParams{scale: float32(q.Scale), zp: float32(q.ZeroPoint), gscale: float32(q.GlobalScale)}
	if q.Dynamic {
		p.dynamic = 1
	}
	if q.Symmetric {
		p.sym = 1
	}
	switch q.Kind {
	case quant.ActInt:
		if q.Bits != 8 {
			return nil, fmt.Errorf("cuda: %s: %d-bit integer activations are not implemented (only 8)", module, q.Bits)
		}
		p.kind = device.AQInt8
	case quant.ActFP8:
		p.kind = device.AQFP8
	case quant.ActMXFP4:
		p.kind = device.AQMXFP4
		if q.Strategy != "group" || q.GroupSize != 32 || !q.Dynamic || !q.Symmetric {
			return nil, fmt.Errorf("cuda: %s: MXFP4 activations need dynamic symmetric groups of 32 (have %s, group %d)", module, q.Strategy, q.GroupSize)
		}
	case quant.ActLLMInt8:
		p.kind, p.threshold = device.AQLLMInt8, float32(q.Threshold)
		return p, nil
	case quant.ActFP4:
		p.kind = device.AQNVFP4
		if q.Strategy != "tensor_group" && q.Strategy != "group" || q.GroupSize != 16 || !q.Dynamic || !q.Symmetric {
			return nil, fmt.Errorf("cuda: %s: NVFP4 activations need dynamic symmetric groups of 16 (have %s, group %d)", module, q.Strategy, q.GroupSize)
		}
	default:
		return nil, fmt.Errorf("cuda: %s: activation kind %q", module, q.Kind)
	}
	switch {
	case !q.Dynamic:
		if q.Strategy != "tensor" {
			return nil, fmt.Errorf("cuda: %s: static activation scales with strategy %q are not implemented", module, q.Strategy)
		}
	case q.Strategy == "token":
	case q.Strategy == "tensor":
		if !q.Symmetric || (p.kind != device.AQInt8 && p.kind != device.AQFP8) {
			return nil, fmt.Errorf("cuda: %s: dynamic per-tensor activation scales are implemented for symmetric int8 and FP8 only", module)
		}
		p.tensor = true
	case q.Strategy == "group" || q.Strategy == "tensor_group":
		if !q.Symmetric {
			return nil, fmt.Errorf("cuda: %s: asymmetric group activation quantization is not implemented", module)
		}
		p.gsize = int32(q.GroupSize)
	default:
		return nil, fmt.Errorf("cuda: %s: dynamic activation strategy %q is not implemented", module, q.Strategy)
	}
	return p, nil
}

// hostLinear is a Linear's device representation before upload: the
// tensors' bytes (the checkpoint's packed bytes, scales re-encoded exactly in
// their stored dtype) and the dequantization launch that reads them.
type hostLinear struct {
	module  string
	out, in int
	format  string
	bufs    [][]byte
	// direct: a dense weight already in the GEMM dtype is multiplied as is.
	direct bool
	// launch dequantizes into dst (N×K of gemmDT) given the device pointers of bufs.
	launch func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error
	act    *actParams
}

func (h *hostLinear) bytes() int64 {
	var n int64
	for _, b := range h.bufs {
		n += int64(len(b))
	}
	return n
}

// prepareLinear converts a quant.Linear into its device representation for
// GEMM dtype gemmDT: the format's own file (dq_<format>.go) fills the buffers
// and the launch of its dequantization kernel.
func prepareLinear(l quant.Linear, gemmDT device.DType) (*hostLinear, error) {
	out, in := l.Shape()
	h := &hostLinear{module: l.Module(), out: out, in: in, format: l.Format()}
	var err error
	if h.act, err = newActParams(h.module, l.InputQuantizer()); err != nil {
		return nil, err
	}
	if h.act != nil && h.act.gsize > 0 && in%int(h.act.gsize) != 0 {
		// act_quant only writes whole groups: a partial one would leave
		// stale GEMM inputs (package quant refuses such checkpoints too)
		return nil, fmt.Errorf("cuda: %s: activation group size %d does not divide in_features %d", h.module, h.act.gsize, in)
	}
	for _, prepare := range dequantizers() {
		ok, err := prepare(l, h, gemmDT)
		if err != nil {
			return nil, err
		}
		if ok {
			return h, nil
		}
	}
	return nil, fmt.Errorf("cuda: %s: format %s (%T) has no kernel", h.module, l.Format(), l)
}

// A dequantizer prepares h for l when l is its format's Linear type (ok
// false otherwise): h.bufs, and h.launch or h.direct.
type dequantizer func(l quant.Linear, h *hostLinear, gemmDT device.DType) (ok bool, err error)

// dequantizers returns one entry per format (each in its dq_<format>.go
// beside kernels/dq_<format>.cu); a function, not a variable, so that
// nothing can change it.
func dequantizers() []dequantizer {
	return []dequantizer{prepareDense, prepareCTPack, prepareCTInt, prepareFP8, prepareNVFP4, prepareMXFP4, prepareGPTQ, prepareAWQ, prepareBNB4, prepareBNB8, prepareGGUF}
}

// scaleDType maps a format's scale dtype to a kernel dtype code.
func scaleDType(module, dt string) (device.DType, error) {
	sdt, ok := dtypeCode(dt)
	if !ok {
		return 0, fmt.Errorf("cuda: %s: scale dtype %s", module, dt)
	}
	return sdt, nil
}

// devLinear is an uploaded Linear.
type devLinear struct {
	*hostLinear
	ptrs []device.Ptr
}

func upload(d device.Device, h *hostLinear) (*devLinear, error) {
	dl := &devLinear{hostLinear: h}
	for i, b := range h.bufs {
		p, err := d.Alloc(int64(max(len(b), 1)))
		if err != nil {
			return nil, fmt.Errorf("cuda: %s: tensor %d: %w", h.module, i, err)
		}
		if err := d.CopyIn(p, b); err != nil {
			return nil, fmt.Errorf("cuda: %s: %w", h.module, err)
		}
		dl.ptrs = append(dl.ptrs, p)
	}
	h.bufs = nil // host copy no longer needed
	return dl, nil
}

// weight returns a device pointer to the GEMM operand: the stored weight
// itself or its dequantization into scratch.
func (l *devLinear) weight(d device.Device, scratch device.Ptr, gemmDT device.DType) (device.Ptr, error) {
	if l.direct {
		return l.ptrs[0], nil
	}
	if err := l.launch(d, l.ptrs, scratch, gemmDT); err != nil {
		return 0, fmt.Errorf("cuda: dequantizing %s (%s): %w", l.module, l.format, err)
	}
	return scratch, nil
}
