package plots

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// distRow is one model of the distribution chart.
type distRow struct {
	Text    string
	Colour  color.RGBA
	BPW     float64
	Mean    float64
	P       map[float64]float64 // percentile → value, as given
	clamped bool
}

// Percentiles the distribution chart needs; P0.1, P99.9 and max are drawn
// when present.
var distRequired = []float64{1, 10, 50, 90, 99}

// distChart builds the per-model KL-divergence distribution chart: one
// horizontal box per model on a log axis (box P10–P90, whiskers P1–P99,
// median line, mean diamond, P99.9 and max as open circles).
func distChart(models []Model, o Options, th theme) (*chart, Report, error) {
	var rep Report
	colours, err := assignColours(models)
	if err != nil {
		return nil, rep, err
	}
	famOrder := map[string]int{}
	var rows []distRow
	var famRows []string
	for _, m := range models {
		txt, fam, tag := splitLabel(m.Label)
		if !keep(m.Label, o.Mask) {
			rep.Dropped = append(rep.Dropped, txt+": excluded by mask")
			continue
		}
		if m.IsBase {
			rep.Dropped = append(rep.Dropped, txt+": KL reference (divergence 0)")
			continue
		}
		if !m.HasKLD {
			rep.Dropped = append(rep.Dropped, txt+": no KL divergence (no base model in its run)")
			continue
		}
		x := m.BPW
		if o.X == XVRAM {
			x = m.VRAMGB
		}
		if o.MaxX > 0 && x > o.MaxX {
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: x %.4g beyond max-x", txt, x))
			continue
		}
		if o.MaxY > 0 && m.KLD > o.MaxY {
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: mean KLD %.4g beyond max-y", txt, m.KLD))
			continue
		}
		ps := map[float64]float64{}
		for _, q := range m.KLDQuantiles {
			ps[q.P] = q.Value
		}
		missing := false
		for _, r := range distRequired {
			if v, ok := ps[r]; !ok || !finite(v) {
				missing = true
			}
		}
		if missing {
			return nil, rep, fmt.Errorf("plot: %s: KLD percentiles P1, P10, P50, P90 and P99 are required for kld-dist", txt)
		}
		c := colours[fam]
		if tag != "" {
			c, _ = namedColour(tag)
		}
		if _, ok := famOrder[fam]; !ok {
			famOrder[fam] = len(famOrder)
			famRows = append(famRows, fam)
		}
		rows = append(rows, distRow{Text: txt, Colour: c, BPW: x, Mean: m.KLD, P: ps})
	}
	if len(rows) == 0 {
		return nil, rep, fmt.Errorf("plot: no model has a KL-divergence distribution to draw (%d given, %d dropped)", len(models), len(rep.Dropped))
	}
	// Families in order of appearance, then by x, top to bottom.
	sort.SliceStable(rows, func(a, b int) bool {
		fa, fb := famOrder[firstWord(rows[a].Text)], famOrder[firstWord(rows[b].Text)]
		if fa != fb {
			return fa < fb
		}
		return rows[a].BPW < rows[b].BPW
	})
	// Log axis floor: values <= 0 (exact agreement, or float rounding) are
	// drawn at a floor a factor 2 below the smallest positive value.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, q := range []float64{0.1, 1, 10, 50, 90, 99, 99.9, 100} {
			if v, ok := r.P[q]; ok && v > 0 && finite(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if r.Mean > 0 {
			lo, hi = math.Min(lo, r.Mean), math.Max(hi, r.Mean)
		}
	}
	if math.IsInf(lo, 0) {
		return nil, rep, fmt.Errorf("plot: every KL-divergence percentile is zero; nothing to draw on a log axis")
	}
	floor := lo / 2
	for i := range rows {
		for _, p := range []float64{0.1, 1, 10, 50, 90, 99, 99.9, 100} {
			if v, ok := rows[i].P[p]; ok && !(v > 0) {
				rows[i].P[p] = floor
				rows[i].clamped = true
			}
		}
		if rows[i].clamped {
			rep.Clamped = append(rep.Clamped, fmt.Sprintf("%s: values <= 0 drawn at %.3g", rows[i].Text, floor))
		}
	}
	rep.Points = len(rows)

	names := make([]string, len(rows))
	for i, r := range rows {
		names[len(rows)-1-i] = th.str(r.Text)
	}
	p := newPlot(th, "Per-position "+LabelKLD+" (log scale)", "")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	p.X.Min, p.X.Max = padRange(floor, hi, 0.04, 0.18, true)
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.7, float64(len(rows))-0.3
	p.Y.Tick.Label = th.style(10, false, th.ink)
	p.Y.Tick.Label.XAlign, p.Y.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.Y.Tick.Length = 0
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	body := &distBody{rows: rows, th: th}
	p.Add(gridPlotter{th.grid}, body)

	title := o.Title
	if title == "" {
		title = DefaultTitle(o.X, o.Y)
	}
	h := vg.Length(float64(len(rows))*0.42+2.6) * vg.Inch
	if h < 5*vg.Inch {
		h = 5 * vg.Inch
	}
	ch := &chart{title: title, subtitle: o.Subtitle, plot: p, height: h, body: body}
	for _, f := range famRows {
		ch.legend = append(ch.legend, legendEntry{name: f, colour: colours[f]})
	}
	grey := color.RGBA{0x55, 0x5a, 0x60, 0xff}
	ch.key = []keyEntry{
		{"box P10–P90", func(c *draw.Canvas, at vg.Point) {
			boxAt(c, at.X-vg.Points(8), at.X+vg.Points(8), at.Y, vg.Points(5), grey)
		}},
		{"whiskers P1–P99", func(c *draw.Canvas, at vg.Point) {
			c.StrokeLine2(draw.LineStyle{Color: grey, Width: vg.Points(1)}, at.X-vg.Points(10), at.Y, at.X+vg.Points(10), at.Y)
		}},
		{"median", func(c *draw.Canvas, at vg.Point) {
			c.StrokeLine2(draw.LineStyle{Color: th.ink, Width: vg.Points(2)}, at.X, at.Y-vg.Points(6), at.X, at.Y+vg.Points(6))
		}},
		{"mean (value printed)", func(c *draw.Canvas, at vg.Point) { diamond(c, at, grey) }},
		{"P99.9 and max", func(c *draw.Canvas, at vg.Point) {
			c.DrawGlyph(draw.GlyphStyle{Color: grey, Radius: vg.Points(2.5), Shape: draw.RingGlyph{}}, at)
		}},
	}
	if _, ok := rows[0].P[0.1]; ok {
		ch.key[len(ch.key)-1].name = "P0.1, P99.9 and max"
	}
	return ch, rep, nil
}

func firstWord(s string) string {
	_, f, _ := splitLabel(s)
	return f
}

// distBody draws the boxes.
type distBody struct {
	rows []distRow
	th   theme
}

func (b *distBody) overlapCount() int { return 0 }

func (b *distBody) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	half := (ty(0.5) - ty(0)) * 0.55
	if half > vg.Points(11) {
		half = vg.Points(11)
	}
	valSt := b.th.style(8.5, true, b.th.ink)
	valSt.XAlign, valSt.YAlign = draw.XLeft, draw.YCenter
	for i, r := range b.rows {
		y := ty(float64(len(b.rows) - 1 - i))
		whisk := draw.LineStyle{Color: r.Colour, Width: vg.Points(1.2)}
		x1, x99 := tx(r.P[1]), tx(r.P[99])
		c.StrokeLine2(whisk, x1, y, x99, y)
		c.StrokeLine2(whisk, x1, y-half*0.5, x1, y+half*0.5)
		c.StrokeLine2(whisk, x99, y-half*0.5, x99, y+half*0.5)
		boxAt(&c, tx(r.P[10]), tx(r.P[90]), y, half, r.Colour)
		c.StrokeLine2(draw.LineStyle{Color: b.th.ink, Width: vg.Points(2)}, tx(r.P[50]), y-half, tx(r.P[50]), y+half)
		right := x99
		for _, q := range []float64{0.1, 99.9, 100} {
			if v, ok := r.P[q]; ok {
				at := vg.Point{X: tx(v), Y: y}
				c.DrawGlyph(draw.GlyphStyle{Color: r.Colour, Radius: vg.Points(2.5), Shape: draw.RingGlyph{}}, at)
				if at.X > right {
					right = at.X
				}
			}
		}
		if r.Mean > 0 {
			diamond(&c, vg.Point{X: tx(r.Mean), Y: y}, darken(r.Colour))
		}
		valSt.Color = darken(r.Colour)
		c.FillText(valSt, vg.Point{X: right + vg.Points(6), Y: y}, formatValue(r.Mean))
	}
}

// boxAt draws a translucent box with an outline from x0 to x1 around y.
func boxAt(c *draw.Canvas, x0, x1, y, half vg.Length, col color.RGBA) {
	pts := []vg.Point{{X: x0, Y: y - half}, {X: x1, Y: y - half}, {X: x1, Y: y + half}, {X: x0, Y: y + half}}
	fill := col
	fill.R = uint8(255 - (255-int(col.R))*45/100)
	fill.G = uint8(255 - (255-int(col.G))*45/100)
	fill.B = uint8(255 - (255-int(col.B))*45/100)
	c.FillPolygon(fill, pts)
	c.StrokeLines(draw.LineStyle{Color: col, Width: vg.Points(1)}, append(pts, pts[0]))
}

// diamond draws a white-filled diamond outlined in col.
func diamond(c *draw.Canvas, at vg.Point, col color.RGBA) {
	r := vg.Points(4.5)
	pts := []vg.Point{{X: at.X, Y: at.Y + r}, {X: at.X + r, Y: at.Y}, {X: at.X, Y: at.Y - r}, {X: at.X - r, Y: at.Y}}
	c.FillPolygon(color.White, pts)
	c.StrokeLines(draw.LineStyle{Color: col, Width: vg.Points(1.3)}, append(pts, pts[0]))
}
