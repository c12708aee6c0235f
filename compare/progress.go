package compare

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress reports a run's progress (windows, tokens/s, ETA) on a writer,
// usually stderr. It stays silent until the run has lasted Delay (default
// one second), so short runs print nothing. On a terminal it redraws a
// one-line bar at most every Interval; with Plain (logs, files, Slurm
// output: NewProgress sets it when the writer is not a terminal) it prints
// one plain line at most every PlainInterval (default ten seconds), never a
// carriage return. Header, when set, is printed once before the first
// progress output (what is being evaluated). With the real clock (Now nil)
// the first output comes after Delay even while the first window is still
// running. The clock is injectable for tests. A nil *Progress does nothing.
type Progress struct {
	W             io.Writer
	Now           func() time.Time // nil: time.Now
	Delay         time.Duration    // 0: one second
	Interval      time.Duration    // 0: 200ms
	Width         int              // bar width in characters; 0: 30
	Plain         bool
	PlainInterval time.Duration // 0: ten seconds
	Header        string

	mu       sync.Mutex
	timer    *time.Timer
	totalWin int
	totalTok int64
	doneWin  int
	doneTok  int64
	start    time.Time
	last     time.Time
	drawn    bool
	headed   bool
	running  bool
}

// NewProgress returns a Progress on w: a redrawn bar when w is a terminal,
// plain lines otherwise.
func NewProgress(w io.Writer, header string) *Progress {
	return &Progress{W: w, Plain: !isTerminal(w), Header: header}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Progress) delay() time.Duration {
	if p.Delay == 0 {
		return time.Second
	}
	return p.Delay
}

// Start begins a run of windows windows holding tokens tokens.
func (p *Progress) Start(windows int, tokens int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.totalWin, p.totalTok = windows, tokens
	p.doneWin, p.doneTok = 0, 0
	p.start = p.now()
	p.drawn, p.running = false, true
	if p.W != nil && p.Now == nil && windows > 0 {
		// A first window can take long: say so after Delay, not after it.
		p.timer = time.AfterFunc(p.delay(), func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.running && !p.drawn {
				p.draw(p.now())
			}
		})
	}
}

// Update reports doneWin windows and doneTok tokens finished.
func (p *Progress) Update(doneWin int, doneTok int64) {
	if p == nil || p.W == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doneWin, p.doneTok = doneWin, doneTok
	now := p.now()
	interval := p.Interval
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	if p.Plain {
		if interval = p.PlainInterval; interval == 0 {
			interval = 10 * time.Second
		}
	}
	if now.Sub(p.start) < p.delay() || (p.drawn && now.Sub(p.last) < interval && doneWin < p.totalWin) {
		return
	}
	p.draw(now)
}

// draw prints the header (once) and the progress line; p.mu is held.
func (p *Progress) draw(now time.Time) {
	if !p.headed && p.Header != "" {
		if p.drawn && !p.Plain {
			fmt.Fprintln(p.W)
		}
		fmt.Fprint(p.W, strings.TrimSuffix(p.Header, "\n")+"\n")
	}
	p.headed = true
	p.last = now
	p.drawn = true
	line := p.line(p.doneWin, p.doneTok, now.Sub(p.start))
	if p.Plain {
		fmt.Fprintf(p.W, "progress: %s\n", strings.TrimSpace(line[strings.Index(line, "]")+2:]))
		return
	}
	fmt.Fprintf(p.W, "\r%s", line)
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
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if p.W == nil || !p.drawn {
		return
	}
	if !p.Plain {
		fmt.Fprintln(p.W)
	}
	p.drawn = false
}

func fmtDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
