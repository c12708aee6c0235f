package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// prepareBNB4 uploads a bitsandbytes 4-bit weight as stored (packed codes,
// the code table, absmax or the nested absmax with its codes and map),
// decoded by dq_bnb4 (kernels/dq_bnb.cu).
func prepareBNB4(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.BNB4)
	if !ok {
		return false, nil
	}
	rdt, ok1 := dtypeCode(q.OutDType)
	cdt, ok2 := dtypeCode(q.ComputeDType)
	if !ok1 || !ok2 {
		return true, fmt.Errorf("cuda: %s: bitsandbytes dtypes %s/%s", h.module, q.OutDType, q.ComputeDType)
	}
	lbs, ok := log2(q.BlockSize)
	if !ok || q.BlockSize < dqV {
		return true, fmt.Errorf("cuda: %s: bitsandbytes blocksize %d is not a power of two >= %d", h.module, q.BlockSize, dqV)
	}
	N, K := int32(h.out), int32(h.in)
	offset := q.Offset
	if q.Nested {
		lnb2, ok := log2(q.NestedBlockSize)
		if !ok {
			return true, fmt.Errorf("cuda: %s: bitsandbytes nested_blocksize %d is not a power of two", h.module, q.NestedBlockSize)
		}
		h.bufs = [][]byte{q.Packed, f32Bytes(q.Code[:]), f32Bytes(q.NestedAbsmax), q.QAbsmax, f32Bytes(q.NestedCode)}
		h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
			return launchDqBNB4(d, dst, gemmDT, N, K, p[0], p[1], p[2], p[3], p[4], offset, 1, lbs, lnb2, rdt, cdt)
		}
		return true, nil
	}
	h.bufs = [][]byte{q.Packed, f32Bytes(q.Code[:]), f32Bytes(q.Absmax)}
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqBNB4(d, dst, gemmDT, N, K, p[0], p[1], p[2], p[0], p[1], 0, 0, lbs, 0, rdt, cdt)
	}
	return true, nil
}

// log2 returns k with 1<<k == n.
func log2(n int) (int32, bool) {
	for k := int32(0); k < 31; k++ {
		if 1<<k == n {
			return k, true
		}
	}
	return 0, false
}

// launchDqBNB4 decodes bitsandbytes 4-bit codes with absmax per 2^lbs
// values (nested: qabs codes into code2 times absmax per 2^lnb2 blocks plus
// offset), rounded to rdt and then cdt, in the row-major geometry.
func launchDqBNB4(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, packed, code, absmax, qabs, code2 device.Ptr, offset float32, nested, lbs, lnb2 int32, rdt, cdt device.DType) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_bnb4", g, b, 0, out, int32(gemmDT), N, K, packed, code, absmax, qabs, code2, offset, nested, lbs, lnb2, int32(rdt), int32(cdt))
}

// prepareBNB8 uploads an LLM.int8 weight (I8 codes, F32 SCB), decoded by
// dq_bnb8 (kernels/dq_bnb.cu); its LLM.int8 input decomposition is
// kernels/llmint8.cu (forward.go's linearInput).
func prepareBNB8(l quant.Linear, h *hostLinear, _ device.DType) (bool, error) {
	q, ok := l.(*quant.BNB8)
	if !ok {
		return false, nil
	}
	codes := make([]byte, len(q.Codes))
	for i, c := range q.Codes {
		codes[i] = byte(c)
	}
	scb := make([]float32, len(q.SCB))
	for i, s := range q.SCB {
		scb[i] = float32(s)
	}
	h.bufs = [][]byte{codes, f32Bytes(scb)}
	N, K := int32(h.out), int32(h.in)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		return launchDqBNB8(d, dst, gemmDT, N, K, p[0], p[1])
	}
	return true, nil
}

// launchDqBNB8 decodes LLM.int8 codes [N][K] with row scales scb[N]:
// q·scb/127, in the row-major geometry.
func launchDqBNB8(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, q, scb device.Ptr) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch("dq_bnb8", g, b, 0, out, int32(gemmDT), N, K, q, scb)
}
