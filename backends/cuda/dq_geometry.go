package cuda

import "github.com/qppl/qppl/backends/cuda/device"

// Launch geometry of the dequantization kernels (kernels/dq.cuh, whose
// #defines TestDqGeometryMatchesHeader compares with these): 2-D grids, no
// 64-bit division per element, DQ_V (row-major formats) or DQ_CV (GPTQ,
// AWQ) consecutive output values per thread written with 16-byte stores.
const (
	dqV  = 8  // DQ_V: values per thread, row-major formats
	dqCV = 16 // DQ_CV: values per thread and row, GPTQ and AWQ
	dqTX = 32 // DQ_TX: threads per block along x (one warp)
	dqTY = 8  // DQ_TY: threads per block along y
)

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// dqRowGrid is the geometry of the row-major formats over W[N][K]: rows
// on grid x (DQ_TY per block), tiles of DQ_TX·DQ_V columns on grid y.
func dqRowGrid(N, K int) (grid, block device.Dim3) {
	return device.Dim3{X: max(ceilDiv(N, dqTY), 1), Y: max(ceilDiv(K, dqTX*dqV), 1), Z: 1}, device.Dim3{X: dqTX, Y: dqTY, Z: 1}
}

// dqColGrid is the geometry of the formats packed across the output
// dimension: cols packed columns (GPTQ: N output rows; AWQ: N/8 words) on
// grid x, tiles of DQ_TY·DQ_CV inputs on grid y.
func dqColGrid(cols, K int) (grid, block device.Dim3) {
	return device.Dim3{X: max(ceilDiv(cols, dqTX), 1), Y: max(ceilDiv(K, dqTY*dqCV), 1), Z: 1}, device.Dim3{X: dqTX, Y: dqTY, Z: 1}
}
