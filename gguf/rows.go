package gguf

import (
	"fmt"
	"math"

	"github.com/qppl/qppl/quant"
)

var _ quant.RowDequantizer = (*Linear)(nil)

// DequantizeRows implements quant.RowDequantizer: rows [r0, r1) of the
// Hugging Face weight, decoded with the type's decoder straight from the
// file (an expert's slice of a stacked tensor is a tensor of its own,
// expertSlice): the same values Dequantize writes there, without decoding
// the rest of the matrix. The stored order is undone as Dequantize does:
// llama.cpp's q/k row interleave (Unpermute) and the declaration's row
// and column orders (TensorName.Rows, Cols: qwen35's value heads). Safe
// for concurrent use (every call reads into its own buffers).
func (l *Linear) DequantizeRows(r0, r1 int, dst []float64) error {
	if r0 < 0 || r1 > l.Out || r0 > r1 || len(dst) != (r1-r0)*l.In {
		return fmt.Errorf("gguf: %s: DequantizeRows [%d, %d) of %d rows into %d values", l.Name, r0, r1, l.Out, len(dst))
	}
	in := int64(l.In)
	if l.heads <= 0 && l.rows == nil && l.cols == nil {
		if err := l.m.decodeRange(l.ti, l.f, int64(r0)*in, int64(r1-r0)*in, dst); err != nil {
			return err
		}
	} else {
		// Runs of Hugging Face rows stored consecutively are decoded in
		// one read (an ordinary row range is one run; q/k rows and
		// reordered value heads are short runs); with a column order,
		// each run is decoded into tmp and its columns gathered.
		var tmp []float64
		for i := r0; i < r1; {
			s := l.storedRow(i)
			n := 1
			for i+n < r1 && l.storedRow(i+n) == s+n {
				n++
			}
			out := dst[(i-r0)*l.In : (i-r0+n)*l.In]
			if l.cols != nil {
				if cap(tmp) < len(out) {
					tmp = make([]float64, len(out))
				}
				tmp = tmp[:len(out)]
				if err := l.m.decodeRange(l.ti, l.f, int64(s)*in, int64(n)*in, tmp); err != nil {
					return err
				}
				for r := 0; r < n; r++ {
					row, src := out[r*l.In:(r+1)*l.In], tmp[r*l.In:(r+1)*l.In]
					for j, c := range l.cols {
						row[j] = src[c]
					}
				}
			} else if err := l.m.decodeRange(l.ti, l.f, int64(s)*in, int64(n)*in, out); err != nil {
				return err
			}
			i += n
		}
	}
	for i, v := range dst {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: tensor %q: element [%d,%d] decodes to %v", l.ti.File, l.ti.Name, r0+i/l.In, i%l.In, v)
		}
	}
	return nil
}

// storedRow returns the stored row of Hugging Face row i: rows[i] for a
// declared row order; for llama.cpp's q/k interleave (RowOrder, see
// Unpermute) head h, half s, index j is stored at h·D + 2j + s; i
// otherwise.
func (l *Linear) storedRow(i int) int {
	switch {
	case l.rows != nil:
		return l.rows[i]
	case l.heads > 0:
		d := l.Out / l.heads
		h, w := i/d, i%d
		s, j := w/(d/2), w%(d/2)
		return h*d + 2*j + s
	}
	return i
}
