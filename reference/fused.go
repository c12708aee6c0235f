package reference

import "github.com/qppl/qppl/quant"

// fusedPart is one slice of a fused projection's output columns.
type fusedPart struct {
	dst   []float64 // [T][width]
	width int
}

// fused computes a fused Linear (phi3's qkv_proj or gate_up_proj) of in
// [T][inW] into ws.fused and splits its output columns, in order, into the
// parts: the columns [0, w0) go to parts[0], [w0, w0+w1) to parts[1], ...
// (as transformers slices qkv and chunks gate_up).
func (m *model) fused(ws *workspace, l quant.Linear, in []float64, T, inW int, parts ...fusedPart) error {
	total := 0
	for _, p := range parts {
		total += p.width
	}
	out := ws.fused[:T*total]
	if err := m.linear(ws, l, nil, in, T, inW, out, total); err != nil {
		return err
	}
	for t := 0; t < T; t++ {
		row := out[t*total : (t+1)*total]
		for _, p := range parts {
			copy(p.dst[t*p.width:(t+1)*p.width], row[:p.width])
			row = row[p.width:]
		}
	}
	return nil
}
