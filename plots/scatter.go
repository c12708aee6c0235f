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

// scatterChart builds the x-vs-metric chart.
func scatterChart(models []Model, o Options, th theme) (*chart, Report, error) {
	var rep Report
	colours, err := assignColours(models)
	if err != nil {
		return nil, rep, err
	}
	var fams []*series
	byFam := map[string]*series{}
	var ref *refLine
	for _, m := range models {
		if m.IsBase && o.Y == YPPL && finite(m.PPL) && m.PPL > 0 && keep(m.Label, o.Mask) {
			txt, _, _ := splitLabel(m.Label)
			ref = &refLine{Y: m.PPL, Text: txt + " (base) " + formatValue(m.PPL)}
		}
	}
	if !o.LogY && autoLog(models, o) {
		o.LogY = true
		rep.AutoLogY = true
	}
	for i, m := range models {
		txt, fam, tag := splitLabel(m.Label)
		if !keep(m.Label, o.Mask) {
			rep.Dropped = append(rep.Dropped, txt+": excluded by mask")
			continue
		}
		x := m.BPW
		if o.X == XVRAM {
			x = m.VRAMGB
		}
		var y, lo, hi float64
		switch o.Y {
		case YPPL:
			y, lo, hi = m.PPL, m.PPLLo, m.PPLHi
		case YKLD:
			if !m.HasKLD {
				rep.Dropped = append(rep.Dropped, txt+": no KL divergence (no base model in its run)")
				continue
			}
			y, lo, hi = m.KLD, m.KLDLo, m.KLDHi
		}
		if !o.ErrorBars || !finite(lo) || !finite(hi) || !(lo <= y && y <= hi) {
			lo, hi = y, y
		}
		if o.LogY && lo <= 0 {
			lo = y // a bar reaching 0 is cut at the point on a log axis
		}
		switch {
		case !finite(x) || x <= 0:
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: no %s value (%v)", txt, o.X, x))
			continue
		case !finite(y):
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: %s is %v", txt, o.Y, y))
			continue
		case o.LogY && y <= 0:
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: %s %v cannot be drawn on a log axis", txt, o.Y, y))
			continue
		case o.MaxX > 0 && x > o.MaxX:
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: x %.4g beyond max-x", txt, x))
			continue
		case o.MaxY > 0 && y > o.MaxY:
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s: y %.4g beyond max-y", txt, y))
			continue
		}
		s := byFam[fam]
		if s == nil {
			s = &series{Family: fam, Colour: colours[fam]}
			byFam[fam] = s
			fams = append(fams, s)
		}
		c := s.Colour
		if tag != "" {
			c, _ = namedColour(tag)
		}
		s.Points = append(s.Points, point{Act: actKey(m), Text: txt, X: x, Y: y, Lo: lo, Hi: hi, Model: i, Colour: c})
	}
	if len(fams) == 0 {
		return nil, rep, fmt.Errorf("plot: no model has a plottable %s value (%d given, %d dropped)", o.Y, len(models), len(rep.Dropped))
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, s := range fams {
		sort.SliceStable(s.Points, func(a, b int) bool { return s.Points[a].X < s.Points[b].X })
		for _, p := range s.Points {
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Lo), math.Max(ymax, p.Hi)
			rep.Points++
		}
	}

	if ref != nil && (o.MaxY == 0 || ref.Y <= o.MaxY) {
		ymin, ymax = math.Min(ymin, ref.Y), math.Max(ymax, ref.Y)
	} else {
		ref = nil
	}
	xlabel, ylabel := LabelBPW, LabelPPL
	if o.X == XVRAM {
		xlabel = LabelVRAM
	}
	if o.Y == YKLD {
		ylabel = LabelKLD
	}
	p := newPlot(th, xlabel, "")
	p.X.Min, p.X.Max = padRange(xmin, xmax, 0.06, 0.08, false)
	p.Y.Min, p.Y.Max = padRange(ymin, ymax, 0.07, 0.10, o.LogY)
	p.X.Tick.Marker = linTicks{}
	p.Y.Tick.Marker = linTicks{}
	if o.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	// The lowest point must not sit below the lowest labelled tick.
	p.Y.Min = coverLow(p.Y.Tick.Marker, p.Y.Min, p.Y.Max, ymin, o.LogY)
	sc := &scatterBody{series: fams, th: th, ref: ref}
	p.Add(gridPlotter{th.grid}, sc)

	title := o.Title
	if title == "" {
		title = DefaultTitle(o.X, o.Y)
	}
	ch := &chart{title: title, subtitle: o.Subtitle, plot: p, ylabel: ylabel, height: 8 * vg.Inch, body: sc}
	if o.LogY {
		ch.ylabelNote = "(log scale)"
	}
	for _, s := range fams {
		ch.legend = append(ch.legend, legendEntry{name: s.Family, colour: s.Colour, line: len(s.lines()) > 0})
	}
	return ch, rep, nil
}

// lines returns the family's trade-off curves: its points grouped by
// activation scheme (points that differ only in weight bits), in x order,
// groups of at least two points, in order of their first point.
func (s *series) lines() [][]int {
	var keys []string
	groups := map[string][]int{}
	for i, p := range s.Points {
		if _, ok := groups[p.Act]; !ok {
			keys = append(keys, p.Act)
		}
		groups[p.Act] = append(groups[p.Act], i)
	}
	var out [][]int
	for _, k := range keys {
		if len(groups[k]) > 1 {
			out = append(out, groups[k])
		}
	}
	return out
}

// autoLogDecades is the span of values (max/min, in decades) beyond which
// a chart's value axis is logarithmic without Options.LogY: on a linear
// axis the smaller values would all sit on the floor.
const autoLogDecades = 2

// autoLog reports whether the positive values the chart would draw span
// more than autoLogDecades decades.
func autoLog(models []Model, o Options) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, m := range models {
		if !keep(m.Label, o.Mask) {
			continue
		}
		y := m.PPL
		if o.Y == YKLD {
			if !m.HasKLD {
				continue
			}
			y = m.KLD
		}
		if !finite(y) || y <= 0 || (o.MaxY > 0 && y > o.MaxY) {
			continue
		}
		lo, hi = math.Min(lo, y), math.Max(hi, y)
	}
	return hi > 0 && lo > 0 && math.Log10(hi/lo) > autoLogDecades
}

// coverLow lowers an axis minimum so that the lowest labelled tick is at or
// below low (the lowest value drawn): no point sits below the last number
// of the axis.
func coverLow(m plot.Ticker, min, max, low float64, log bool) float64 {
	for range 8 {
		var labelled []float64
		for _, t := range m.Ticks(min, max) {
			if t.Label != "" && t.Value >= min && t.Value <= max {
				labelled = append(labelled, t.Value)
			}
		}
		if len(labelled) > 0 && labelled[0] <= low*(1+1e-12) {
			return min
		}
		var next float64
		switch {
		case log && low > 0:
			next = math.Pow(10, math.Floor(math.Log10(low)))
		case len(labelled) >= 2:
			step := labelled[1] - labelled[0]
			next = math.Floor(low/step) * step
		default:
			return min
		}
		if !(next < min) {
			return min
		}
		min = next
	}
	return min
}

// refLine is a horizontal reference line with a caption at its right end.
type refLine struct {
	Y    float64
	Text string
}

// scatterBody draws the dotted family lines, the points and their labels.
type scatterBody struct {
	series []*series
	th     theme
	ref    *refLine    // the base model's value, drawn across the chart
	placed []placement // after Plot, for tests and Report
	// After Plot, for tests: every marker's centre (series order, then
	// point order; the order of placed), its data position, and the data
	// area, in canvas points.
	markers []vg.Point
	data    []vg.Point
	area    rect
}

func (b *scatterBody) overlapCount() int {
	n := 0
	for _, p := range b.placed {
		if p.Overlaps {
			n++
		}
	}
	return n
}

const (
	markerR   = 4.0 // point marker radius, points
	labelSize = 8.5 // point label font size, points
)

func (b *scatterBody) Plot(c draw.Canvas, plt *plot.Plot) {
	tx0, ty := plt.Transforms(&c)
	th := b.th
	// Marker centres: the data positions, with markers that would hide one
	// another moved apart sideways (dodge) so that every one is visible.
	var data []vg.Point
	for _, s := range b.series {
		for _, p := range s.Points {
			data = append(data, vg.Point{X: tx0(p.X), Y: ty(p.Y)})
		}
	}
	area := rect{float64(c.Min.X), float64(c.Min.Y), float64(c.Max.X), float64(c.Max.Y)}
	at := dodge(data, 2*markerR+1, area.inflate(-(markerR + 1.5)))
	b.markers, b.data, b.area = at, data, area
	pos := map[*point]vg.Point{}
	k := 0
	for _, s := range b.series {
		for i := range s.Points {
			pos[&s.Points[i]] = at[k]
			k++
		}
	}
	tx := func(p *point) vg.Length { return pos[p].X }

	// Dotted lines joining each family's points of one activation scheme,
	// sorted by x.
	var segs []segment
	for _, s := range b.series {
		for _, line := range s.lines() {
			pts := make([]vg.Point, len(line))
			for i, j := range line {
				pts[i] = pos[&s.Points[j]]
				if i > 0 {
					segs = append(segs, segment{float64(pts[i-1].X), float64(pts[i-1].Y), float64(pts[i].X), float64(pts[i].Y)})
				}
			}
			c.StrokeLines(draw.LineStyle{Color: s.Colour, Width: vg.Points(1.4), Dashes: []vg.Length{vg.Points(1.5), vg.Points(3)}}, pts)
		}
	}

	// Error bars (with caps), obstacles for the labels like the lines.
	for _, s := range b.series {
		for i := range s.Points {
			p := &s.Points[i]
			if p.Lo == p.Hi {
				continue
			}
			x, y0, y1 := tx(p), ty(p.Lo), ty(p.Hi)
			st := draw.LineStyle{Color: s.Colour, Width: vg.Points(1)}
			capW := vg.Points(3.5)
			c.StrokeLine2(st, x, y0, x, y1)
			c.StrokeLine2(st, x-capW, y0, x+capW, y0)
			c.StrokeLine2(st, x-capW, y1, x+capW, y1)
			segs = append(segs, segment{float64(x), float64(y0), float64(x), float64(y1)})
		}
	}

	// Labels: measure, then place.
	nameSt := th.style(labelSize, false, th.ink)
	valSt := th.style(labelSize, true, th.ink)
	lineH := float64(nameSt.Height("Hg"))
	var fixed []rect
	if b.ref != nil {
		y := ty(b.ref.Y)
		c.StrokeLine2(draw.LineStyle{Color: th.soft, Width: vg.Points(0.9), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}, c.Min.X, y, c.Max.X, y)
		segs = append(segs, segment{float64(c.Min.X), float64(y), float64(c.Max.X), float64(y)})
		// Caption at an end of the line, above or below it: the position
		// clear of markers and lines (right-above first on ties).
		st := th.style(labelSize, false, th.soft)
		txt := th.str(b.ref.Text)
		w := float64(st.Width(txt))
		var box rect
		bestCost := math.Inf(1)
		for _, cand := range [...][2]float64{{1, 1}, {1, -1}, {0, 1}, {0, -1}, {0.5, 1}, {0.5, -1}, {0.25, 1}, {0.25, -1}, {0.75, 1}, {0.75, -1}} {
			x0 := float64(c.Min.X) + 4 + cand[0]*(float64(c.Max.X-c.Min.X)-8-w)
			y0 := float64(y) + 2
			if cand[1] < 0 {
				y0 = float64(y) - 2 - lineH
			}
			r := rect{x0, y0, x0 + w, y0 + lineH}
			cost := 0.0
			for _, sg := range segs {
				if segHitsRect(sg, r) {
					cost++
				}
			}
			for _, m := range at {
				px, py := float64(m.X), float64(m.Y)
				cost += 100 * overlap(r, rect{px - markerR - 2, py - markerR - 2, px + markerR + 2, py + markerR + 2})
			}
			if cost < bestCost {
				box, bestCost = r, cost
			}
		}
		st.XAlign, st.YAlign = draw.XLeft, draw.YBottom
		c.FillText(st, vg.Point{X: vg.Length(box.MinX), Y: vg.Length(box.MinY)}, txt)
		fixed = append(fixed, box)
	}
	var (
		in   []labelInput
		refs []point
	)
	for _, s := range b.series {
		for i := range s.Points {
			p := &s.Points[i]
			w := math.Max(float64(nameSt.Width(th.str(p.Text))), float64(valSt.Width(formatValue(p.Y)))) + 4
			in = append(in, labelInput{X: float64(pos[p].X), Y: float64(pos[p].Y), W: w, H: 2*lineH + 2})
			refs = append(refs, *p)
		}
	}
	bounds := rect{float64(c.Min.X) + 2, float64(c.Min.Y) + 2, float64(c.Max.X) - 2, float64(c.Max.Y) - 2}
	b.placed = placeLabels(in, bounds, segs, fixed, layoutParams{MarkerR: markerR + 1, Gap: 3, Pad: 2, Rings: 20, Step: lineH * 0.9})

	// Leader lines under everything else.
	leader := draw.LineStyle{Color: color.RGBA{0xa0, 0xa4, 0xaa, 0xff}, Width: vg.Points(0.7)}
	for i, pl := range b.placed {
		if !pl.Leader {
			continue
		}
		s := leaderSegment(in[i].X, in[i].Y, pl.Box)
		// Start at the marker's edge.
		dx, dy := s.X1-s.X0, s.Y1-s.Y0
		d := math.Hypot(dx, dy)
		if d <= markerR+1 {
			continue
		}
		f := (markerR + 1) / d
		c.StrokeLine2(leader, vg.Length(s.X0+dx*f), vg.Length(s.Y0+dy*f), vg.Length(s.X1), vg.Length(s.Y1))
	}
	// Label backgrounds, then the points (never hidden by a label that
	// could not avoid them), then the text.
	for _, pl := range b.placed {
		box := pl.Box
		c.FillPolygon(color.NRGBA{0xff, 0xff, 0xff, 0xc8}, []vg.Point{
			{X: vg.Length(box.MinX), Y: vg.Length(box.MinY)}, {X: vg.Length(box.MaxX), Y: vg.Length(box.MinY)},
			{X: vg.Length(box.MaxX), Y: vg.Length(box.MaxY)}, {X: vg.Length(box.MinX), Y: vg.Length(box.MaxY)},
		})
	}
	// Points: filled circles with a white rim.
	for i, p := range refs {
		c.DrawGlyph(draw.GlyphStyle{Color: color.White, Radius: vg.Points(markerR + 1.2), Shape: draw.CircleGlyph{}}, at[i])
		c.DrawGlyph(draw.GlyphStyle{Color: p.Colour, Radius: vg.Points(markerR), Shape: draw.CircleGlyph{}}, at[i])
	}
	// Label text: name on top, value (bold, in the point's colour) below,
	// centred in the box, over a translucent white background.
	for i, pl := range b.placed {
		p := refs[i]
		box := pl.Box
		cx := vg.Length((box.MinX + box.MaxX) / 2)
		n := nameSt
		n.XAlign, n.YAlign = draw.XCenter, draw.YTop
		c.FillText(n, vg.Point{X: cx, Y: vg.Length(box.MaxY - 1)}, th.str(p.Text))
		v := valSt
		v.Color = darken(p.Colour)
		v.XAlign, v.YAlign = draw.XCenter, draw.YBottom
		c.FillText(v, vg.Point{X: cx, Y: vg.Length(box.MinY + 1)}, formatValue(p.Y))
	}
}

// dodge returns the marker centres pts moved apart so that no two are
// closer than minDist, deterministically: overlapping pairs are pushed
// apart along the line joining them (sideways when they coincide), each by
// half the shortfall, until none overlaps (or after a bounded number of
// rounds); centres stay within bounds. Markers that do not overlap do not
// move.
func dodge(pts []vg.Point, minDist float64, bounds rect) []vg.Point {
	out := append([]vg.Point(nil), pts...)
	for round := 0; round < 200; round++ {
		moved := false
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				dx, dy := float64(out[j].X-out[i].X), float64(out[j].Y-out[i].Y)
				d := math.Hypot(dx, dy)
				if d >= minDist-1e-9 {
					continue
				}
				ux, uy := 1.0, 0.0 // coincident: side by side, i left of j
				if d > 1e-9 {
					ux, uy = dx/d, dy/d
				}
				h := (minDist - d) / 2
				out[i].X -= vg.Length(ux * h)
				out[i].Y -= vg.Length(uy * h)
				out[j].X += vg.Length(ux * h)
				out[j].Y += vg.Length(uy * h)
				moved = true
			}
		}
		for i := range out {
			out[i].X = vg.Length(math.Min(math.Max(float64(out[i].X), bounds.MinX), bounds.MaxX))
			out[i].Y = vg.Length(math.Min(math.Max(float64(out[i].Y), bounds.MinY), bounds.MaxY))
		}
		if !moved {
			break
		}
	}
	return out
}

// DataRange implements plot.DataRanger (axis ranges are set explicitly).
func (b *scatterBody) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, s := range b.series {
		for _, p := range s.Points {
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
		}
	}
	return
}

// darken returns c at 80% brightness, for text on white.
func darken(c color.RGBA) color.RGBA {
	return color.RGBA{uint8(float64(c.R) * 0.8), uint8(float64(c.G) * 0.8), uint8(float64(c.B) * 0.8), c.A}
}
