package plots

import (
	"bytes"
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
)

// TestRenderExamples writes example charts into $QPPL_PLOT_DIR for a visual
// check (skipped when unset).
func TestRenderExamples(t *testing.T) {
	dir := os.Getenv("QPPL_PLOT_DIR")
	if dir == "" {
		t.Skip("QPPL_PLOT_DIR not set")
	}
	ms := sampleModels()
	sub := Subtitle("wikitext2", 20, 2048)
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"kld.png", Options{Y: YKLD, Title: "Llama-3.1-8B-Instruct", Subtitle: sub}},
		{"kld-log.png", Options{Y: YKLD, LogY: true, Title: "Llama-3.1-8B-Instruct", Subtitle: sub}},
		{"ppl.png", Options{Y: YPPL, Subtitle: sub, MaxY: 9}},
		{"dist.png", Options{Y: YKLDDist, Subtitle: sub, Mask: []string{"EXL3", "GGUF"}}},
		{"kld.svg", Options{Y: YKLD, Subtitle: sub}},
		{"kld.pdf", Options{Y: YKLD, Subtitle: sub}},
	} {
		rep, err := Save(filepath.Join(dir, c.name), ms, c.o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", c.name, rep)
	}
}

func render(t *testing.T, format string, ms []Model, o Options) ([]byte, Report) {
	t.Helper()
	var buf bytes.Buffer
	rep, err := Render(&buf, format, ms, o)
	if err != nil {
		t.Fatalf("Render %s: %v", format, err)
	}
	return buf.Bytes(), rep
}

func TestPNG(t *testing.T) {
	ms := sampleModels()
	data, rep := render(t, "png", ms, Options{Y: YKLD, Subtitle: "wikitext2, 20 × 2048 tokens"})
	if rep.Points != len(ms) || len(rep.Dropped) != 0 || rep.Overlaps != 0 {
		t.Errorf("report %+v, want %d points, none dropped, no overlaps", rep, len(ms))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 12*144 || b.Dy() != 8*144 {
		t.Errorf("size %v, want 1728×1152 (12×8 in at 144 dpi)", b)
	}
	nonWhite := 0
	found := map[color.RGBA]int{}
	want := map[color.RGBA]bool{}
	cols, _ := assignColours(ms)
	for _, c := range cols {
		want[c] = true
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bb >> 8), 0xff}
			if c != (color.RGBA{0xff, 0xff, 0xff, 0xff}) {
				nonWhite++
			}
			if want[c] {
				found[c]++
			}
		}
	}
	if frac := float64(nonWhite) / float64(b.Dx()*b.Dy()); frac < 0.02 || frac > 0.5 {
		t.Errorf("non-white fraction %.3f, want a drawn chart (0.02–0.5)", frac)
	}
	for c := range want {
		// Each family has at least one marker (π·(4pt·2)² ≈ 200 px).
		if found[c] < 100 {
			t.Errorf("family colour %v: %d pixels, want a drawn marker", c, found[c])
		}
	}
}

// svgTexts returns the character data of every <text> element.
func svgTexts(t *testing.T, data []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out []string
	in := false
	var cur strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Local == "text" {
				in = true
				cur.Reset()
			}
		case xml.CharData:
			if in {
				cur.Write(e)
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				in = false
				out = append(out, cur.String())
			}
		}
	}
	return out
}

func TestSVGLabelsAndPoints(t *testing.T) {
	ms := sampleModels()
	o := Options{Y: YKLD, Title: "T <&> title", Subtitle: Subtitle("wikitext2", 20, 2048)}
	data, rep := render(t, "svg", ms, o)
	texts := map[string]int{}
	for _, s := range svgTexts(t, data) {
		texts[s]++
	}
	for _, m := range ms {
		txt, _, _ := splitLabel(m.Label)
		if texts[txt] == 0 {
			t.Errorf("label %q missing from SVG", txt)
		}
		if texts[formatValue(m.KLD)] == 0 {
			t.Errorf("value %q of %q missing from SVG", formatValue(m.KLD), txt)
		}
	}
	for _, s := range []string{"T <&> title", "wikitext2, 20 × 2048 tokens", LabelBPW, LabelKLD, "EXL3", "GGUF", "AQLM", "VPTQ", "EXL2"} {
		if texts[s] == 0 {
			t.Errorf("text %q missing from SVG", s)
		}
	}
	// A tag is not printed.
	if strings.Contains(string(data), "[olive]") {
		t.Error("colour tag printed")
	}
	// Markers are radius-4 circles: one per point plus one per legend entry.
	circles := strings.Count(string(data), "A4,4 0 1 1")
	if want := 2 * (rep.Points + 5); circles != want { // two arcs per circle
		t.Errorf("%d marker arcs, want %d (%d points + 5 legend entries)", circles, want, rep.Points)
	}
}

func TestDeterministic(t *testing.T) {
	ms := sampleModels()
	for i, o := range []Options{{Y: YKLD}, {Y: YPPL, LogY: true, X: XVRAM}, {Y: YKLDDist}} {
		formats := []string{"svg"}
		if i == 0 {
			formats = append(formats, "png") // PNG encoding is slow; once
		}
		for _, f := range formats {
			a, _ := render(t, f, ms, o)
			b, _ := render(t, f, ms, o)
			if !bytes.Equal(a, b) {
				t.Errorf("%s %+v: two renders differ", f, o)
			}
		}
	}
}

func TestPDF(t *testing.T) {
	data, _ := render(t, "pdf", sampleModels(), Options{Y: YKLD, Subtitle: "x"})
	if len(data) < 1000 || !bytes.HasPrefix(data, []byte("%PDF-")) {
		t.Errorf("PDF of %d bytes, prefix %q", len(data), data[:min(8, len(data))])
	}
	data, _ = render(t, "pdf", sampleModels(), Options{Y: YKLDDist})
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		t.Error("kld-dist PDF not written")
	}
}

func TestDistSVG(t *testing.T) {
	ms := sampleModels()
	base := Model{Label: "BF16", BPW: 16, PPL: 7.6, HasKLD: true, IsBase: true}
	ms = append([]Model{base}, ms...)
	data, rep := render(t, "svg", ms, Options{Y: YKLDDist, Mask: []string{"exl3", "bf16"}})
	if rep.Points != 10 {
		t.Errorf("%d rows, want the 10 EXL3 models (base and masked dropped)", rep.Points)
	}
	if len(rep.Dropped) != len(ms)-10 || !strings.Contains(strings.Join(rep.Dropped, "\n"), "BF16: KL reference") {
		t.Errorf("dropped %q", rep.Dropped)
	}
	texts := strings.Join(svgTexts(t, data), "\n")
	for _, m := range ms[1:11] {
		txt, _, _ := splitLabel(m.Label)
		if !strings.Contains(texts, txt) || !strings.Contains(texts, formatValue(m.KLD)) {
			t.Errorf("row %q or its mean missing", txt)
		}
	}
}

func TestFiltersAndErrors(t *testing.T) {
	ms := sampleModels()
	_, rep := render(t, "svg", ms, Options{Y: YKLD, MaxX: 4, MaxY: 0.3})
	for _, m := range ms {
		in := m.BPW <= 4 && m.KLD <= 0.3
		txt, _, _ := splitLabel(m.Label)
		dropped := strings.Contains(strings.Join(rep.Dropped, "\n"), txt+":")
		if in == dropped {
			t.Errorf("%s (x %v, y %v): dropped=%v", txt, m.BPW, m.KLD, dropped)
		}
	}
	// Log axis drops non-positive values and says so.
	zero := append([]Model{{Label: "BF16", BPW: 16, PPL: 7, HasKLD: true, IsBase: true}}, ms[:3]...)
	_, rep = render(t, "svg", zero, Options{Y: YKLD, LogY: true})
	if rep.Points != 3 || len(rep.Dropped) != 1 || !strings.Contains(rep.Dropped[0], "log axis") {
		t.Errorf("log axis: %+v", rep)
	}
	noKLD := []Model{{Label: "A", BPW: 4, PPL: 7}}
	for _, c := range []struct {
		name string
		ms   []Model
		o    Options
		want string
	}{
		{"no kld", noKLD, Options{Y: YKLD}, "no model has a plottable kld"},
		{"bad tag", []Model{{Label: "A [chartreuse]", BPW: 4, PPL: 7}}, Options{}, "unknown colour tag [chartreuse]"},
		{"bad y", noKLD, Options{Y: "nll"}, "unknown y axis"},
		{"bad x", noKLD, Options{X: "size"}, "unknown x axis"},
		{"dist no percentiles", []Model{{Label: "A", BPW: 4, PPL: 7, KLD: 0.1, HasKLD: true}}, Options{Y: YKLDDist}, "percentiles P1, P10, P50, P90 and P99 are required"},
		{"masked out", noKLD, Options{Mask: []string{"zzz"}}, "no model has a plottable ppl"},
	} {
		var buf bytes.Buffer
		_, err := Render(&buf, "svg", c.ms, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
		if err != nil && buf.Len() != 0 {
			t.Errorf("%s: output written on error", c.name)
		}
	}
	if _, err := Save(filepath.Join(t.TempDir(), "x.jpg"), ms, Options{}); err == nil || !strings.Contains(err.Error(), "unsupported extension") {
		t.Errorf("jpg: %v", err)
	}
	// Save leaves nothing behind on error.
	dir := t.TempDir()
	if _, err := Save(filepath.Join(dir, "x.png"), noKLD, Options{Y: YKLD}); err == nil {
		t.Error("want error")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left after a failed Save: %v", ents)
	}
}

func TestSplitLabelAndColours(t *testing.T) {
	for _, c := range []struct{ in, text, fam, tag string }{
		{"EXL3 4.0bpw", "EXL3 4.0bpw", "EXL3", ""},
		{"AWQ 4bit [green]", "AWQ 4bit", "AWQ", "green"},
		{"  W4A16   g128 ", "W4A16 g128", "W4A16", ""},
		{"[red] GGUF Q4_K", "GGUF Q4_K", "GGUF", "red"},
		{"", "", "", ""},
	} {
		text, fam, tag := splitLabel(c.in)
		if text != c.text || fam != c.fam || tag != c.tag {
			t.Errorf("splitLabel(%q) = %q %q %q, want %q %q %q", c.in, text, fam, tag, c.text, c.fam, c.tag)
		}
	}
	ms := []Model{{Label: "W8A16"}, {Label: "GGUF Q4"}, {Label: "NVFP4 [purple]"}, {Label: "BF16", IsBase: true}, {Label: "W4A16 g32"}, {Label: "W4A16 g128"}}
	cols, err := assignColours(ms)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]color.RGBA{
		"GGUF":  palette[2], // compare_q's fixed slot
		"NVFP4": palette[4], // tag
		"BF16":  baseColour,
		"W4A16": palette[0], // remaining slots in sorted family order
		"W8A16": palette[1],
	}
	for f, c := range want {
		if cols[f] != c {
			t.Errorf("family %s colour %v, want %v", f, cols[f], c)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{7.6421, "7.642"}, {0.312, "0.312"}, {0.0704, "0.070"}, {0.013, "0.013"}, {0.003, "0.0030"}, {0.000412, "0.00041"}, {5.6e-10, "5.6e-10"}, {0, "0.000"}, {12.5, "12.500"}} {
		if got := formatValue(c.v); got != c.want {
			t.Errorf("formatValue(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestTicks(t *testing.T) {
	var got []string
	for _, tk := range (linTicks{}).Ticks(1.7, 6.6) {
		got = append(got, tk.Label)
	}
	if s := strings.Join(got, " "); s != "2 3 4 5 6" {
		t.Errorf("linear ticks %q", s)
	}
	got = nil
	for _, tk := range (logTicks{}).Ticks(0.0008, 1.2) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	if s := strings.Join(got, " "); s != "0.001 0.01 0.1 1" {
		t.Errorf("log ticks over 4+ decades %q", s)
	}
	got = nil
	for _, tk := range (logTicks{}).Ticks(0.008, 0.6) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	if s := strings.Join(got, " "); s != "0.01 0.02 0.05 0.1 0.2 0.5" {
		t.Errorf("log ticks over 2 decades %q", s)
	}
	// One point on a log axis (padded by half a decade): 0.003..0.007 holds
	// only the 1-2-5 label 0.005, so the axis gets linear labels instead.
	got = nil
	for _, tk := range (logTicks{}).Ticks(0.0028, 0.0071) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	if s := strings.Join(got, " "); s != "0.003 0.004 0.005 0.006 0.007" {
		t.Errorf("log ticks over a narrow range %q", s)
	}
	got = nil
	for _, tk := range (linTicks{}).Ticks(-0.02, 0.8) {
		got = append(got, tk.Label)
	}
	if s := strings.Join(got, " "); s != "0.0 0.2 0.4 0.6 0.8" {
		t.Errorf("linear ticks %q", s)
	}
	got = nil
	for _, tk := range (linTicks{}).Ticks(-1e-10, 6e-10) {
		got = append(got, tk.Label)
	}
	if s := strings.Join(got, " "); s != "-1e-10 0 1e-10 2e-10 3e-10 4e-10 5e-10 6e-10" {
		t.Errorf("tiny linear ticks %q", s)
	}
}

// TestPlaceLabels checks the placement invariants on random dense clouds:
// every label inside the bounds, no two labels overlapping, no label over a
// marker, whenever the layout reports success.
func TestPlaceLabels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bounds := rect{0, 0, 800, 500}
	p := layoutParams{MarkerR: 5, Gap: 3, Pad: 2, Rings: 16, Step: 9}
	for trial := 0; trial < 20; trial++ {
		n := 10 + trial*2
		in := make([]labelInput, n)
		for i := range in {
			in[i] = labelInput{X: 50 + rng.Float64()*700, Y: 30 + rng.Float64()*440, W: 40 + rng.Float64()*40, H: 22}
		}
		out := placeLabels(in, bounds, nil, nil, p)
		again := placeLabels(in, bounds, nil, nil, p)
		for i := range out {
			if out[i] != again[i] {
				t.Fatalf("trial %d: placement not deterministic", trial)
			}
			if out[i].Overlaps {
				t.Errorf("trial %d (n=%d): label %d could not be placed", trial, n, i)
				continue
			}
			b := out[i].Box
			if !inside(b, bounds) {
				t.Errorf("trial %d: label %d outside bounds: %+v", trial, i, b)
			}
			if math.Abs(b.w()-in[i].W) > 1e-9 || math.Abs(b.h()-in[i].H) > 1e-9 {
				t.Errorf("trial %d: label %d resized", trial, i)
			}
			for j := range out {
				if j != i && overlap(b, out[j].Box) > 0 {
					t.Errorf("trial %d: labels %d and %d overlap", trial, i, j)
				}
				m := rect{in[j].X - p.MarkerR, in[j].Y - p.MarkerR, in[j].X + p.MarkerR, in[j].Y + p.MarkerR}
				if overlap(b, m) > 0 {
					t.Errorf("trial %d: label %d covers marker %d", trial, i, j)
				}
			}
			// A label next to its point needs no leader; a far one has one.
			d := math.Hypot(in[i].X-math.Max(b.MinX, math.Min(in[i].X, b.MaxX)), in[i].Y-math.Max(b.MinY, math.Min(in[i].Y, b.MaxY)))
			if !out[i].Leader && d > p.MarkerR+p.Gap+1e-9 {
				t.Errorf("trial %d: label %d is %.1f pt away without a leader", trial, i, d)
			}
		}
	}
	// Impossible case: more labels than fit are reported, not hidden.
	var crowd []labelInput
	for i := 0; i < 60; i++ {
		crowd = append(crowd, labelInput{X: 50, Y: 50, W: 60, H: 20})
	}
	bad := 0
	for _, pl := range placeLabels(crowd, rect{0, 0, 100, 100}, nil, nil, p) {
		if pl.Overlaps {
			bad++
		}
	}
	if bad == 0 {
		t.Error("60 labels in a 100×100 box reported as placed without overlap")
	}
}

func TestSegHitsRect(t *testing.T) {
	r := rect{0, 0, 10, 10}
	for _, c := range []struct {
		s    segment
		want bool
	}{
		{segment{-5, 5, 15, 5}, true},
		{segment{-5, -5, -1, 20}, false},
		{segment{5, 5, 6, 6}, true},
		{segment{-5, 12, 12, -5}, true},
		{segment{-5, 26, 26, -5}, false},
	} {
		if got := segHitsRect(c.s, r); got != c.want {
			t.Errorf("segHitsRect(%+v) = %v", c.s, got)
		}
	}
}

func TestSegsCross(t *testing.T) {
	for _, c := range []struct {
		a, b segment
		want bool
	}{
		{segment{0, 0, 10, 10}, segment{0, 10, 10, 0}, true},
		{segment{0, 0, 10, 0}, segment{0, 1, 10, 1}, false},
		{segment{0, 0, 10, 10}, segment{10, 10, 20, 0}, false}, // shared end point
		{segment{0, 0, 2, 2}, segment{5, 0, 0, 5}, false},      // would cross if longer
	} {
		if got := segsCross(c.a, c.b); got != c.want {
			t.Errorf("segsCross(%v, %v) = %v", c.a, c.b, got)
		}
	}
}

func TestErrorBars(t *testing.T) {
	ms := []Model{
		{Label: "A 1", BPW: 4, PPL: 8, PPLLo: 7.5, PPLHi: 8.6},
		{Label: "A 2", BPW: 5, PPL: 7.5, PPLLo: 7.4, PPLHi: 7.6},
		{Label: "B 1", BPW: 6, PPL: 7.2}, // no interval
	}
	bars := func(o Options) int {
		data, _ := render(t, "svg", ms, o)
		// A bar and its two caps are plain 1-pt (default width) strokes in
		// the family colour.
		return strings.Count(string(data), `style="fill:none;stroke:#1F77B4" />`)
	}
	if n := bars(Options{}); n != 0 {
		t.Errorf("%d bar strokes without ErrorBars", n)
	}
	if n := bars(Options{ErrorBars: true}); n != 6 {
		t.Errorf("%d bar strokes, want 3 per interval × 2", n)
	}
	// The axis covers the intervals: up to 8.6 instead of 8.0.
	data, _ := render(t, "svg", ms, Options{ErrorBars: true})
	if texts := strings.Join(svgTexts(t, data), " "); !strings.Contains(texts, " 8.50 ") {
		t.Errorf("y ticks %q do not reach the interval", texts)
	}
	data, _ = render(t, "svg", ms, Options{})
	if texts := strings.Join(svgTexts(t, data), " "); strings.Contains(texts, "8.50") {
		t.Errorf("y ticks %q reach 8.5 without error bars", texts)
	}
}

func TestFromResult(t *testing.T) {
	r := compare.Result{Label: "W4A16 g128", Model: "/m", BPWLayer: 4.25, VRAMGB: 0.5, PPL: 9.5,
		KLD: &compare.KLDStats{Mean: 0.02, Percentiles: compare.Percentiles{P1: 1e-4, P10: 1e-3, P50: 0.01, P90: 0.05, P99: 0.2, Max: 1}}}
	r.PPLSE = 0.5
	r.KLD.MeanSE = 0.001
	m := FromResult(r, false)
	if m.Label != "W4A16 g128" || m.BPW != 4.25 || m.KLD != 0.02 || !m.HasKLD || len(m.KLDQuantiles) != 13 {
		t.Errorf("FromResult = %+v", m)
	}
	if m.PPLLo != 9.5-0.98 || m.PPLHi != 9.5+0.98 || m.KLDLo != 0.02-0.00196 || m.KLDHi != 0.02+0.00196 {
		t.Errorf("intervals %v %v %v %v", m.PPLLo, m.PPLHi, m.KLDLo, m.KLDHi)
	}
	r.PPLBootstrap = &compare.Interval{Lo: 9.1, Hi: 10.2, Level: 0.95}
	if m := FromResult(r, false); m.PPLLo != 9.1 || m.PPLHi != 10.2 {
		t.Errorf("bootstrap interval not used: %v %v", m.PPLLo, m.PPLHi)
	}
	b := FromResult(compare.Result{Model: "/base", BPWLayer: 16, PPL: 9}, true)
	if b.Label != "/base" || !b.IsBase || !b.HasKLD || b.KLD != 0 {
		t.Errorf("base = %+v", b)
	}
}
