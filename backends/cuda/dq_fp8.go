package cuda

import (
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareFP8 uploads an FP8 E4M3 weight and its scales (tensor, channel,
// group or block), decoded by dq_fp8 (kernels/dq_fp8.cu).
func prepareFP8(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.FP8)
	if !ok {
		return false, nil
	}
	sdt, err := scaleDType(h.module, q.ScaleDType)
	if err != nil {
		return true, err
	}
	h.bufs = [][]byte{q.Codes, encodeAs(sdt, q.Scale)}
	N, K := int32(h.out), int32(h.in)
	bh, bw, scols := int32(q.BlockRows), int32(q.BlockCols), int32(q.ScaleCols)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqFP8(d, dst, gemmDT, N, K, p[0], p[1], sdt, bh, bw, scols)
	}
	return true, nil
}

// launchDqFP8 decodes E4M3 codes w [N][K] with scale [(r/bh)][scols] of
// dtype sdt over blocks of bh rows × bw columns.
func launchDqFP8(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, w, scale device.Ptr, sdt device.DType, bh, bw, scols int32) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_fp8", g, b, 0, out, int32(gemmDT), N, K, w, scale, int32(sdt), bh, bw, scols)
}
