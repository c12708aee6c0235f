package plots

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/qppl/qppl/compare"
)

// exampleModels reads docs/example-results.json (the result set behind the
// README's and docs/plots.md's charts) as `qppl plot` does.
func exampleModels(t *testing.T) []Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "example-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rs struct {
		Base    string           `json:"base"`
		Results []compare.Result `json:"results"`
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	var ms []Model
	for _, r := range rs.Results {
		isBase := r.Label == rs.Base
		r.Label = ResultLabel(r)
		ms = append(ms, FromResult(r, isBase))
	}
	return ms
}

// drawScatter builds and draws a scatter chart as Render does (PNG size and
// resolution) and returns its body with the geometry it drew.
func drawScatter(t *testing.T, ms []Model, o Options) (*chart, *scatterBody, Report) {
	t.Helper()
	th := newTheme("png")
	ch, rep, err := scatterChart(ms, o, th)
	if err != nil {
		t.Fatal(err)
	}
	c := draw.New(vgimg.NewWith(vgimg.UseWH(12*vg.Inch, ch.height), vgimg.UseDPI(144)))
	ch.draw(c, th)
	return ch, ch.body.(*scatterBody), rep
}

// issue 11 item 13: the README's and docs/plots.md's charts (and the dense
// sample set) have no two labels or markers overlapping, every point and
// label inside the axes, every label nearest its own marker or joined to it
// by a leader that crosses no other leader and passes no other marker,
// markers moved (to keep them all visible) by less than their diameter,
// and no point below the lowest labelled tick.
func TestChartGeometry(t *testing.T) {
	example := exampleModels(t)
	for _, tc := range []struct {
		name  string
		ms    []Model
		o     Options
		dense bool // a stress set: leaders may cross where no layout avoids it
	}{
		{"README kld", example, Options{Y: YKLD, LogY: true, Title: "tiny-wt2-mistral: KL divergence vs bits per weight", Subtitle: "wikitext2, 20 × 256 tokens"}, false},
		{"kld auto log", example, Options{Y: YKLD}, false},
		{"plots.md ppl", example, Options{Y: YPPL, MaxX: 9, Title: "tiny-wt2-mistral: perplexity vs bits per weight", Subtitle: "wikitext2, 20 × 256 tokens"}, false},
		{"plain kld", example, Options{Y: YKLD, LogY: true}, false},
		{"ppl vram", example, Options{Y: YPPL, X: XVRAM, MaxX: 0.009}, false},
		{"sample kld", sampleModels(), Options{Y: YKLD}, true},
		{"sample ppl", sampleModels(), Options{Y: YPPL}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, b, _ := drawScatter(t, tc.ms, tc.o)
			n := len(b.markers)
			if n == 0 || len(b.placed) != n {
				t.Fatalf("%d markers, %d labels", n, len(b.placed))
			}
			var texts []string
			for _, s := range b.series {
				for _, p := range s.Points {
					texts = append(texts, p.Text)
				}
			}
			mbox := func(i int) rect {
				m := b.markers[i]
				return rect{float64(m.X) - markerR, float64(m.Y) - markerR, float64(m.X) + markerR, float64(m.Y) + markerR}
			}
			for i := range n {
				if !inside(mbox(i), b.area) {
					t.Errorf("marker of %q at %v is outside the axes %+v", texts[i], b.markers[i], b.area)
				}
				if !inside(b.placed[i].Box, b.area) {
					t.Errorf("label of %q %+v is outside the axes %+v", texts[i], b.placed[i].Box, b.area)
				}
				if d := math.Hypot(float64(b.markers[i].X-b.data[i].X), float64(b.markers[i].Y-b.data[i].Y)); d > 2*markerR {
					t.Errorf("marker of %q moved %.1f pt from its value", texts[i], d)
				}
				for j := i + 1; j < n; j++ {
					if overlap(mbox(i), mbox(j)) > 0 && math.Hypot(float64(b.markers[i].X-b.markers[j].X), float64(b.markers[i].Y-b.markers[j].Y)) < 2*markerR {
						t.Errorf("markers of %q and %q overlap", texts[i], texts[j])
					}
					if overlap(b.placed[i].Box, b.placed[j].Box) > 0 {
						t.Errorf("labels of %q and %q overlap", texts[i], texts[j])
					}
				}
				for j := range n {
					if overlap(b.placed[i].Box, mbox(j)) > 0 {
						t.Errorf("label of %q covers the marker of %q", texts[i], texts[j])
					}
				}
				own := rectDist(b.placed[i].Box, float64(b.markers[i].X), float64(b.markers[i].Y))
				if !b.placed[i].Leader {
					for j := range n {
						if j != i && rectDist(b.placed[i].Box, float64(b.markers[j].X), float64(b.markers[j].Y)) <= own {
							t.Errorf("label of %q is as near the marker of %q as its own", texts[i], texts[j])
						}
					}
					continue
				}
				if tc.dense {
					continue
				}
				li := leaderSegment(float64(b.markers[i].X), float64(b.markers[i].Y), b.placed[i].Box)
				for j := range n {
					if j == i {
						continue
					}
					if segHitsRect(li, mbox(j)) {
						t.Errorf("leader of %q passes through the marker of %q", texts[i], texts[j])
					}
					if segHitsRect(li, b.placed[j].Box) {
						t.Errorf("leader of %q crosses the label of %q", texts[i], texts[j])
					}
					if b.placed[j].Leader {
						lj := leaderSegment(float64(b.markers[j].X), float64(b.markers[j].Y), b.placed[j].Box)
						if segsCross(li, lj) {
							t.Errorf("leaders of %q and %q cross: %+v %+v", texts[i], texts[j], li, lj)
						}
					}
				}
			}
			// No point below the lowest labelled tick.
			low, lowest := math.Inf(1), math.Inf(1)
			for _, s := range b.series {
				for _, p := range s.Points {
					low = math.Min(low, p.Y)
				}
			}
			for _, tk := range ch.plot.Y.Tick.Marker.Ticks(ch.plot.Y.Min, ch.plot.Y.Max) {
				if tk.Label != "" && tk.Value >= ch.plot.Y.Min {
					lowest = math.Min(lowest, tk.Value)
				}
			}
			if lowest > low*(1+1e-12) {
				t.Errorf("lowest point %v is below the lowest labelled tick %v", low, lowest)
			}
		})
	}
}

// A KLD axis spanning more than two decades is logarithmic without LogY
// (8-bit points were squashed onto 0); a narrow one stays linear.
func TestAutoLogScale(t *testing.T) {
	ch, _, rep := drawScatter(t, exampleModels(t), Options{Y: YKLD})
	if !rep.AutoLogY || ch.ylabelNote != "(log scale)" {
		t.Errorf("example KLD: auto log %v, note %q", rep.AutoLogY, ch.ylabelNote)
	}
	_, _, rep = drawScatter(t, exampleModels(t), Options{Y: YPPL})
	if rep.AutoLogY {
		t.Error("PPL 490–513 drawn on a log axis")
	}
	ms := []Model{{Label: "A 1", BPW: 4, KLD: 0.01, HasKLD: true}, {Label: "A 2", BPW: 5, KLD: 0.002, HasKLD: true}}
	if _, _, rep := drawScatter(t, ms, Options{Y: YKLD}); rep.AutoLogY {
		t.Error("one decade drawn on a log axis")
	}
}

// Family lines join points that differ in weight bits only: NVFP4 W4A16 and
// W4A4, INT8 W8A16 and W8A8, FP8 static and dynamic (other activation
// schemes) are not joined; the INT4 weight-only variants are.
func TestFamilyLinesSameActivation(t *testing.T) {
	_, b, _ := drawScatter(t, exampleModels(t), Options{Y: YKLD, LogY: true})
	lines := map[string]int{}
	for _, s := range b.series {
		for _, l := range s.lines() {
			lines[s.Family] += len(l)
		}
	}
	want := map[string]int{"INT4": 3}
	if len(lines) != len(want) || lines["INT4"] != 3 {
		t.Errorf("joined points per family %v, want %v", lines, want)
	}
	for _, c := range []struct {
		label, format, act string
	}{
		{"NVFP4 W4A4", "", "a4"}, {"NVFP4 W4A16", "", ""}, {"INT8 W8A8", "", "a8"}, {"X", "fp8-channel+a-fp8-token", "fp8-token"},
		{"NVFP4 W4A4", "nvfp4+a-nvfp4", "nvfp4"}, {"EXL3 4.0", "", ""},
	} {
		if got := actKey(Model{Label: c.label, Act: formatAct(c.format)}); got != c.act {
			t.Errorf("actKey(%q, %q) = %q, want %q", c.label, c.format, got, c.act)
		}
	}
}
