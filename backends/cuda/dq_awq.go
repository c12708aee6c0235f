package cuda

import (
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareAWQ uploads an AWQ GEMM weight (qweight, qzeros, scales as
// stored), decoded by dq_awq (kernels/dq_awq.cu).
func prepareAWQ(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.AWQ)
	if !ok {
		return false, nil
	}
	sdt, err := scaleDType(h.module, q.ScaleDType)
	if err != nil {
		return true, err
	}
	h.bufs = [][]byte{u32Bytes(q.QWeight), u32Bytes(q.QZeros), encodeAs(sdt, q.Scales)}
	N, K, gs := int32(h.out), int32(h.in), int32(q.GroupSize)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqAWQ(d, dst, gemmDT, N, K, p[0], p[1], p[2], sdt, gs)
	}
	return true, nil
}

// launchDqAWQ decodes AWQ 4-bit codes with group size gs.
func launchDqAWQ(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, qweight, qzeros, scales device.Ptr, sdt device.DType, gs int32) error {
	g, b := dqColGrid(int(N)/8, int(K))
	return d.Launch("dq_awq", g, b, 0, out, int32(gemmDT), N, K, qweight, qzeros, scales, int32(sdt), gs)
}
