package cuda

import (
	"fmt"

	"github.com/qppl/qppl/backends/cuda/device"
)

// fusedPart is one block of a fused projection's output columns and the
// fp32 buffer [rows][width] it goes to.
type fusedPart struct {
	out   device.Ptr
	width int
}

// linearParts computes a fused Linear (phi3's qkv_proj, gate_up_proj) as
// one GEMM per part over the matching rows of its weight: the input is
// prepared and the weight decoded once, and part i multiplies weight rows
// [w0+…+w(i−1), +wi) — the same products as the fused GEMM, split as
// transformers slices qkv and chunks gate_up. Reference: reference.fused.
func (b *Backend) linearParts(ds *devState, l *devLinear, in device.Ptr, rows int, parts ...fusedPart) error {
	d := ds.d
	total := 0
	for _, p := range parts {
		total += p.width
	}
	if total != l.out {
		return fmt.Errorf("%s: parts of %d rows for a weight of %d", l.module, total, l.out)
	}
	post, err := b.linearInput(ds, l, in, rows)
	if err != nil {
		return err
	}
	w, err := l.weight(d, ds.scratch, b.gemmDT)
	if err != nil {
		return err
	}
	r0 := 0
	for _, p := range parts {
		bp := w + device.Ptr(r0*l.in*b.gemmDT.Size())
		if err := d.Gemm(device.Gemm{M: rows, N: p.width, K: l.in, A: ds.xa, B: bp, C: p.out, AType: b.gemmDT, BType: b.gemmDT}); err != nil {
			return fmt.Errorf("%s rows [%d, %d): %w", l.module, r0, r0+p.width, err)
		}
		if post != 1 {
			if err := device.LaunchScale(d, p.out, rows*p.width, post); err != nil {
				return err
			}
		}
		r0 += p.width
	}
	return nil
}
