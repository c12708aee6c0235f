package suite

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Thresholds are the regression gate's tolerances: relative increases
// (0.001 = 0.1%). A KLD regression also needs an absolute increase above
// KLDFloor, so that near-zero baselines do not fail on rounding.
type Thresholds struct {
	MaxPPLIncrease float64
	MaxKLDIncrease float64
	KLDFloor       float64
	// AllowMissing lists baseline models absent from the run without
	// failing (for runs over a subset of the models).
	AllowMissing bool
}

// DefaultThresholds returns the default gate: 0.1% PPL, 5% KLD, 1e-6 nats
// KLD floor. (A function, not a package variable any importer could change.)
func DefaultThresholds() Thresholds {
	return Thresholds{MaxPPLIncrease: 0.001, MaxKLDIncrease: 0.05, KLDFloor: 1e-6}
}

// ParseFraction reads "0.1%" as 0.001 and "0.05" as 0.05.
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSpace(strings.TrimSuffix(t, "%")), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v != v {
		return 0, fmt.Errorf("%q: want a non-negative fraction such as 0.001 or 0.1%%", s)
	}
	return v * scale, nil
}

// GateRow is one checked figure.
type GateRow struct {
	Label    string
	Metric   string // "ppl", "kld", or "-" for a missing model
	Baseline float64
	Current  float64
	Change   float64 // relative change (current/baseline − 1)
	Limit    float64 // allowed relative increase
	Status   string  // "ok", "REGRESSED", "MISSING", "new", "improved"
}

// GateReport is the outcome of Gate.
type GateReport struct {
	Rows      []GateRow
	Regressed int // rows with status REGRESSED
	Missing   int // baseline models absent from the run
	// Failed is set when a figure regressed, or a model is missing and
	// missing models are not allowed.
	Failed bool
}

// Summary says what failed, e.g. "2 figures regressed, 1 baseline model
// missing".
func (g *GateReport) Summary() string {
	var parts []string
	if g.Regressed > 0 {
		parts = append(parts, plural(g.Regressed, "figure", "figures")+" regressed")
	}
	if g.Missing > 0 {
		parts = append(parts, plural(g.Missing, "baseline model", "baseline models")+" missing")
	}
	if len(parts) == 0 {
		return "no regression"
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Comparable reports whether a result set of current's data can be gated
// against baseline: the same token stream, data spec and (when both have
// one) KL mode. qppl compare calls it with the prepared data before any
// model runs; Gate calls it again.
func Comparable(baseline, current *ResultSet) error {
	if baseline.TokensHash != current.TokensHash {
		return fmt.Errorf("baseline token stream %s differs from this run's %s: results are not comparable (same data, tokenizer and join required)", short(baseline.TokensHash), short(current.TokensHash))
	}
	if baseline.DataSpecHash != current.DataSpecHash {
		return fmt.Errorf("baseline data spec %s (method %s, ctx %d, stride %d, rows %d) differs from this run's %s (method %s, ctx %d, stride %d, rows %d)",
			short(baseline.DataSpecHash), baseline.Data.Method, baseline.Data.Ctx, baseline.Data.Stride, baseline.Data.Rows,
			short(current.DataSpecHash), current.Data.Method, current.Data.Ctx, current.Data.Stride, current.Data.Rows)
	}
	if baseline.KLMode != "" && current.KLMode != "" && baseline.KLMode != current.KLMode {
		return fmt.Errorf("baseline KL mode %q differs from this run's %q", baseline.KLMode, current.KLMode)
	}
	return nil
}

// Gate compares current with baseline model by model (matched by label).
// Both must have the same data spec hash and token-stream hash (an error
// otherwise, saying which differs). A model regresses when its PPL rises by
// more than MaxPPLIncrease, or its mean KLD by more than MaxKLDIncrease
// (relative) and KLDFloor (absolute), or has no KLD where the baseline has
// one; a baseline model absent from current
// fails the gate (MISSING) unless AllowMissing; models new in current are
// listed.
func Gate(baseline, current *ResultSet, t Thresholds) (*GateReport, error) {
	if err := Comparable(baseline, current); err != nil {
		return nil, err
	}
	rep := &GateReport{}
	add := func(r GateRow) {
		switch r.Status {
		case "REGRESSED":
			rep.Regressed++
			rep.Failed = true
		case "MISSING":
			rep.Missing++
			if !t.AllowMissing {
				rep.Failed = true
			}
		}
		rep.Rows = append(rep.Rows, r)
	}
	for _, b := range baseline.Results {
		c, ok := current.Find(b.Label)
		if !ok {
			add(GateRow{Label: b.Label, Metric: "-", Status: "MISSING"})
			continue
		}
		add(check(b.Label, "ppl", b.PPL, c.PPL, t.MaxPPLIncrease, 0))
		switch {
		case b.KLD != nil && c.KLD != nil:
			add(check(b.Label, "kld", b.KLD.Mean, c.KLD.Mean, t.MaxKLDIncrease, t.KLDFloor))
		case b.KLD != nil:
			// A gated figure that this run no longer measures (e.g. no
			// --base) fails rather than passing on PPL alone.
			add(GateRow{Label: b.Label, Metric: "kld", Baseline: b.KLD.Mean, Current: math.NaN(), Change: math.NaN(), Limit: t.MaxKLDIncrease, Status: "REGRESSED"})
		}
	}
	for _, c := range current.Results {
		if _, ok := baseline.Find(c.Label); !ok {
			add(GateRow{Label: c.Label, Metric: "-", Status: "new"})
		}
	}
	return rep, nil
}

func check(label, metric string, base, cur, rel, floor float64) GateRow {
	r := GateRow{Label: label, Metric: metric, Baseline: base, Current: cur, Limit: rel, Status: "ok"}
	if base != 0 {
		r.Change = cur/base - 1
	}
	switch {
	case cur != cur: // NaN
		r.Status = "REGRESSED"
	case cur > base*(1+rel) && cur-base > floor:
		r.Status = "REGRESSED"
	case cur < base:
		r.Status = "improved"
	}
	return r
}

// WriteTable prints the report as an aligned table.
func (g *GateReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tMETRIC\tBASELINE\tCURRENT\tCHANGE\tLIMIT\tSTATUS")
	for _, r := range g.Rows {
		if r.Metric == "-" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", r.Label, r.Status)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.6g\t%.6g\t%+.4f%%\t+%.4g%%\t%s\n", r.Label, r.Metric, r.Baseline, r.Current, 100*r.Change, 100*r.Limit, r.Status)
	}
	return tw.Flush()
}
