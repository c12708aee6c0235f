package plots

import (
	"math"
	"math/rand/v2"
	"slices"
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
// label or fixed obstacle (with Pad clearance) and no point marker. Among
// admissible candidates the cheapest wins (the first with cost 0): a label
// that would read as another point's (an adjacent label not clearly nearest
// its own marker, a displaced label near another marker, a leader crossing
// or running close to another leader, a label, a marker or along a line)
// costs conflictCost; crossing a line costs a little; a leader costs a
// little more with distance. Failing any admissible candidate, the one with
// the least overlap is taken (marked Overlaps). Labels left in a conflict
// are placed first in another round, kept when that lowers the total cost.
func placeLabels(in []labelInput, bounds rect, segs []segment, fixed []rect, p layoutParams) []placement {
	n := len(in)
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

	// Labels left in a conflict (reading as another point's, or crossing)
	// are placed first in another round, while that lowers the total.
	best, bestCost := placeOnce(in, order, markers, bounds, segs, fixed, p)
	for round := 0; round < 3; round++ {
		var first, rest []int
		for _, i := range order {
			if best.cost[i] >= conflictCost || best.out[i].Overlaps {
				first = append(first, i)
			} else {
				rest = append(rest, i)
			}
		}
		if len(first) == 0 {
			break
		}
		order = append(first, rest...)
		r, c := placeOnce(in, order, markers, bounds, segs, fixed, p)
		if c >= bestCost {
			break
		}
		best, bestCost = r, c
	}
	if bestCost >= conflictCost {
		return improve(in, best.out, markers, bounds, segs, fixed, p)
	}
	return best.out
}

// placeRound is the outcome of one placement round: the placements and
// the soft cost of each.
type placeRound struct {
	out  []placement
	cost []float64
}

// placeOnce places the labels greedily in the given order and returns the
// result and its total cost (an overlap counts as 10 conflicts).
func placeOnce(in []labelInput, order []int, markers []rect, bounds rect, segs []segment, fixed []rect, p layoutParams) (placeRound, float64) {
	out := make([]placement, len(in))
	costs := make([]float64, len(in))
	placed := append([]rect(nil), fixed...)
	var leaders []segment
	for _, i := range order {
		out[i], costs[i] = placeOne(in, i, markers, bounds, segs, placed, leaders, p)
		placed = append(placed, out[i].Box)
		if out[i].Leader {
			leaders = append(leaders, leaderSegment(in[i].X, in[i].Y, out[i].Box))
		}
	}
	total := 0.0
	for _, c := range costs {
		total += c
	}
	return placeRound{out, costs}, total
}

// placeOne returns the best position of label i among the obstacles
// (placed labels, their leaders) and its cost (10 conflicts when it
// overlaps something).
func placeOne(in []labelInput, i int, markers []rect, bounds rect, segs []segment, placed []rect, leaders []segment, p layoutParams) (placement, float64) {
	l := in[i]
	best, bestCost, bestSoft := rect{}, math.Inf(1), math.Inf(1)
	bestLeader, found := false, false
	for k, c := range candidates(l, p) {
		hard, soft := evalCand(in, i, k, c, markers, bounds, segs, placed, leaders, p, bestSoft)
		if hard > 0 {
			// Inadmissible: only kept as a fallback when nothing fits.
			if !found && hard < bestCost {
				best, bestCost, bestLeader = c.box, hard, c.leader
			}
			continue
		}
		if !found || soft < bestSoft {
			best, bestSoft, bestLeader, found = c.box, soft, c.leader, true
		}
		if soft == 0 {
			break
		}
	}
	if !found {
		bestSoft = 10 * conflictCost
	}
	return placement{Box: best, Leader: bestLeader, Overlaps: !found}, bestSoft
}

// neighbourhood bounds (points) the labels improve moves with a label in
// conflict.
const neighbourhood = 150

// improveBudget bounds the work of improve: label placements times
// labels (each placement weighs every candidate against every label), so
// that a crowded chart costs about what a small one does.
const improveBudget = 3000

// maxRuin bounds the labels improve removes around a conflict.
const maxRuin = 8

// shuffles is the number of seeded random orders improve also tries.
const shuffles = 12

// evalCand returns the hard cost (overlap area: inadmissible when > 0) and
// the soft cost of candidate c (the k-th) for label i. It may stop early
// with any soft cost above bound (a candidate that cannot win).
func evalCand(in []labelInput, i, k int, c candidate, markers []rect, bounds rect, segs []segment, placed []rect, leaders []segment, p layoutParams, bound float64) (hard, soft float64) {
	l := in[i]
	box := c.box
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
		return hard, 0
	}
	for _, s := range segs {
		if segHitsRect(s, box.inflate(-0.5)) {
			soft++
		}
	}
	for _, ld := range leaders {
		if segHitsRect(ld, box.inflate(leaderClear)) {
			soft += conflictCost
			if soft > bound {
				return 0, soft
			}
		}
	}
	// Ambiguity: another point about as close to an adjacent label as its
	// own point (the label would read as that point's): a leader is better.
	if !c.leader {
		// The label attaches where it is nearest its marker; another marker
		// must be clearly farther from that point, and farther from the
		// box than its own.
		own := rectDist(box, l.X, l.Y)
		ax := math.Max(box.MinX, math.Min(l.X, box.MaxX))
		ay := math.Max(box.MinY, math.Min(l.Y, box.MaxY))
		for j, q := range in {
			if j != i && (rectDist(box, q.X, q.Y) < own+2 || math.Hypot(q.X-ax, q.Y-ay) < own+ambiguityMargin) {
				soft += conflictCost
				if soft > bound {
					return 0, soft
				}
			}
		}
		return 0, soft
	}
	ls := leaderSegment(l.X, l.Y, box)
	for _, q := range placed {
		if segHitsRect(ls, q.inflate(leaderClear)) {
			soft += conflictCost
			if soft > bound {
				return 0, soft
			}
		}
	}
	for _, ld := range leaders {
		if segsCross(ls, ld) || segDist(ls, ld) < leaderClear {
			soft += conflictCost
			if soft > bound {
				return 0, soft
			}
		}
	}
	for j, m := range markers {
		if j != i && segHitsRect(ls, m.inflate(leaderClear)) {
			soft += conflictCost
			if soft > bound {
				return 0, soft
			}
		}
		// A displaced label near another marker reads as that marker's.
		if j != i && rectDist(box, in[j].X, in[j].Y) < nearMarker {
			soft += conflictCost
			if soft > bound {
				return 0, soft
			}
		}
	}
	mx, my := (ls.X0+ls.X1)/2, (ls.Y0+ls.Y1)/2
	for _, s := range segs {
		switch {
		case segDist(segment{mx, my, mx, my}, s) < leaderClear || segDist(segment{ls.X1, ls.Y1, ls.X1, ls.Y1}, s) < leaderClear:
			soft += conflictCost // running along a line: unreadable
		case segsCross(ls, s):
			soft += 3
		}
	}
	soft += 0.3 + 0.01*float64(k) // a leader costs; nearer rings first
	return 0, soft
}

// totalCost evaluates every label of r against all the others.
func totalCost(in []labelInput, r []placement, markers []rect, bounds rect, segs []segment, fixed []rect, p layoutParams) (float64, []float64) {
	costs := make([]float64, len(in))
	total := 0.0
	for i := range in {
		placed := append([]rect(nil), fixed...)
		var leaders []segment
		for j := range in {
			if j == i {
				continue
			}
			placed = append(placed, r[j].Box)
			if r[j].Leader {
				leaders = append(leaders, leaderSegment(in[j].X, in[j].Y, r[j].Box))
			}
		}
		hard, soft := evalCand(in, i, 0, candidate{r[i].Box, r[i].Leader}, markers, bounds, segs, placed, leaders, p, math.Inf(1))
		if hard > 0 {
			soft = 10 * conflictCost
		}
		if r[i].Leader {
			soft -= 0.3 // the ring index is not known here; leaders still cost
		}
		costs[i] = soft
		total += soft
	}
	return total, costs
}

// improve re-places the neighbourhood of a label in conflict ("ruin and
// recreate"): the labels whose points lie within neighbourhood of it are
// removed and placed again greedily among the others, in several orders
// (each of them first, then by distance; and the reverse); a result is
// kept when the total cost drops.
func improve(in []labelInput, r []placement, markers []rect, bounds rect, segs []segment, fixed []rect, p layoutParams) []placement {
	cur := append([]placement(nil), r...)
	total, costs := totalCost(in, cur, markers, bounds, segs, fixed, p)
	budget := improveBudget // placeOne calls: bounds the time on crowded charts
	for pass := 0; pass < 4 && budget > 0; pass++ {
		better := false
		for i := range in {
			if costs[i] < conflictCost {
				continue
			}
			var near []int
			for j := range in {
				if math.Hypot(in[j].X-in[i].X, in[j].Y-in[i].Y) <= neighbourhood {
					near = append(near, j)
				}
			}
			sort.SliceStable(near, func(a, b int) bool {
				da := math.Hypot(in[near[a]].X-in[i].X, in[near[a]].Y-in[i].Y)
				db := math.Hypot(in[near[b]].X-in[i].X, in[near[b]].Y-in[i].Y)
				return da < db
			})
			near = near[:min(len(near), maxRuin)]
			removed := map[int]bool{}
			for _, j := range near {
				removed[j] = true
			}
			var orders [][]int
			for k := range near {
				o := append([]int{near[k]}, near[:k]...)
				orders = append(orders, append(o, near[k+1:]...))
			}
			rev := append([]int(nil), near...)
			slices.Reverse(rev)
			orders = append(orders, rev)
			rng := rand.New(rand.NewPCG(uint64(i), uint64(pass)))
			for range shuffles {
				o := append([]int(nil), near...)
				rng.Shuffle(len(o), func(a, b int) { o[a], o[b] = o[b], o[a] })
				orders = append(orders, o)
			}
			for _, order := range orders {
				if budget -= len(order) * len(in); budget < 0 {
					break
				}
				try := append([]placement(nil), cur...)
				placed := append([]rect(nil), fixed...)
				var leaders []segment
				for q := range in {
					if !removed[q] {
						placed = append(placed, cur[q].Box)
						if cur[q].Leader {
							leaders = append(leaders, leaderSegment(in[q].X, in[q].Y, cur[q].Box))
						}
					}
				}
				for _, q := range order {
					try[q], _ = placeOne(in, q, markers, bounds, segs, placed, leaders, p)
					placed = append(placed, try[q].Box)
					if try[q].Leader {
						leaders = append(leaders, leaderSegment(in[q].X, in[q].Y, try[q].Box))
					}
				}
				if t, c := totalCost(in, try, markers, bounds, segs, fixed, p); t < total-1e-9 {
					cur, total, costs, better = try, t, c, true
				}
			}
		}
		if !better {
			break
		}
	}
	return cur
}

// leaderClear is the clearance (points) a leader keeps from other leaders
// and markers; nearMarker is how close (points) a displaced label may come
// to a marker that is not its own.
// An adjacent label must be ambiguityMargin points nearer its own marker
// than any other.
const (
	leaderClear     = 3
	nearMarker      = 14
	ambiguityMargin = 10
)

// segDist is the smallest distance between two segments that do not cross.
func segDist(a, b segment) float64 {
	pd := func(px, py float64, s segment) float64 {
		dx, dy := s.X1-s.X0, s.Y1-s.Y0
		l2 := dx*dx + dy*dy
		t := 0.0
		if l2 > 0 {
			t = math.Max(0, math.Min(1, ((px-s.X0)*dx+(py-s.Y0)*dy)/l2))
		}
		return math.Hypot(px-(s.X0+t*dx), py-(s.Y0+t*dy))
	}
	return math.Min(math.Min(pd(a.X0, a.Y0, b), pd(a.X1, a.Y1, b)), math.Min(pd(b.X0, b.Y0, a), pd(b.X1, b.Y1, a)))
}

// conflictCost is the cost of a label that reads as another point's (an
// adjacent label nearer another marker, a leader crossing a label, another
// leader or another marker): any position without one is preferred.
const conflictCost = 100

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
	dirs := []float64{0, 180, 90, 270, 45, 135, 225, 315, 22.5, 157.5, 202.5, 337.5, 67.5, 112.5, 247.5, 292.5}
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
