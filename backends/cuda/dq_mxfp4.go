package cuda

import (
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareMXFP4 uploads an MXFP4 weight (packed E2M1 codes, E8M0 scales per
// 32), decoded by dq_mxfp4 (kernels/dq_mxfp4.cu).
func prepareMXFP4(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.MXFP4)
	if !ok {
		return false, nil
	}
	h.bufs = [][]byte{q.Packed, q.Scales}
	N, K := int32(h.out), int32(h.in)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqMXFP4(d, dst, gemmDT, N, K, p[0], p[1])
	}
	return true, nil
}

// launchDqMXFP4 decodes packed E2M1 codes [N][K/2] with E8M0 scales [N][K/32].
func launchDqMXFP4(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, packed, scale device.Ptr) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_mxfp4", g, b, 0, out, int32(gemmDT), N, K, packed, scale)
}
