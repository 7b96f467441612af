// Package progress reports the progress of the CLI's long loops on stderr.
//
// On a terminal a step draws a bar with count, rate and ETA
// (schollz/progressbar). Off a terminal (CI logs, pipes, files) a bar would
// be noise, so a step prints one line when it starts and one when it ends,
// with the count, elapsed time and rate. Either way Finish leaves a final
// line, so a log shows what ran and how fast.
//
// Libraries never print: they report through a func(done, total int)
// callback (or func(stage string, done, total int) for multi-stage work),
// and the CLI adapts it with Bar.Func or Stages.Func.
package progress

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// throttle is the bar's redraw interval; tests set it to 0.
var throttle = 100 * time.Millisecond

// Bar reports one step. A nil Bar, or one made for a nil writer, ignores all
// calls. Its methods are safe for concurrent use.
type Bar struct {
	w    io.Writer
	desc string
	bar  *progressbar.ProgressBar // nil off a terminal
	// spinner: bar was drawn without a total
	spinner bool
	start   time.Time

	mu          sync.Mutex
	done, total int
	finished    bool
}

// Enabled reports whether w is a terminal (and so gets bars, not lines).
func Enabled(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New starts a step of total items writing to w: a bar when w is a
// terminal, otherwise a start line "desc: N items". total < 0 means not known
// yet (a spinner until Set gives one).
func New(w io.Writer, total int, desc string) *Bar {
	b := &Bar{w: w, desc: desc, total: total, start: time.Now()}
	if w == nil {
		return b
	}
	if Enabled(w) {
		b.bar, b.spinner = newBar(w, total, desc), total < 0
		// Draw at once, so a slow first item still shows the step.
		_ = b.bar.RenderBlank()
		return b
	}
	if total >= 0 {
		fmt.Fprintf(w, "%s: %d items\n", desc, total)
	} else {
		fmt.Fprintf(w, "%s: started\n", desc)
	}
	return b
}

// newBar draws a bar of total items (a spinner when total < 0) on terminal w.
func newBar(w io.Writer, total int, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(throttle),
		progressbar.OptionClearOnFinish(),
	)
}

// Set moves the step to done of total (total may change, e.g. once known).
func (b *Bar) Set(done, total int) {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.done = done
	if total > 0 {
		b.total = total
	}
	if b.bar == nil {
		return
	}
	switch {
	case total > 0 && b.spinner:
		// A spinner learns its total: a bar with count and ETA replaces it.
		_ = b.bar.Finish() // clears it and stops its redraw goroutine
		b.bar, b.spinner = newBar(b.w, total, b.desc), false
		_ = b.bar.RenderBlank()
	case total > 0 && int64(total) != b.bar.GetMax64():
		b.bar.ChangeMax(total)
	}
	_ = b.bar.Set(done)
}

// Describe changes the text shown before the bar (e.g. the current loss).
// Off a terminal it only changes the final line's label.
func (b *Bar) Describe(s string) {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.desc = s
	if b.bar != nil {
		b.bar.Describe(s)
	}
}

// Func adapts the bar to the func(done, total int) callbacks libraries take.
func (b *Bar) Func() func(done, total int) { return b.Set }

// Finish ends the step: it clears the bar and prints the final line
// "desc: done N/T in 1.2s (34.5/s)" ("desc: stopped at n/T …" when n < T).
// Later calls do nothing.
func (b *Bar) Finish() {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	if b.bar != nil {
		_ = b.bar.Finish()
	}
	fmt.Fprintln(b.w, b.summary(time.Since(b.start)))
}

// summary is the final line; elapsed is passed in so tests can pin it. A
// step finished short of its total (an error, a cancel, a stop after
// failures) says "stopped at 3/4", so a log never reads as a complete step
// that quietly skipped items.
func (b *Bar) summary(elapsed time.Duration) string {
	count, verb := fmt.Sprintf("%d", b.done), "done"
	if b.total > 0 {
		count = fmt.Sprintf("%d/%d", b.done, b.total)
		if b.done < b.total {
			verb = "stopped at"
		}
	}
	return fmt.Sprintf("%s: %s %s in %s (%s)", b.desc, verb, count, elapsed.Round(100*time.Millisecond), Rate(b.done, elapsed))
}

// Rate formats done items over elapsed as "12.3/s", or "4.5s/it" below one
// item a second (tqdm's convention).
func Rate(done int, elapsed time.Duration) string {
	if done <= 0 || elapsed <= 0 {
		return "-/s"
	}
	per := float64(done) / elapsed.Seconds()
	if per >= 1 {
		return fmt.Sprintf("%.1f/s", per)
	}
	return fmt.Sprintf("%.1fs/it", 1/per)
}

// Stages reports multi-stage work (self-learning rounds, pipeline builds):
// one Bar per stage. A stage may run inside another (selflearn's "r0/eval"
// of 4 variants encodes the corpus and generates hypotheses between its
// variants): a new stage started while the current one is short of its total
// nests over it, and the outer stage's bar goes on when it is updated again,
// so it prints one start and one final line, at its total, instead of
// "done 1/4" then "done 3/4". A new stage after a complete one (or one of
// unknown total) finishes it. Safe for concurrent use.
type Stages struct {
	w      io.Writer
	prefix string

	mu   sync.Mutex
	open []stage // open stages, outermost first; the last is drawn
}

type stage struct {
	name string
	bar  *Bar
}

// NewStages reports stages to w; prefix (e.g. "selflearn") starts each
// stage's label.
func NewStages(w io.Writer, prefix string) *Stages { return &Stages{w: w, prefix: prefix} }

// Update reports done of total items of stage.
func (s *Stages) Update(name string, done, total int) {
	s.mu.Lock()
	i := slices.IndexFunc(s.open, func(st stage) bool { return st.name == name })
	switch {
	case i >= 0:
		// The stage itself, or an outer one going on: its inner stages are over.
		s.finishFrom(i + 1)
	default:
		if n := len(s.open); n > 0 && s.open[n-1].bar.complete() {
			s.finishFrom(n - 1)
		}
		if n := len(s.open); n > 0 {
			s.open[n-1].bar.clear() // nested: the inner stage draws now
		}
		desc := name
		if s.prefix != "" {
			desc = s.prefix + " " + name
		}
		s.open = append(s.open, stage{name, New(s.w, total, desc)})
		i = len(s.open) - 1
	}
	b := s.open[i].bar
	s.mu.Unlock()
	b.Set(done, total)
}

// finishFrom finishes the open stages from index i on, innermost first.
func (s *Stages) finishFrom(i int) {
	for j := len(s.open) - 1; j >= i; j-- {
		s.open[j].bar.Finish()
	}
	s.open = s.open[:i]
}

// Func adapts Stages to func(stage string, done, total int) callbacks.
func (s *Stages) Func() func(stage string, done, total int) { return s.Update }

// Finish finishes every open stage, innermost first.
func (s *Stages) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishFrom(0)
}

// complete reports whether the step reached its total, or has none (a step
// of unknown size ends when the next one starts).
func (b *Bar) complete() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total <= 0 || b.done >= b.total
}

// clear removes a drawn bar from the terminal (its next Set redraws it).
func (b *Bar) clear() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil && !b.finished {
		_ = b.bar.Clear()
	}
}

// Println writes line (and a newline) to w above the bar: a drawn bar is
// cleared first and redrawn by its next update.
func (b *Bar) Println(w io.Writer, line string) {
	if b != nil && b.bar != nil {
		_ = b.bar.Clear()
	}
	fmt.Fprintln(w, line)
}
