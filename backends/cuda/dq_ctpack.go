package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareCTPack uploads a compressed-tensors pack-quantized weight: the
// packed words, the scales in their stored dtype, signed I8 zero points and
// g_idx when present, decoded by dq_ct_pack (kernels/dq_ctpack.cu).
func prepareCTPack(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.PackedInt)
	if !ok {
		return false, nil
	}
	sdt, err := scaleDType(h.module, q.ScaleDType)
	if err != nil {
		return true, err
	}
	h.bufs = [][]byte{u32Bytes(q.Packed), encodeAs(sdt, q.Scale)}
	zmode := int32(0)
	if q.Zero != nil {
		zb := make([]byte, len(q.Zero))
		for i, z := range q.Zero {
			if z < -128 || z > 127 {
				return true, fmt.Errorf("cuda: %s: zero point %d outside int8", h.module, z)
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
	N, K := int32(h.out), int32(h.in)
	wpr, b, scols, gs := int32(q.WordsPerRow), int32(q.Bits), int32(q.Groups), int32(q.GroupSize)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		var zp, gi device.Ptr
		if zmode != 0 {
			zp = p[2]
		}
		if gidx >= 0 {
			gi = p[gidx]
		}
		return launchDqCTPack(d, dst, gemmDT, N, K, p[0], wpr, b, vpw, p[1], sdt, scols, gs, gi, zmode, zp, 0)
	}
	return true, nil
}

// launchDqCTPack decodes pack-quantized codes (packed, wpr words per row,
// b bits, vpw values per word for the legacy layout or 0) with scale [N][scols]
// of dtype sdt, group size gs or g_idx gidx, zero points zp in mode zmode.
func launchDqCTPack(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, packed device.Ptr, wpr, b, vpw int32,
	scale device.Ptr, sdt device.DType, scols, gs int32, gidx device.Ptr, zmode int32, zp device.Ptr, zvpw int32) error {
	g, bl := dqRowGrid(int(N), int(K))
	return d.Launch("dq_ct_pack", g, bl, 0, out, int32(gemmDT), N, K, packed, wpr, b, vpw, scale, int32(sdt), scols, gs, gidx, zmode, zp, zvpw)
}
