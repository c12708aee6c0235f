package gguf

import (
	"fmt"
	"math"

	"github.com/qppl/qppl/quant"
)

var _ quant.RowDequantizer = (*Linear)(nil)

// DequantizeRows implements quant.RowDequantizer: rows [r0, r1) of the
// Hugging Face weight (llama.cpp's q/k row interleave undone), decoded
// with the type's decoder straight from the file: the same values
// Dequantize writes there, without decoding the rest of the matrix. Safe
// for concurrent use (every call reads into its own buffers).
func (l *Linear) DequantizeRows(r0, r1 int, dst []float64) error {
	if r0 < 0 || r1 > l.Out || r0 > r1 || len(dst) != (r1-r0)*l.In {
		return fmt.Errorf("gguf: %s: DequantizeRows [%d, %d) of %d rows into %d values", l.Name, r0, r1, l.Out, len(dst))
	}
	in := int64(l.In)
	if l.heads <= 0 {
		if err := l.m.decodeRange(l.ti, l.f, int64(r0)*in, int64(r1-r0)*in, dst); err != nil {
			return err
		}
	} else {
		// Stored row of Hugging Face row i (RowOrder, see Unpermute):
		// head h, half s, index j is stored at h·D + 2j + s. Stored rows
		// are decoded one at a time (q and k are small).
		d := l.Out / l.heads
		for i := r0; i < r1; i++ {
			h, w := i/d, i%d
			s, j := w/(d/2), w%(d/2)
			stored := int64(h*d + 2*j + s)
			if err := l.m.decodeRange(l.ti, l.f, stored*in, in, dst[(i-r0)*l.In:(i-r0+1)*l.In]); err != nil {
				return err
			}
		}
	}
	for i, v := range dst {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: tensor %q: element [%d,%d] decodes to %v", l.ti.File, l.ti.Name, r0+i/l.In, i%l.In, v)
		}
	}
	return nil
}
