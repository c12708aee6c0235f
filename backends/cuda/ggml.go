package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/quant"
)

// prepareGGUF prepares a GGUF weight (gguf.Linear): F32/F16/BF16 as a
// dense weight (multiplied directly when it is in the GEMM dtype), every
// other type packed for dq_ggml; llama.cpp's Q/K row permutation is undone
// by moving whole stored rows (gguf.Linear.RowOrder).
func prepareGGUF(l quant.Linear, h *hostLinear, gemmDT device.DType) (bool, error) {
	g, ok := l.(*gguf.Linear)
	if !ok {
		return false, nil
	}
	if g.ColOrder() != nil {
		// Columns reordered by llama.cpp's converter (qwen35's out_proj:
		// tiled value heads) cannot be undone by moving stored rows: the
		// weight is decoded on the host (exact: ggml decodes to fp32,
		// then rows and columns move) and uploaded as a dense F32 weight,
		// which the GEMM dtype rounds as dq_ggml's fp32 values would be.
		w := make([]float64, h.out*h.in)
		if err := g.Dequantize(w); err != nil {
			return true, fmt.Errorf("cuda: %s: %w", h.module, err)
		}
		d := &quant.Dense{Base: quant.Base{Name: h.module, Out: h.out, In: h.in, Fmt: h.format}, DType: "F32", Raw: f64ToF32Bytes(w)}
		if _, err := prepareDense(d, h, gemmDT); err != nil {
			return true, err
		}
		return true, nil
	}
	raw, err := g.Raw()
	if err != nil {
		return true, fmt.Errorf("cuda: %s: %w", h.module, err)
	}
	if dt, ok := ggufFloatDType(g.Type()); ok {
		if raw, err = reorderRows(h.module, raw, h.out, g.RowOrder()); err != nil {
			return true, err
		}
		d := &quant.Dense{Base: quant.Base{Name: h.module, Out: h.out, In: h.in, Fmt: h.format}, DType: map[device.DType]string{device.F32: "F32", device.F16: "F16", device.BF16: "BF16"}[dt], Raw: raw}
		if _, err := prepareDense(d, h, gemmDT); err != nil {
			return true, err
		}
		return true, nil
	}
	p, err := prepareGGML(h.module, g.Type(), h.out, h.in, raw, g.RowOrder())
	if err != nil {
		return true, err
	}
	h.bufs, h.launch = p.bufs, p.launch
	return true, nil
}

// reorderRows returns data's rows reordered: row i of the result is
// stored row rows[i] (nil rows: data as is); rows must be a permutation.
func reorderRows(module string, data []byte, out int, rows []int) ([]byte, error) {
	if rows == nil {
		return data, nil
	}
	if len(rows) != out || out == 0 || len(data)%out != 0 {
		return nil, fmt.Errorf("cuda: %s: row order has %d entries for %d rows of %d bytes", module, len(rows), out, len(data))
	}
	row := len(data) / out
	seen := make([]bool, out)
	perm := make([]byte, len(data))
	for i, r := range rows {
		if r < 0 || r >= out || seen[r] {
			return nil, fmt.Errorf("cuda: %s: row order is not a permutation of 0..%d (entry %d is %d)", module, out-1, i, r)
		}
		seen[r] = true
		copy(perm[i*row:(i+1)*row], data[r*row:(r+1)*row])
	}
	return perm, nil
}

// prepareGGML describes a GGUF weight [out][in] stored as ggml blocks of
// type typ (data: out rows of in/BlockSize blocks), decoded by dq_ggml
// (kernels/ggml.cu) into the exact fp32 values of ggml.Dequantize. A grid
// type carries its codebook (ggml.Grid) as a second buffer. rows, if not
// nil, reorders the rows on the host: weight row i is stored row rows[i]
// (how llama.cpp's Q/K row permutation is undone); it must be a
// permutation of 0..out-1.
func prepareGGML(module string, typ ggml.Type, out, in int, data []byte, rows []int) (*hostLinear, error) {
	if !typ.Supported() {
		return nil, fmt.Errorf("cuda: %s: ggml type %s (id %d) has no decoder", module, typ, uint32(typ))
	}
	row, err := ggml.RowBytes(typ, int64(in))
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", module, err)
	}
	if out < 0 || int64(len(data)) != row*int64(out) {
		return nil, fmt.Errorf("cuda: %s: %s [%d][%d] needs %d bytes, got %d", module, typ, out, in, row*int64(out), len(data))
	}
	if rows != nil {
		if len(rows) != out {
			return nil, fmt.Errorf("cuda: %s: row order has %d entries for %d rows", module, len(rows), out)
		}
		if data, err = reorderRows(module, data, out, rows); err != nil {
			return nil, err
		}
	}
	h := &hostLinear{module: module, out: out, in: in, format: "gguf-" + typ.String(), bufs: [][]byte{data}}
	if g, _, ok := ggml.Grid(typ); ok {
		b := make([]byte, len(g))
		for i, v := range g {
			b[i] = byte(v)
		}
		h.bufs = append(h.bufs, b)
	}
	N, K := int32(out), int32(in)
	h.launch = func(d device.Device, p []device.Ptr, dst device.Ptr, gemmDT device.DType) error {
		var grid device.Ptr
		if len(p) > 1 {
			grid = p[1]
		}
		return launchDqGGML(d, dst, gemmDT, N, K, p[0], typ, grid)
	}
	return h, nil
}

// launchDqGGML decodes N rows of K values of ggml type typ from data (with
// the type's grid for the grid types, else 0) into out of dtype gemmDT
// (the GEMM dtype).
func launchDqGGML(d device.Device, out device.Ptr, gemmDT device.DType, N, K int32, data device.Ptr, typ ggml.Type, grid device.Ptr) error {
	g, b := dqRowGrid(int(N), int(K))
	return d.Launch(device.KDqGGML, g, b, 0, out, int32(gemmDT), N, K, data, int32(typ), grid)
}
