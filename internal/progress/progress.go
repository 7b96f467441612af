// Package progress draws progress bars for the CLI. Bars are silent when the
// output is not a terminal (CI logs, pipes), so scripted runs stay clean.
// Libraries never print: they report through a func(done, total int)
// callback, and the CLI adapts it with Func.
package progress

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is a progress bar; a nil or silent Bar ignores all calls.
type Bar struct {
	bar *progressbar.ProgressBar
}

// Enabled reports whether w is a terminal.
func Enabled(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar of total steps writing to w, or a silent bar when w is
// not a terminal. total < 0 draws a spinner.
func New(w io.Writer, total int, desc string) *Bar {
	if !Enabled(w) {
		return &Bar{}
	}
	return &Bar{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
	)}
}

// Set moves the bar to done of total (total may change, e.g. once known).
func (b *Bar) Set(done, total int) {
	if b == nil || b.bar == nil {
		return
	}
	if int64(total) != b.bar.GetMax64() && total > 0 {
		b.bar.ChangeMax(total)
	}
	_ = b.bar.Set(done)
}

// Describe changes the text shown before the bar (e.g. the current loss).
func (b *Bar) Describe(s string) {
	if b == nil || b.bar == nil {
		return
	}
	b.bar.Describe(s)
}

// Func adapts the bar to the func(done, total int) callbacks libraries take.
func (b *Bar) Func() func(done, total int) { return b.Set }

// Finish completes and clears the bar.
func (b *Bar) Finish() {
	if b == nil || b.bar == nil {
		return
	}
	_ = b.bar.Finish()
}

// Println writes line (and a newline) to w above the bar: a drawn bar is
// cleared first and redrawn by its next update.
func (b *Bar) Println(w io.Writer, line string) {
	if b != nil && b.bar != nil {
		_ = b.bar.Clear()
	}
	fmt.Fprintln(w, line)
}
