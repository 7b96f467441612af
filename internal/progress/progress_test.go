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
