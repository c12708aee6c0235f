package plots

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Quantile is one percentile of a per-position distribution: P in [0, 100]
// (0 = min, 100 = max) and its value.
type Quantile struct {
	P     float64
	Value float64
}

// Model is one point of a chart: a model's figures from one result set.
type Model struct {
	Label  string  // display label; first word = family; "[colour]" tag optional
	BPW    float64 // decoder-only bits per weight (excl. embeddings and head)
	VRAMGB float64 // head + decoder layers, GiB
	PPL    float64
	KLD    float64 // mean KL(P_base || Q); valid when HasKLD
	HasKLD bool
	// KLDMedian and KLDQuantiles describe the per-position KL distribution
	// (for the kld-dist chart); KLDQuantiles must hold P = 1, 10, 50, 90 and
	// 99 at least.
	KLDQuantiles []Quantile
	IsBase       bool // the KL reference model (drawn in grey; KLD 0)
	// Act names the activation quantization ("" = none, weights only):
	// family lines join only points with the same Act, so that a W4A16
	// and a W4A4 of one format are not drawn as one trade-off curve. When
	// empty, a "WnAm" word of the label with m < 16 gives it.
	Act string
	// PPLLo/PPLHi and KLDLo/KLDHi are interval ends for error bars
	// (Options.ErrorBars); equal ends mean none.
	PPLLo, PPLHi float64
	KLDLo, KLDHi float64
}

// XAxis selects the x quantity of a scatter chart.
type XAxis string

// YAxis selects the y quantity (or the distribution chart).
type YAxis string

// Axis choices.
const (
	XBPW     XAxis = "bpw"
	XVRAM    XAxis = "vram"
	YPPL     YAxis = "ppl"
	YKLD     YAxis = "kld"
	YKLDDist YAxis = "kld-dist"
)

// Axis labels as in compare_q's final plot.
const (
	LabelBPW  = "Bits per weight (excl. embeddings and output head)"
	LabelVRAM = "VRAM (GiB, decoder layers + output head)"
	LabelKLD  = "KL divergence, D_KL(p_FP ‖ p_quant)"
	LabelPPL  = "Perplexity"
)

// DefaultTitle is the title of a chart without Options.Title, e.g. "KL
// divergence vs bits per weight".
func DefaultTitle(x XAxis, y YAxis) string {
	if y == YKLDDist {
		return "KL divergence distribution per model"
	}
	ys := map[YAxis]string{YPPL: "Perplexity", YKLD: "KL divergence"}[y]
	if ys == "" {
		ys = "Perplexity"
	}
	if x == XVRAM {
		return ys + " vs VRAM"
	}
	return ys + " vs bits per weight"
}

// Subtitle formats compare_q's subtitle: "wikitext2, 20 × 2048 tokens",
// followed by any extra parts (", "-joined).
func Subtitle(dataset string, windows, ctx int, extra ...string) string {
	rows := "?"
	if windows > 0 {
		rows = strconv.Itoa(windows)
	}
	s := fmt.Sprintf("%s, %s × %d tokens", dataset, rows, ctx)
	for _, e := range extra {
		if e != "" {
			s += ", " + e
		}
	}
	return s
}

// splitLabel returns the display text of a label (the "[...]" tag removed,
// spaces trimmed), its family (first word) and the tag ("" when none).
func splitLabel(label string) (text, family, tag string) {
	text = label
	if i := strings.IndexByte(label, '['); i >= 0 {
		if j := strings.IndexByte(label[i:], ']'); j > 0 {
			tag = strings.TrimSpace(label[i+1 : i+j])
			text = label[:i] + label[i+j+1:]
		}
	}
	text = strings.Join(strings.Fields(text), " ")
	if f := strings.Fields(text); len(f) > 0 {
		family = f[0]
	}
	return text, family, tag
}

// palette is matplotlib's tab10, the palette of compare_q's final plot.
var palette = [...]color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0xff, 0x7f, 0x0e, 0xff}, // orange
	{0x2c, 0xa0, 0x2c, 0xff}, // green
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0x94, 0x67, 0xbd, 0xff}, // purple
	{0x8c, 0x56, 0x4b, 0xff}, // brown
	{0xe3, 0x77, 0xc2, 0xff}, // pink
	{0xbc, 0xbd, 0x22, 0xff}, // olive
	{0x17, 0xbe, 0xcf, 0xff}, // cyan
	{0x7f, 0x7f, 0x7f, 0xff}, // grey
}

// baseColour draws the KL reference model.
var baseColour = color.RGBA{0x33, 0x33, 0x33, 0xff}

// fixedFamilies are compare_q's fixed palette slots (AWQ=0, EXL3=1, GGUF=2).
func fixedFamily(f string) (int, bool) {
	switch strings.ToUpper(f) {
	case "AWQ":
		return 0, true
	case "EXL3":
		return 1, true
	case "GGUF":
		return 2, true
	}
	return 0, false
}

// namedColour maps a "[colour]" tag (matplotlib colour names compare_q users
// write, or #rrggbb) to a colour.
func namedColour(tag string) (color.RGBA, bool) {
	t := strings.ToLower(strings.TrimSpace(tag))
	if len(t) == 7 && t[0] == '#' {
		v, err := strconv.ParseUint(t[1:], 16, 32)
		if err == nil {
			return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}, true
		}
		return color.RGBA{}, false
	}
	switch t {
	case "blue", "tab:blue":
		return palette[0], true
	case "orange", "tab:orange":
		return palette[1], true
	case "green", "tab:green":
		return palette[2], true
	case "red", "tab:red":
		return palette[3], true
	case "purple", "tab:purple":
		return palette[4], true
	case "brown", "tab:brown":
		return palette[5], true
	case "pink", "tab:pink":
		return palette[6], true
	case "olive", "tab:olive":
		return palette[7], true
	case "cyan", "tab:cyan":
		return palette[8], true
	case "gray", "grey", "tab:gray", "tab:grey":
		return palette[9], true
	case "teal":
		return color.RGBA{0x00, 0x80, 0x80, 0xff}, true
	case "black":
		return color.RGBA{0x22, 0x22, 0x22, 0xff}, true
	case "navy":
		return color.RGBA{0x1f, 0x3a, 0x7a, 0xff}, true
	case "magenta":
		return color.RGBA{0xc0, 0x2c, 0x9c, 0xff}, true
	case "gold", "yellow":
		return color.RGBA{0xd4, 0xa0, 0x17, 0xff}, true
	}
	return color.RGBA{}, false
}

// series is one format family: its colour and its points sorted by x.
type series struct {
	Family string
	Colour color.RGBA
	Points []point
}

// actKey is the activation scheme of a model for family lines: m.Act, or
// "a<m>" from a "W<n>A<m>" word of the label with m < 16; "" = weights only.
func actKey(m Model) string {
	if m.Act != "" {
		return m.Act
	}
	text, _, _ := splitLabel(m.Label)
	for _, w := range strings.Fields(strings.ToUpper(text)) {
		i := strings.IndexByte(w, 'A')
		if len(w) < 4 || w[0] != 'W' || i < 2 || i == len(w)-1 {
			continue
		}
		wb, errW := strconv.Atoi(w[1:i])
		ab, errA := strconv.Atoi(w[i+1:])
		if errW != nil || errA != nil || wb <= 0 {
			continue
		}
		if ab < 16 {
			return "a" + w[i+1:]
		}
		return ""
	}
	return ""
}

// point is one drawable model.
type point struct {
	Act    string // activation scheme (actKey): lines join equal ones
	Text   string // label without the tag
	X, Y   float64
	Lo, Hi float64 // error bar ends; Lo == Hi: none
	Model  int     // index into the input slice
	Colour color.RGBA
}

// assignColours gives every family a colour, deterministically: a family
// whose labels carry a known tag takes it (first tagged label in input
// order); AWQ/EXL3/GGUF take compare_q's fixed slots; the base model is
// dark grey; the other families take the remaining palette slots in sorted
// family order.
func assignColours(models []Model) (map[string]color.RGBA, error) {
	out := map[string]color.RGBA{}
	used := map[int]bool{}
	var rest []string
	seen := map[string]bool{}
	for _, m := range models {
		_, fam, tag := splitLabel(m.Label)
		if tag != "" {
			c, ok := namedColour(tag)
			if !ok {
				return nil, fmt.Errorf("label %q: unknown colour tag [%s] (use a name such as green, purple, red, or #rrggbb)", m.Label, tag)
			}
			if _, done := out[fam]; !done {
				out[fam] = c
				for i, p := range palette {
					if p == c {
						used[i] = true
					}
				}
			}
		}
	}
	for _, m := range models {
		_, fam, _ := splitLabel(m.Label)
		if seen[fam] {
			continue
		}
		seen[fam] = true
		if _, done := out[fam]; done {
			continue
		}
		if m.IsBase {
			out[fam] = baseColour
			continue
		}
		if i, ok := fixedFamily(fam); ok {
			out[fam] = palette[i]
			used[i] = true
			continue
		}
		rest = append(rest, fam)
	}
	sort.Strings(rest)
	next := 0
	for _, fam := range rest {
		for next < len(palette) && used[next] {
			next++
		}
		if next < len(palette) {
			out[fam] = palette[next]
			used[next] = true
			next++
			continue
		}
		// More families than colours: cycle deterministically.
		out[fam] = palette[len(out)%len(palette)]
	}
	return out, nil
}

// formatValue prints a chart value: compare_q's {y:.3f}, with more
// decimals below 0.01 so that at least two significant digits show, and
// scientific notation below 1e-4.
func formatValue(v float64) string {
	prec := 3
	if a := math.Abs(v); a > 0 && a < 1e-4 {
		return strconv.FormatFloat(v, 'e', 1, 64)
	} else if a > 0 && a < 0.01 {
		prec = 1 - int(math.Floor(math.Log10(a)))
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
