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
	// launch dequantizes into dst (N×K of odt) given the device pointers of bufs.
	launch func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error
	act    *actParams
}

func (h *hostLinear) bytes() int64 {
	var n int64
	for _, b := range h.bufs {
		n += int64(len(b))
	}
	return n
}

func grid1(n int) (device.Dim3, device.Dim3) {
	blocks := (n + 255) / 256
	if blocks > 4096 {
		blocks = 4096
	}
	if blocks < 1 {
		blocks = 1
	}
	return device.D1(blocks), device.D1(256)
}

func nilPtr(p []device.Ptr, i int) device.Ptr {
	if i < len(p) {
		return p[i]
	}
	return 0
}

// prepareLinear converts a quant.Linear into its device representation for
// GEMM dtype odt.
func prepareLinear(l quant.Linear, odt device.DType) (*hostLinear, error) {
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
	N, K := int32(out), int32(in)
	n := out * in
	switch q := l.(type) {
	case *quant.Dense:
		idt, ok := dtypeCode(q.DType)
		raw := q.Raw
		if !ok { // F64: the GPU computes in at most fp32
			if q.DType != "F64" {
				return nil, fmt.Errorf("cuda: %s: dense dtype %s", h.module, q.DType)
			}
			vals := make([]float64, n)
			if err := q.Dequantize(vals); err != nil {
				return nil, err
			}
			raw, idt = f64ToF32Bytes(vals), device.F32
		}
		h.bufs = [][]byte{raw}
		if idt == odt {
			h.direct = true
			return h, nil
		}
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqDense, g, b, 0, dst, int32(odt), p[0], int32(idt), N, K)
		}
	case *quant.PackedInt:
		sdt, ok := dtypeCode(q.ScaleDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: scale dtype %s", h.module, q.ScaleDType)
		}
		h.bufs = [][]byte{u32Bytes(q.Packed), encodeAs(sdt, q.Scale)}
		zmode := int32(0)
		if q.Zero != nil {
			zb := make([]byte, len(q.Zero))
			for i, z := range q.Zero {
				if z < -128 || z > 127 {
					return nil, fmt.Errorf("cuda: %s: zero point %d outside int8", h.module, z)
				}
				zb[i] = byte(int8(z))
			}
			h.bufs = append(h.bufs, zb)
			zmode = 2
		}
		gidx := -1
		if q.GIdx != nil {
			gidx = len(h.bufs)
			h.bufs = append(h.bufs, i32Bytes(q.GIdx))
		}
		vpw := int32(0)
		if q.Legacy {
			vpw = int32(32 / q.Bits)
		}
		groups, gs := int32(q.Groups), int32(q.GroupSize)
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			var zp, gi device.Ptr
			if zmode != 0 {
				zp = p[2]
			}
			if gidx >= 0 {
				gi = p[gidx]
			}
			return d.Launch(device.KDqCTPack, g, b, 0, dst, int32(odt), N, K, p[0], int32(q.WordsPerRow), int32(q.Bits), vpw,
				p[1], int32(sdt), groups, gs, gi, zmode, zp, int32(0))
		}
	case *quant.UnpackedInt:
		sdt, ok := dtypeCode(q.ScaleDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: scale dtype %s", h.module, q.ScaleDType)
		}
		if q.GIdx != nil {
			return nil, fmt.Errorf("cuda: %s: g_idx on int-quantized weights is not implemented", h.module)
		}
		codes := make([]byte, len(q.Codes))
		for i, c := range q.Codes {
			codes[i] = byte(c)
		}
		h.bufs = [][]byte{codes, encodeAs(sdt, q.Scale)}
		if q.Zero != nil {
			zb := make([]byte, len(q.Zero))
			for i, z := range q.Zero {
				zb[i] = byte(int8(z))
			}
			h.bufs = append(h.bufs, zb)
		}
		bw, groups := int32(q.GroupSize), int32(q.Groups)
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqInt8, g, b, 0, dst, int32(odt), N, K, p[0], p[1], int32(sdt), int32(1), bw, groups, nilPtr(p, 2))
		}
	case *quant.FP8:
		sdt, ok := dtypeCode(q.ScaleDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: scale dtype %s", h.module, q.ScaleDType)
		}
		h.bufs = [][]byte{q.Codes, encodeAs(sdt, q.Scale)}
		bh, bw, sc := int32(q.BlockRows), int32(q.BlockCols), int32(q.ScaleCols)
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqFP8, g, b, 0, dst, int32(odt), N, K, p[0], p[1], int32(sdt), bh, bw, sc)
		}
	case *quant.NVFP4:
		rdt, ok := dtypeCode(q.OutDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: NVFP4 output dtype %s", h.module, q.OutDType)
		}
		h.bufs = [][]byte{q.Packed, q.Scales}
		gsc := q.GlobalScale
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqNVFP4, g, b, 0, dst, int32(odt), N, K, p[0], p[1], gsc, int32(0), int32(rdt))
		}
	case *quant.MXFP4:
		h.bufs = [][]byte{q.Packed, q.Scales}
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqNVFP4, g, b, 0, dst, int32(odt), N, K, p[0], p[1], float32(1), int32(1), int32(device.F32))
		}
	case *quant.GPTQ:
		sdt, ok := dtypeCode(q.ScaleDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: scale dtype %s", h.module, q.ScaleDType)
		}
		if 32%q.Bits != 0 {
			return nil, fmt.Errorf("cuda: %s: %d-bit GPTQ is not implemented", h.module, q.Bits)
		}
		h.bufs = [][]byte{u32Bytes(q.QWeight), u32Bytes(q.QZeros), encodeAs(sdt, q.Scales), i32Bytes(q.GIdx)}
		v1 := int32(1)
		if q.V2 {
			v1 = 0
		}
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqGPTQ, g, b, 0, dst, int32(odt), N, K, p[0], p[1], p[2], int32(sdt), p[3], int32(q.Bits), v1)
		}
	case *quant.AWQ:
		sdt, ok := dtypeCode(q.ScaleDType)
		if !ok {
			return nil, fmt.Errorf("cuda: %s: scale dtype %s", h.module, q.ScaleDType)
		}
		h.bufs = [][]byte{u32Bytes(q.QWeight), u32Bytes(q.QZeros), encodeAs(sdt, q.Scales)}
		gs := int32(q.GroupSize)
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, odt device.DType) error {
			g, b := grid1(n)
			return d.Launch(device.KDqAWQ, g, b, 0, dst, int32(odt), N, K, p[0], p[1], p[2], int32(sdt), gs)
		}
	default:
		return nil, fmt.Errorf("cuda: %s: format %s (%T) has no kernel", h.module, l.Format(), l)
	}
	return h, nil
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
func (l *devLinear) weight(d device.Device, scratch device.Ptr, odt device.DType) (device.Ptr, error) {
	if l.direct {
		return l.ptrs[0], nil
	}
	if err := l.launch(d, l.ptrs, scratch, odt); err != nil {
		return 0, fmt.Errorf("cuda: dequantizing %s (%s): %w", l.module, l.format, err)
	}
	return scratch, nil
}
