package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"

	xfont "golang.org/x/image/font"

	"github.com/qppl/qppl/compare"
)

// Options configure a chart.
type Options struct {
	X    XAxis // bpw (default) or vram
	Y    YAxis // ppl (default), kld or kld-dist
	LogY bool  // logarithmic value axis (always on for kld-dist)
	// ErrorBars draws each point's interval (Model.PPLLo/PPLHi or
	// KLDLo/KLDHi) as a vertical bar.
	ErrorBars bool
	Title     string // default derived from X and Y
	Subtitle  string // e.g. Subtitle("wikitext2", 20, 2048)
	// MaxX and MaxY drop points beyond them (0 = no limit), as compare_q's
	// -mx/-my ("don't plot results beyond").
	MaxX, MaxY float64
	// Mask keeps only models whose label contains one of these substrings
	// (case-insensitive), as compare_q's -mask "A;B". Empty keeps all.
	Mask []string
	// Width and Height of the image (default 12 × 8 in, taller for
	// kld-dist with many models); DPI of PNG output (default 144).
	Width, Height vg.Length
	DPI           int
}

// Report says what a chart shows and what it left out.
type Report struct {
	Points   int      // models drawn
	Dropped  []string // "label: reason" for each model not drawn
	Overlaps int      // labels that could not be placed without overlap
	Clamped  []string // kld-dist: values drawn at the axis floor
	// AutoLogY: the values span more than two decades, so the value axis
	// was made logarithmic although Options.LogY was false.
	AutoLogY bool
}

// ParseMask splits compare_q's "A;B" mask syntax.
func ParseMask(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// FormatOf returns the output format implied by a file name's extension.
func FormatOf(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch ext {
	case "png", "svg", "pdf":
		return ext, nil
	}
	return "", fmt.Errorf("plot file %s: unsupported extension %q (want .png, .svg or .pdf)", path, filepath.Ext(path))
}

// Save renders the chart and writes it atomically to path (format from the
// extension).
func Save(path string, models []Model, o Options) (Report, error) {
	format, err := FormatOf(path)
	if err != nil {
		return Report{}, err
	}
	var buf bytes.Buffer
	rep, err := Render(&buf, format, models, o)
	if err != nil {
		return rep, err
	}
	if err := compare.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	}); err != nil {
		return rep, fmt.Errorf("plot: %w", err)
	}
	return rep, nil
}

// Render draws the chart in format "png", "svg" or "pdf" to w. Nothing is
// written to w unless the whole chart was drawn.
func Render(w io.Writer, format string, models []Model, o Options) (rep Report, err error) {
	// gonum/plot panics on some degenerate geometry; report it as an error
	// (the image is only written after drawing succeeded).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: cannot draw this chart: %v", r)
		}
	}()
	if o.X == "" {
		o.X = XBPW
	}
	if o.Y == "" {
		o.Y = YPPL
	}
	if o.X != XBPW && o.X != XVRAM {
		return Report{}, fmt.Errorf("plot: unknown x axis %q (want bpw or vram)", o.X)
	}
	if o.MaxX < 0 || o.MaxY < 0 || math.IsNaN(o.MaxX) || math.IsNaN(o.MaxY) {
		return Report{}, errors.New("plot: max-x and max-y must be non-negative")
	}
	th := newTheme(format)
	var ch *chart
	switch o.Y {
	case YPPL, YKLD:
		ch, rep, err = scatterChart(models, o, th)
	case YKLDDist:
		ch, rep, err = distChart(models, o, th)
	default:
		return Report{}, fmt.Errorf("plot: unknown y axis %q (want ppl, kld or kld-dist)", o.Y)
	}
	if err != nil {
		return rep, err
	}
	width, height := o.Width, o.Height
	if width <= 0 {
		width = 12 * vg.Inch
	}
	if height <= 0 {
		height = ch.height
	}
	var cw vg.CanvasWriterTo
	switch format {
	case "png":
		dpi := o.DPI
		if dpi <= 0 {
			dpi = 144
		}
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))}
	case "svg":
		cw = vgsvg.New(width, height)
	case "pdf":
		cw = vgpdf.New(width, height)
	default:
		return rep, fmt.Errorf("plot: unknown format %q (want png, svg or pdf)", format)
	}
	c := draw.New(cw)
	ch.draw(c, th)
	if _, err := cw.WriteTo(w); err != nil {
		return rep, fmt.Errorf("plot: write %s: %w", format, err)
	}
	rep.Overlaps = ch.overlaps()
	return rep, nil
}

// theme holds fonts and colours shared by every chart.
type theme struct {
	hdlr  text.Handler
	pdf   bool
	ink   color.RGBA // main text
	soft  color.RGBA // subtitle, secondary text
	grid  color.RGBA
	frame color.RGBA
}

func newTheme(format string) theme {
	return theme{
		hdlr:  plot.DefaultTextHandler,
		pdf:   format == "pdf",
		ink:   color.RGBA{0x22, 0x22, 0x22, 0xff},
		soft:  color.RGBA{0x5f, 0x63, 0x68, 0xff},
		grid:  color.RGBA{0xe3, 0xe5, 0xe8, 0xff},
		frame: color.RGBA{0xb0, 0xb4, 0xb9, 0xff},
	}
}

// style returns a Liberation Sans text style.
func (th theme) style(size float64, bold bool, c color.Color) text.Style {
	f := font.Font{Typeface: "Liberation", Variant: "Sans"}
	// gonum's PDF canvas registers embedded fonts without a style and then
	// asks for "B": bold text fails there, so PDF charts use regular weight.
	if bold && !th.pdf {
		f.Weight = xfont.WeightBold
	}
	return text.Style{Color: c, Font: font.From(f, font.Length(size)), Handler: th.hdlr}
}

// str adapts text to the output: the PDF canvas encodes text as cp1252,
// which lacks a few characters the labels use.
func (th theme) str(s string) string {
	if !th.pdf {
		return s
	}
	return strings.NewReplacer("‖", "||", "−", "-", "…", "...").Replace(s)
}

// chart is a composed figure: header (title, subtitle, legend) and a plot.
type chart struct {
	title, subtitle string
	legend          []legendEntry
	key             []keyEntry // kld-dist: what the box elements mean
	plot            *plot.Plot
	ylabel          string // drawn by chart.draw, not by gonum
	ylabelNote      string // drawn after ylabel, e.g. "(log scale)"
	height          vg.Length
	body            interface{ overlapCount() int }
}

func (ch *chart) overlaps() int {
	if ch.body == nil {
		return 0
	}
	return ch.body.overlapCount()
}

type legendEntry struct {
	name   string
	colour color.RGBA
	line   bool // draw a dotted line sample
}

type keyEntry struct {
	name  string
	glyph func(c *draw.Canvas, at vg.Point)
}

// draw lays out the header and the plot on c.
func (ch *chart) draw(c draw.Canvas, th theme) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	margin := vg.Points(18)
	top := c.Max.Y - margin
	cx := (c.Min.X + c.Max.X) / 2
	if ch.title != "" {
		st := th.style(17, true, th.ink)
		st.XAlign, st.YAlign = draw.XCenter, draw.YTop
		c.FillText(st, vg.Point{X: cx, Y: top}, th.str(ch.title))
		top -= st.Height(ch.title) + vg.Points(6)
	}
	if ch.subtitle != "" {
		st := th.style(11.5, false, th.soft)
		st.XAlign, st.YAlign = draw.XCenter, draw.YTop
		c.FillText(st, vg.Point{X: cx, Y: top}, th.str(ch.subtitle))
		top -= st.Height(ch.subtitle) + vg.Points(10)
	}
	if len(ch.legend) > 0 {
		top = drawLegend(c, th, ch.legend, top, margin)
	}
	if len(ch.key) > 0 {
		top = drawKey(c, th, ch.key, top, margin)
	}
	area := draw.Crop(c, margin, -margin, margin, top-c.Max.Y)
	if ch.ylabel != "" {
		// Drawn here rather than by gonum, whose vertical-label padding
		// assumes a linear scale and squeezes log-scale plots.
		st := th.style(12, false, th.ink)
		st.XAlign, st.YAlign = draw.XCenter, draw.YTop
		st.Rotation = math.Pi / 2
		mid := (area.Min.Y + area.Max.Y) / 2
		label := th.str(ch.ylabel)
		if ch.ylabelNote != "" {
			// The note is its own text, after the label on the same line.
			note := th.str(ch.ylabelNote)
			space := st.Width(" ")
			w1, w2 := st.Width(label), st.Width(note)
			c.FillText(st, vg.Point{X: area.Min.X, Y: mid + (w1+space)/2}, note)
			mid -= (w2 + space) / 2
		}
		c.FillText(st, vg.Point{X: area.Min.X, Y: mid}, label)
		area = draw.Crop(area, st.Height(ch.ylabel)+vg.Points(8), 0, 0, 0)
	}
	ch.plot.Draw(area)
}

// drawLegend draws centred rows of family entries below top and returns
// the new top.
func drawLegend(c draw.Canvas, th theme, entries []legendEntry, top, margin vg.Length) vg.Length {
	st := th.style(10.5, false, th.ink)
	st.YAlign = draw.YCenter
	sample := vg.Points(26)
	gap := vg.Points(18)
	widths := make([]vg.Length, len(entries))
	for i, e := range entries {
		widths[i] = sample + vg.Points(5) + st.Width(e.name)
	}
	avail := c.Max.X - c.Min.X - 2*margin
	rowH := st.Height("Hg") + vg.Points(6)
	for i := 0; i < len(entries); {
		j, w := i, vg.Length(0)
		for j < len(entries) && (j == i || w+gap+widths[j] <= avail) {
			if j > i {
				w += gap
			}
			w += widths[j]
			j++
		}
		x := (c.Min.X+c.Max.X)/2 - w/2
		y := top - rowH/2
		for k := i; k < j; k++ {
			e := entries[k]
			if e.line {
				c.StrokeLine2(draw.LineStyle{Color: e.colour, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(1.5), vg.Points(2.5)}}, x, y, x+sample, y)
			}
			c.DrawGlyph(draw.GlyphStyle{Color: e.colour, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}, vg.Point{X: x + sample/2, Y: y})
			c.FillText(st, vg.Point{X: x + sample + vg.Points(5), Y: y}, th.str(e.name))
			x += widths[k] + gap
		}
		top -= rowH
		i = j
	}
	return top - vg.Points(4)
}

// drawKey draws one centred row explaining the distribution glyphs.
func drawKey(c draw.Canvas, th theme, entries []keyEntry, top, margin vg.Length) vg.Length {
	st := th.style(9.5, false, th.soft)
	st.YAlign = draw.YCenter
	gw, gap := vg.Points(22), vg.Points(16)
	total := vg.Length(0)
	for i, e := range entries {
		if i > 0 {
			total += gap
		}
		total += gw + vg.Points(4) + st.Width(e.name)
	}
	rowH := st.Height("Hg") + vg.Points(6)
	x := (c.Min.X+c.Max.X)/2 - total/2
	y := top - rowH/2
	for _, e := range entries {
		e.glyph(&c, vg.Point{X: x + gw/2, Y: y})
		c.FillText(st, vg.Point{X: x + gw + vg.Points(4), Y: y}, th.str(e.name))
		x += gw + vg.Points(4) + st.Width(e.name) + gap
	}
	return top - rowH - vg.Points(4)
}

// newPlot returns a plot styled for the theme, with grid lines.
func newPlot(th theme, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle = th.style(12, false, th.ink)
		a.Label.TextStyle.XAlign = draw.XCenter
		a.Label.TextStyle.YAlign = draw.YBottom
		a.Label.Padding = vg.Points(6)
		lab := th.style(10, false, th.soft)
		lab.XAlign, lab.YAlign = a.Tick.Label.XAlign, a.Tick.Label.YAlign
		a.Tick.Label = lab
		a.Tick.Color = th.frame
		a.Tick.Width = vg.Points(0.6)
		a.Color = th.frame
		a.Width = vg.Points(0.8)
		a.Padding = 0
	}
	p.X.Label.Text = th.str(xlabel)
	p.Y.Label.Text = th.str(ylabel)
	return p
}

// gridPlotter draws major grid lines (behind the data).
type gridPlotter struct{ colour color.RGBA }

func (g gridPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	st := draw.LineStyle{Color: g.colour, Width: vg.Points(0.6)}
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if t.IsMinor() || t.Value < p.X.Min || t.Value > p.X.Max {
			continue
		}
		x := tx(t.Value)
		c.StrokeLine2(st, x, c.Min.Y, x, c.Max.Y)
	}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if t.IsMinor() || t.Value < p.Y.Min || t.Value > p.Y.Max {
			continue
		}
		y := ty(t.Value)
		c.StrokeLine2(st, c.Min.X, y, c.Max.X, y)
	}
	// A light frame around the data area.
	c.StrokeLines(draw.LineStyle{Color: g.colour, Width: vg.Points(0.8)},
		[]vg.Point{{X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}})
}

// logTicks marks a logarithmic axis: 1-2-5 steps over short ranges, powers
// of ten over long ones, unlabeled minor ticks in between. A range too
// narrow to hold two of those labels (one point, or points within a factor
// of about 2) gets linear "nice" ticks, so the axis always has numbers.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	lo := int(math.Floor(math.Log10(min)))
	hi := int(math.Ceil(math.Log10(max)))
	steps := []float64{1, 2, 5}
	if hi-lo > 3 {
		steps = []float64{1}
	}
	var out []plot.Tick
	labels := 0
	for e := lo; e <= hi; e++ {
		base := math.Pow(10, float64(e))
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < min || v > max {
				continue
			}
			major := false
			for _, s := range steps {
				if float64(m) == s {
					major = true
				}
			}
			t := plot.Tick{Value: v}
			if major {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				labels++
			}
			out = append(out, t)
		}
	}
	if labels < 2 {
		return linTicks{}.Ticks(min, max)
	}
	return out
}

// linTicks marks a linear axis with about eight "nice" steps (1, 2, 2.5
// or 5 × 10^k), labelled with just enough decimals.
type linTicks struct{}

func (linTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) {
		return []plot.Tick{{Value: min, Label: strconv.FormatFloat(min, 'g', 6, 64)}}
	}
	raw := (max - min) / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	dec := 0
	for s := step; dec < 12 && math.Abs(s-math.Round(s)) > 1e-9*step; s *= 10 {
		dec++
	}
	var out []plot.Tick
	for k := math.Ceil(min / step); k*step <= max+1e-9*step; k++ {
		v := k * step
		if math.Abs(v) < 1e-12*step {
			v = 0
		}
		label := strconv.FormatFloat(v, 'f', dec, 64)
		if dec > 5 {
			label = strconv.FormatFloat(v, 'g', 4, 64)
		}
		out = append(out, plot.Tick{Value: v, Label: label})
	}
	return out
}

// padRange widens [lo, hi] by fractions of its span (in log space when log).
func padRange(lo, hi, below, above float64, log bool) (float64, float64) {
	var a, b float64
	if log {
		la, lb := math.Log10(lo), math.Log10(hi)
		span := lb - la
		if span == 0 {
			span = 0.5
		}
		a, b = math.Pow(10, la-below*span), math.Pow(10, lb+above*span)
		if !(a > 0) {
			a = lo
		}
	} else {
		span := hi - lo
		if span == 0 {
			span = math.Max(math.Abs(hi)*0.1, 1e-3)
		}
		a, b = lo-below*span, hi+above*span
		if !finite(a) {
			a = lo
		}
	}
	if !finite(b) {
		b = hi
	}
	return a, b
}

// keep applies the mask filter.
func keep(label string, mask []string) bool {
	if len(mask) == 0 {
		return true
	}
	up := strings.ToUpper(label)
	for _, m := range mask {
		if strings.Contains(up, strings.ToUpper(m)) {
			return true
		}
	}
	return false
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
