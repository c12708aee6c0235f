package plots

import (
	"bytes"
	"fmt"
	"testing"

	"gonum.org/v1/plot/vg"
)

// TestEdgeCases renders awkward inputs: none may panic, each must give a
// non-empty image or a clear error.
func TestEdgeCases(t *testing.T) {
	many := make([]Model, 120)
	for i := range many {
		many[i] = Model{Label: fmt.Sprintf("F%d m%d", i%7, i), BPW: 2 + float64(i%13)*0.5, VRAMGB: float64(i%9) + 1, PPL: 7 + float64(i%11), KLD: 0.001 * float64(i+1), HasKLD: true}
	}
	same := []Model{{Label: "A x", BPW: 4, PPL: 7, KLD: 0.1, HasKLD: true}, {Label: "A y", BPW: 4, PPL: 7, KLD: 0.1, HasKLD: true}, {Label: "B z", BPW: 4, PPL: 7, KLD: 0.1, HasKLD: true}}
	long := []Model{{Label: "Q " + string(bytes.Repeat([]byte("very-long-label-"), 20)), BPW: 4, PPL: 7}}
	for _, c := range []struct {
		name string
		ms   []Model
		o    Options
	}{
		{"tiny canvas", sampleModels(), Options{Y: YKLD, Width: 0.5 * vg.Inch, Height: 0.5 * vg.Inch}},
		{"tiny dist", sampleModels(), Options{Y: YKLDDist, Width: 1 * vg.Inch, Height: 1 * vg.Inch}},
		{"one point", sampleModels()[:1], Options{Y: YPPL, LogY: true}},
		{"identical points", same, Options{Y: YKLD}},
		{"120 points", many, Options{Y: YKLD, LogY: true, X: XVRAM}},
		{"long label", long, Options{}},
		{"huge values", []Model{{Label: "A", BPW: 1e300, PPL: 1e300}, {Label: "B", BPW: 1e-300, PPL: 1e-300}}, Options{LogY: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := Render(&buf, "svg", c.ms, c.o)
			if err == nil && buf.Len() == 0 {
				t.Error("no output and no error")
			}
			if err != nil {
				t.Errorf("error: %v", err)
			}
		})
	}
}
