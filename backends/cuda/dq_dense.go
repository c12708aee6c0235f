package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareDense uploads an unquantized weight: as is when it is already in
// the GEMM dtype, else converted by dq_dense (kernels/dq_dense.cu).
func prepareDense(l quant.Linear, h *hostLinear, gemmDT device.DType) (bool, error) {
	q, ok := l.(*quant.Dense)
	if !ok {
		return false, nil
	}
	idt, ok := dtypeCode(q.DType)
	raw := q.Raw
	if !ok { // F64: the GPU computes in at most fp32
		if q.DType != "F64" {
			return true, fmt.Errorf("cuda: %s: dense dtype %s", h.module, q.DType)
		}
		vals := make([]float64, h.out*h.in)
		if err := q.Dequantize(vals); err != nil {
			return true, err
		}
		raw, idt = f64ToF32Bytes(vals), device.F32
	}
	h.bufs = [][]byte{raw}
	if idt == gemmDT {
		h.direct = true
		return true, nil
	}
	N, K := int32(h.out), int32(h.in)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqDense(d, dst, gemmDT, p[0], idt, N, K)
	}
	return true, nil
}

// launchDqDense converts in [N][K] of dtype idt into out of dtype gemmDT.
func launchDqDense(d device.Device, out device.Ptr, gemmDT device.DType, in device.Ptr, idt device.DType, N, K int32) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_dense", g, b, 0, out, int32(gemmDT), in, int32(idt), N, K)
}
