package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareNVFP4 uploads an NVFP4 weight (packed E2M1 codes, E4M3 scales per
// 16) with its global scale, decoded by dq_nvfp4 (kernels/dq_nvfp4.cu).
func prepareNVFP4(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.NVFP4)
	if !ok {
		return false, nil
	}
	rdt, ok := dtypeCode(q.OutDType)
	if !ok {
		return true, fmt.Errorf("cuda: %s: NVFP4 output dtype %s", h.module, q.OutDType)
	}
	h.bufs = [][]byte{q.Packed, q.Scales}
	N, K := int32(h.out), int32(h.in)
	gscale, scale2 := q.GlobalScale, int32(0)
	if q.Scale2 {
		scale2 = 1
	}
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqNVFP4(d, dst, gemmDT, N, K, p[0], p[1], gscale, scale2, rdt)
	}
	return true, nil
}

// launchDqNVFP4 decodes packed E2M1 codes [N][K/2] with E4M3 scales
// [N][K/16] divided by gscale (multiplied when scale2 is 1: ModelOpt's
// weight_scale_2), rounded to the model dtype rdt.
func launchDqNVFP4(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, packed, scale device.Ptr, gscale float32, scale2 int32, rdt device.DType) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_nvfp4", g, b, 0, out, int32(gemmDT), N, K, packed, scale, gscale, scale2, int32(rdt))
}
