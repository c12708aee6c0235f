package plots

import (
	"math"
	"sort"
)

// rect is an axis-aligned box in canvas points (Y up).
type rect struct{ MinX, MinY, MaxX, MaxY float64 }

func (r rect) w() float64 { return r.MaxX - r.MinX }
func (r rect) h() float64 { return r.MaxY - r.MinY }

// inflate grows r by d on every side.
func (r rect) inflate(d float64) rect { return rect{r.MinX - d, r.MinY - d, r.MaxX + d, r.MaxY + d} }

// overlap returns the area shared by a and b.
func overlap(a, b rect) float64 {
	w := math.Min(a.MaxX, b.MaxX) - math.Max(a.MinX, b.MinX)
	h := math.Min(a.MaxY, b.MaxY) - math.Max(a.MinY, b.MinY)
	if w <= 0 || h <= 0 {
		return 0
	}
	return w * h
}

// inside reports whether r lies within b.
func inside(r, b rect) bool {
	return r.MinX >= b.MinX && r.MinY >= b.MinY && r.MaxX <= b.MaxX && r.MaxY <= b.MaxY
}

// segment is a line from (X0,Y0) to (X1,Y1).
type segment struct{ X0, Y0, X1, Y1 float64 }

// segHitsRect reports whether s intersects r (Liang–Barsky clipping).
func segHitsRect(s segment, r rect) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := s.X1-s.X0, s.Y1-s.Y0
	clip := func(p, q float64) bool {
		if p == 0 {
			return q >= 0
		}
		t := q / p
		if p < 0 {
			if t > t1 {
				return false
			}
			if t > t0 {
				t0 = t
			}
		} else {
			if t < t0 {
				return false
			}
			if t < t1 {
				t1 = t
			}
		}
		return true
	}
	return clip(-dx, s.X0-r.MinX) && clip(dx, r.MaxX-s.X0) &&
		clip(-dy, s.Y0-r.MinY) && clip(dy, r.MaxY-s.Y0) && t0 <= t1
}

// rectDist is the distance from (x, y) to the nearest point of r.
func rectDist(r rect, x, y float64) float64 {
	dx := math.Max(0, math.Max(r.MinX-x, x-r.MaxX))
	dy := math.Max(0, math.Max(r.MinY-y, y-r.MaxY))
	return math.Hypot(dx, dy)
}

// segsCross reports whether segments a and b properly intersect (touching
// end points do not count).
func segsCross(a, b segment) bool {
	orient := func(ax, ay, bx, by, cx, cy float64) float64 {
		return (bx-ax)*(cy-ay) - (by-ay)*(cx-ax)
	}
	d1 := orient(b.X0, b.Y0, b.X1, b.Y1, a.X0, a.Y0)
	d2 := orient(b.X0, b.Y0, b.X1, b.Y1, a.X1, a.Y1)
	d3 := orient(a.X0, a.Y0, a.X1, a.Y1, b.X0, b.Y0)
	d4 := orient(a.X0, a.Y0, a.X1, a.Y1, b.X1, b.Y1)
	return d1*d2 < 0 && d3*d4 < 0
}

// labelInput is one label to place: the anchor point and the label size.
type labelInput struct {
	X, Y float64 // anchor (the data point)
	W, H float64 // label box size
}

// placement is the outcome for one label.
type placement struct {
	Box      rect
	Leader   bool // the label is away from its point: draw a leader line
	Overlaps bool // no collision-free position existed
}

// layoutParams tunes placeLabels; all lengths in points.
type layoutParams struct {
	MarkerR float64 // half size of a point marker's keep-out box
	Gap     float64 // distance between marker and an adjacent label
	Pad     float64 // minimum clearance between two labels
	Rings   int     // number of outer rings of candidates
	Step    float64 // ring spacing
}

// placeLabels positions labels without overlap, deterministically.
//
// Points are processed from the most crowded to the least (ties by x, y,
// input index). For each, candidates are tried in a fixed order: eight
// positions adjacent to the marker (right, left, above, below, then the
// diagonals), then rings of 16 directions at increasing distance. A
// candidate is admissible when it lies inside bounds and overlaps no placed
// label or fixed obstacle (with Pad clearance) and no point marker. The first admissible
// candidate that crosses none of the polylines (segs) and whose leader line
// crosses no placed label or leader line wins; failing that, the admissible candidate with
// the fewest such crossings; failing that, the candidate with the least
// overlap (marked Overlaps).
func placeLabels(in []labelInput, bounds rect, segs []segment, fixed []rect, p layoutParams) []placement {
	n := len(in)
	out := make([]placement, n)
	markers := make([]rect, n)
	for i, l := range in {
		markers[i] = rect{l.X - p.MarkerR, l.Y - p.MarkerR, l.X + p.MarkerR, l.Y + p.MarkerR}
	}
	// Crowding: number of other points within a label-sized neighbourhood.
	order := make([]int, n)
	crowd := make([]int, n)
	for i := range in {
		order[i] = i
		for j := range in {
			if i != j && math.Abs(in[i].X-in[j].X) < 2*in[i].W && math.Abs(in[i].Y-in[j].Y) < 3*in[i].H {
				crowd[i]++
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if crowd[i] != crowd[j] {
			return crowd[i] > crowd[j]
		}
		if in[i].X != in[j].X {
			return in[i].X < in[j].X
		}
		return in[i].Y < in[j].Y
	})

	placed := append([]rect(nil), fixed...)
	var leaders []segment
	for _, i := range order {
		l := in[i]
		best, bestCost, bestSoft := rect{}, math.Inf(1), math.Inf(1)
		bestLeader := false
		found := false
		for k, c := range candidates(l, p) {
			box := c.box
			// Hard constraints, measured as overlap area.
			hard := 0.0
			if !inside(box, bounds) {
				hard += box.w()*box.h() - overlap(box, bounds) + 1
			}
			for _, q := range placed {
				hard += overlap(box, q.inflate(p.Pad))
			}
			for _, m := range markers {
				hard += overlap(box, m)
			}
			if hard > 0 {
				// Inadmissible: only kept as a fallback when nothing fits.
				if !found && hard < bestCost {
					best, bestCost, bestLeader = box, hard, c.leader
				}
				continue
			}
			soft := 0.0
			for _, s := range segs {
				if segHitsRect(s, box.inflate(-0.5)) {
					soft++
				}
			}
			for _, ld := range leaders {
				if segHitsRect(ld, box) {
					soft += 2
				}
			}
			// Ambiguity: another point about as close to an adjacent label
			// as its own point.
			if !c.leader {
				own := rectDist(box, l.X, l.Y)
				for j, q := range in {
					if j != i && rectDist(box, q.X, q.Y) < own+2 {
						soft += 0.5
					}
				}
			}
			if c.leader {
				ls := leaderSegment(l.X, l.Y, box)
				for _, q := range placed {
					if segHitsRect(ls, q) {
						soft += 2
					}
				}
				for _, ld := range leaders {
					if segsCross(ls, ld) {
						soft += 2
					}
				}
				soft += 0.3 + 0.01*float64(k) // a leader costs; nearer rings first
			}
			if !found || soft < bestSoft {
				best, bestSoft, bestLeader, found = box, soft, c.leader, true
			}
			if soft == 0 {
				break
			}
		}
		out[i] = placement{Box: best, Leader: bestLeader, Overlaps: !found}
		placed = append(placed, best)
		if bestLeader {
			leaders = append(leaders, leaderSegment(l.X, l.Y, best))
		}
	}
	return out
}

type candidate struct {
	box    rect
	leader bool
}

// candidates lists the positions tried for one label, in preference order.
func candidates(l labelInput, p layoutParams) []candidate {
	d := p.MarkerR + p.Gap
	at := func(cx, cy float64) rect {
		return rect{cx - l.W/2, cy - l.H/2, cx + l.W/2, cy + l.H/2}
	}
	c := []candidate{
		{at(l.X+d+l.W/2, l.Y), false},                 // right
		{at(l.X-d-l.W/2, l.Y), false},                 // left
		{at(l.X, l.Y+d+l.H/2), false},                 // above
		{at(l.X, l.Y-d-l.H/2), false},                 // below
		{at(l.X+d*0.7+l.W/2, l.Y+d*0.7+l.H/2), false}, // upper right
		{at(l.X-d*0.7-l.W/2, l.Y+d*0.7+l.H/2), false}, // upper left
		{at(l.X+d*0.7+l.W/2, l.Y-d*0.7-l.H/2), false}, // lower right
		{at(l.X-d*0.7-l.W/2, l.Y-d*0.7-l.H/2), false}, // lower left
	}
	// 16 directions, alternating sides so that no side is favoured.
	dirs := [16]float64{0, 180, 90, 270, 45, 135, 225, 315, 22.5, 157.5, 202.5, 337.5, 67.5, 112.5, 247.5, 292.5}
	for r := 1; r <= p.Rings; r++ {
		R := d + float64(r)*p.Step
		for _, deg := range dirs {
			th := deg * math.Pi / 180
			ux, uy := math.Cos(th), math.Sin(th)
			// Push the box centre out so its near edge is ~R from the point.
			ext := math.Abs(ux)*l.W/2 + math.Abs(uy)*l.H/2
			c = append(c, candidate{at(l.X+ux*(R+ext), l.Y+uy*(R+ext)), true})
		}
	}
	return c
}

// leaderSegment runs from the point to the nearest point of box.
func leaderSegment(x, y float64, box rect) segment {
	nx := math.Max(box.MinX, math.Min(x, box.MaxX))
	ny := math.Max(box.MinY, math.Min(y, box.MaxY))
	return segment{x, y, nx, ny}
}
