package progress

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// onTerminal runs f with a pseudo-terminal's slave side and returns what the
// terminal received.
func onTerminal(t *testing.T, f func(tty io.Writer)) string {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	got := make(chan string)
	go func() {
		var buf bytes.Buffer
		_, _ = io.Copy(&buf, master) // ends with EIO once the slave closes
		got <- buf.String()
	}()
	f(tty)
	tty.Close()
	return <-got
}

func TestBarOnTerminalShowsCountRateAndETA(t *testing.T) {
	defer func(old time.Duration) { throttle = old }(throttle)
	throttle = 0
	out := onTerminal(t, func(tty io.Writer) {
		if !Enabled(tty) {
			t.Fatal("a pseudo-terminal is not detected as a terminal")
		}
		b := New(tty, 10, "encode")
		for i := 1; i <= 10; i++ {
			b.Set(i, 10)
		}
		b.Finish()
	})
	for name, re := range map[string]string{
		"description": `encode`,
		"count":       `\(\d+/10,`,
		"rate":        `\d+ it/(s|min|hr)\)`,
		"ETA":         `\[\d+s:\d+s\]`,
		"final line":  `encode: done 10/10 in \S+ \(`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("terminal output lacks the %s (%s):\n%q", name, re, out)
		}
	}
}

// A step that learns its total later turns from a spinner into a bar.
func TestSpinnerBecomesBarOnTerminal(t *testing.T) {
	out := onTerminal(t, func(tty io.Writer) {
		b := New(tty, -1, "chunk")
		b.Set(5, 32)
		b.Finish()
	})
	if !regexp.MustCompile(`chunk +\d+% \|[^\r]*\(\d+/32, `).MatchString(out) {
		t.Errorf("no bar once the total is known:\n%q", out)
	}
}

func TestBarOffTerminalPrintsStartAndFinalLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int
		first string
	}{
		{"known total", 3, "chunk: 3 items"},
		{"unknown total", -1, "chunk: started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			b := New(&buf, tc.total, "chunk")
			for i := 1; i <= 3; i++ {
				b.Set(i, 3)
			}
			b.Finish()
			b.Finish() // idempotent
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 2 || lines[0] != tc.first || !strings.HasPrefix(lines[1], "chunk: done 3/3 in ") {
				t.Errorf("lines %q, want %q then a final line", lines, tc.first)
			}
			if strings.Contains(buf.String(), "\r") || strings.Contains(buf.String(), "\x1b") {
				t.Errorf("control characters off a terminal: %q", buf.String())
			}
		})
	}
}

func TestStagesOneLinePerStage(t *testing.T) {
	var buf bytes.Buffer
	s := NewStages(&buf, "selflearn")
	for _, stage := range []string{"r1/queries", "r1/mine"} {
		for i := 1; i <= 4; i++ {
			s.Update(stage, i, 4)
		}
	}
	s.Finish()
	s.Finish()
	got := regexp.MustCompile(` in \S+ \([^)]*\)`).ReplaceAllString(buf.String(), " in T")
	want := "selflearn r1/queries: 4 items\nselflearn r1/queries: done 4/4 in T\n" +
		"selflearn r1/mine: 4 items\nselflearn r1/mine: done 4/4 in T\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestNilWriterAndNilBarAreSilent(t *testing.T) {
	var nb *Bar
	nb.Set(1, 2)
	nb.Finish()
	b := New(nil, 2, "x")
	b.Set(1, 2)
	b.Describe("y")
	b.Finish()
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		done    int
		elapsed time.Duration
		want    string
	}{
		{10, 2 * time.Second, "5.0/s"},
		{1, 4 * time.Second, "4.0s/it"},
		{0, time.Second, "-/s"},
		{3, 0, "-/s"},
	} {
		if got := Rate(tc.done, tc.elapsed); got != tc.want {
			t.Errorf("Rate(%d, %v) = %q, want %q", tc.done, tc.elapsed, got, tc.want)
		}
	}
}

// TestSummaryEndsAtTotal: a step that ends at its total says "done N/N";
// one that ends short (an error or a stop) says "stopped at n/N", never a
// "done 3/4" that reads as finished.
func TestSummaryEndsAtTotal(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{
		{4, 4, "eval: done 4/4 in 2s (2.0/s)"},
		{3, 4, "eval: stopped at 3/4 in 2s (1.5/s)"},
		{0, 4, "eval: stopped at 0/4 in 2s (-/s)"},
		{5, -1, "eval: done 5 in 2s (2.5/s)"},
	} {
		b := &Bar{desc: "eval", done: tc.done, total: tc.total}
		if got := b.summary(2 * time.Second); got != tc.want {
			t.Errorf("summary(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}

// TestStagesNested: selflearn's "r0/eval" (4 variants) runs "encode-corpus"
// and "eval-hypo" between its variants; it printed "r0/eval: done 1/4", then
// "done 3/4", then "done 4/4". The outer stage now prints one start line and
// one final line at its total; a stage after a complete one still replaces it.
func TestStagesNested(t *testing.T) {
	var buf bytes.Buffer
	s := NewStages(&buf, "selflearn")
	s.Update("r0/eval", 0, 4)
	s.Update("r0/encode-corpus", 34, 34)
	s.Update("r0/eval", 1, 4)
	s.Update("r0/eval", 2, 4)
	s.Update("g0/eval-hypo", 37, 37)
	s.Update("r0/eval", 3, 4)
	s.Update("r0/eval", 4, 4)
	s.Update("r1/queries", 8, 8)
	s.Update("r1/train", 0, 5) // stopped by an error: Finish says so
	s.Finish()
	got := regexp.MustCompile(` in \S+ \([^)]*\)`).ReplaceAllString(buf.String(), " in T")
	want := "selflearn r0/eval: 4 items\n" +
		"selflearn r0/encode-corpus: 34 items\nselflearn r0/encode-corpus: done 34/34 in T\n" +
		"selflearn g0/eval-hypo: 37 items\nselflearn g0/eval-hypo: done 37/37 in T\n" +
		"selflearn r0/eval: done 4/4 in T\n" +
		"selflearn r1/queries: 8 items\nselflearn r1/queries: done 8/8 in T\n" +
		"selflearn r1/train: 5 items\nselflearn r1/train: stopped at 0/5 in T\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
