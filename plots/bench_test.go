package plots

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// BenchmarkRender_SVG_34pts renders the 34-point KLD chart (layout included).
func BenchmarkRender_SVG_34pts(b *testing.B) {
	ms := sampleModels()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if _, err := Render(&buf, "svg", ms, Options{Y: YKLD}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender_PNG_34pts is the same chart as a 1728×1152 PNG.
func BenchmarkRender_PNG_34pts(b *testing.B) {
	ms := sampleModels()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if _, err := Render(&buf, "png", ms, Options{Y: YKLD}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlaceLabels_200 places 200 labels in an 800×500 pt area.
func BenchmarkPlaceLabels_200(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]labelInput, 200)
	for i := range in {
		in[i] = labelInput{X: 20 + rng.Float64()*760, Y: 20 + rng.Float64()*460, W: 60, H: 22}
	}
	p := layoutParams{MarkerR: 5, Gap: 3, Pad: 2, Rings: 16, Step: 9}
	for b.Loop() {
		placeLabels(in, rect{0, 0, 800, 500}, nil, nil, p)
	}
}
