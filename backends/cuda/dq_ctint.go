package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareCTInt uploads a compressed-tensors int-quantized weight (I8 codes,
// scales, optional I8 zero points), decoded by dq_int8
// (kernels/dq_ctint.cu).
func prepareCTInt(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.UnpackedInt)
	if !ok {
		return false, nil
	}
	sdt, err := scaleDType(h.module, q.ScaleDType)
	if err != nil {
		return true, err
	}
	if q.GIdx != nil {
		return true, fmt.Errorf("cuda: %s: g_idx on int-quantized weights is not implemented", h.module)
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
	N, K := int32(h.out), int32(h.in)
	bw, scols := int32(q.GroupSize), int32(q.Groups)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		var zp device.Ptr
		if len(p) > 2 {
			zp = p[2]
		}
		return launchDqInt8(d, dst, gemmDT, N, K, p[0], p[1], sdt, 1, bw, scols, zp)
	}
	return true, nil
}

// launchDqInt8 decodes I8 codes w [N][K] with scale [(r/bh)][scols] of
// dtype sdt over blocks of bh rows × bw columns and optional zero points zp.
func launchDqInt8(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, w, scale device.Ptr, sdt device.DType,
	bh, bw, scols int32, zp device.Ptr) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_int8", g, b, 0, out, int32(gemmDT), N, K, w, scale, int32(sdt), bh, bw, scols, zp)
}
