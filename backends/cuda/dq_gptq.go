package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareGPTQ uploads a GPTQ weight (qweight, qzeros, scales, g_idx as
// stored), decoded by dq_gptq (kernels/dq_gptq.cu).
func prepareGPTQ(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.GPTQ)
	if !ok {
		return false, nil
	}
	sdt, err := scaleDType(h.module, q.ScaleDType)
	if err != nil {
		return true, err
	}
	if 32%q.Bits != 0 {
		return true, fmt.Errorf("cuda: %s: %d-bit GPTQ is not implemented", h.module, q.Bits)
	}
	h.bufs = [][]byte{u32Bytes(q.QWeight), u32Bytes(q.QZeros), encodeAs(sdt, q.Scales), i32Bytes(q.GIdx)}
	v1 := int32(1)
	if q.V2 {
		v1 = 0
	}
	N, K, b := int32(h.out), int32(h.in), int32(q.Bits)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqGPTQ(d, dst, gemmDT, N, K, p[0], p[1], p[2], sdt, p[3], b, v1)
	}
	return true, nil
}

// launchDqGPTQ decodes b-bit GPTQ codes (v1: the gptq v1 zero-point
// off-by-one).
func launchDqGPTQ(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, qweight, qzeros, scales device.Ptr, sdt device.DType,
	gidx device.Ptr, b, v1 int32) error {
	g, bl := dqColGrid(int(N), int(K))
	return d.Launch("dq_gptq", g, bl, 0, out, int32(gemmDT), N, K, qweight, qzeros, scales, int32(sdt), gidx, b, v1)
}
