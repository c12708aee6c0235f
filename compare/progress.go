package compare

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress draws a one-line progress bar (windows, tokens/s, ETA) on a
// terminal-like writer, usually stderr. It stays silent until the run has
// lasted Delay (default one second), so short runs print nothing; after
// that it redraws at most every Interval. The clock is injectable for
// tests. A nil *Progress does nothing.
type Progress struct {
	W        io.Writer
	Now      func() time.Time // nil: time.Now
	Delay    time.Duration    // 0: one second
	Interval time.Duration    // 0: 200ms
	Width    int              // bar width in characters; 0: 30

	totalWin int
	totalTok int64
	start    time.Time
	last     time.Time
	drawn    bool
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Start begins a run of windows windows holding tokens tokens.
func (p *Progress) Start(windows int, tokens int64) {
	if p == nil {
		return
	}
	p.totalWin, p.totalTok = windows, tokens
	p.start = p.now()
	p.drawn = false
}

// Update reports doneWin windows and doneTok tokens finished.
func (p *Progress) Update(doneWin int, doneTok int64) {
	if p == nil || p.W == nil {
		return
	}
	now := p.now()
	delay, interval := p.Delay, p.Interval
	if delay == 0 {
		delay = time.Second
	}
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	el := now.Sub(p.start)
	if el < delay || (p.drawn && now.Sub(p.last) < interval && doneWin < p.totalWin) {
		return
	}
	p.last = now
	p.drawn = true
	fmt.Fprintf(p.W, "\r%s", p.line(doneWin, doneTok, el))
}

// line renders the bar.
func (p *Progress) line(doneWin int, doneTok int64, el time.Duration) string {
	width := p.Width
	if width == 0 {
		width = 30
	}
	frac := 0.0
	if p.totalTok > 0 {
		frac = float64(doneTok) / float64(p.totalTok)
	}
	fill := min(width, int(frac*float64(width)))
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	rate := 0.0
	if s := el.Seconds(); s > 0 {
		rate = float64(doneTok) / s
	}
	eta := "--:--"
	if rate > 0 {
		eta = fmtDuration(time.Duration(float64(p.totalTok-doneTok) / rate * float64(time.Second)))
	}
	return fmt.Sprintf("[%s] %d/%d windows  %.0f tok/s  elapsed %s  ETA %s ", bar, doneWin, p.totalWin, rate, fmtDuration(el), eta)
}

// Finish ends the line if anything was drawn.
func (p *Progress) Finish() {
	if p == nil || p.W == nil || !p.drawn {
		return
	}
	fmt.Fprintln(p.W)
	p.drawn = false
}

func fmtDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
