package cuda

import (
	"fmt"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
)

// GEMM fusion: a layer's q, k, v projections (and its gate and up
// projections) read the same input; when their weights share a format
// they are multiplied by one GEMM of N = Σ out. Dequantized weights are
// written side by side into the scratch (so the scratch holds the whole
// group); dense weights already in the GEMM dtype are fused when the
// layer's arena placed them back to back. The GEMM's rows are q|k|v (or
// gate|up) and the kernels of kernels/fused.cu split them (with the
// biases) or apply silu·up. Every output element is the same dot product
// in the same order as unfused, so the emulator's results are
// bit-identical (TestFusionBitIdentical); the fused GEMM only has larger N.

// fuseGroups returns the fusion groups, by arch.Proj (indices of
// layerDev.lin).
func fuseGroups() [2][]arch.Proj {
	return [2][]arch.Proj{{arch.ProjQ, arch.ProjK, arch.ProjV}, {arch.ProjGate, arch.ProjUp}}
}

const (
	fuseQKV = 0
	fuseGU  = 1
)

// fusable reports whether host linears can share one GEMM: same format,
// no activation quantization (whose per-Linear quantizer would run on the
// shared input), all dequantized or all multiplied directly.
func fusable(hs []*hostLinear) bool {
	for _, h := range hs {
		if h == nil || h.act != nil || h.format != hs[0].format || h.direct != hs[0].direct || h.in != hs[0].in {
			return false
		}
	}
	return len(hs) > 1
}

// groupScratch is the scratch a fused group of dequantized weights needs.
func groupScratch(hs []*hostLinear, dt device.DType) int64 {
	var n int64
	for _, h := range hs {
		n += int64(h.out) * int64(h.in) * int64(dt.Size())
	}
	return n
}

// contiguous reports whether direct weights lie back to back.
func contiguous(ls []*devLinear, dt device.DType) bool {
	for i := 1; i < len(ls); i++ {
		p := ls[i-1]
		if ls[i].ptrs[0] != p.ptrs[0]+device.Ptr(int64(p.out)*int64(p.in)*int64(dt.Size())) {
			return false
		}
	}
	return true
}

// setFusion decides a loaded layer's fusion groups.
func (b *Backend) setFusion(lw *layerDev) {
	if b.opt.NoFusion {
		return
	}
	for g, idx := range fuseGroups() {
		ls := make([]*devLinear, len(idx))
		hs := make([]*hostLinear, len(idx))
		for i, k := range idx {
			ls[i] = lw.lin[k]
			if ls[i] != nil {
				hs[i] = ls[i].hostLinear
			}
		}
		if fusable(hs) && (!hs[0].direct || contiguous(ls, b.gemmDT)) {
			lw.fuse[g] = true
		}
	}
}

// linearFused computes out[rows][Σ out] = in·[W_0; W_1; ...]ᵀ for the
// linears ls (fusable) in one GEMM.
func (b *Backend) linearFused(ds *devState, ls []*devLinear, in device.Ptr, rows int, out device.Ptr) error {
	d := ds.d
	if ds.xaCastOf != in {
		if err := device.LaunchCastAct(d, ds.xa, in, rows*ls[0].in, b.gemmDT); err != nil {
			return err
		}
		ds.xaCastOf = in
	}
	w := ls[0].ptrs[0]
	n, off := 0, int64(0)
	for _, l := range ls {
		if !l.direct {
			if _, err := l.weight(d, ds.scratch+device.Ptr(off), b.gemmDT); err != nil {
				return err
			}
			off += int64(l.out) * int64(l.in) * int64(b.gemmDT.Size())
			w = ds.scratch
		}
		n += l.out
	}
	if err := d.Gemm(device.Gemm{M: rows, N: n, K: ls[0].in, A: ds.xa, B: w, C: out, AType: b.gemmDT, BType: b.gemmDT}); err != nil {
		return fmt.Errorf("%s+%d fused: %w", ls[0].module, len(ls)-1, err)
	}
	return nil
}
