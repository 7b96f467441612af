package main

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// Every long step shows a bar (count, rate, ETA) on a terminal and one start
// line plus one final line per step off a terminal.
func TestLongStepsReportProgress(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	n := 0
	for _, tc := range []struct {
		name  string
		args  []string
		steps []string // bar descriptions, in order
	}{
		{"eval retrieval dense", []string{"eval", "retrieval", "--corpus", corpus, "--qa", qa, "--retriever", "dense", "--encoder", bert, "--k", "1"},
			[]string{"chunk", "bm25 index", "encode", "search"}},
		{"label evidence", []string{"label", "evidence", "--corpus", corpus, "--qa", qa, "--top-n", "3"},
			[]string{"chunk", "evidence labels"}},
		{"pipeline build", []string{"pipeline", "build", "--corpus", corpus, "--retriever", bert},
			[]string{"chunk", "pipeline encode:corpus", "pipeline bm25:corpus"}},
		{"selflearn", []string{"selflearn", "--corpus", corpus, "--retriever", bert, "--generator", "ict", "--eval-qa", qa,
			"--rounds", "1", "--samples", "8", "--max-length", "64", "--retriever-batch", "4", "--recipe", "pretrained"},
			[]string{"selflearn r0/encode-corpus", "selflearn r1/queries", "selflearn r1/mine", "selflearn r1/train-retriever"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := func() []string {
				n++
				a := append([]string{"--db", db}, tc.args...)
				if tc.args[0] == "pipeline" {
					a = append(a, "--out", filepath.Join(dir, "pipe"+string(rune('a'+n))))
				}
				if tc.args[0] == "label" {
					a = append(a, "--out", filepath.Join(dir, "labels"+string(rune('a'+n))+".jsonl"))
				}
				if tc.args[0] == "selflearn" {
					a = append(a, "--work", filepath.Join(dir, "selflearn"+string(rune('a'+n))))
				}
				return a
			}
			// Off a terminal: one start line and one final line per step, no bar.
			var out, errb bytes.Buffer
			if code := execute(args(), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			log := errb.String()
			for _, s := range tc.steps {
				start := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s) + `[^\n]*: (\d+ items|started)$`)
				final := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s) + `[^\n]*: done \d+(/\d+)? in \S+ \(`)
				if len(start.FindAllString(log, -1)) == 0 || len(final.FindAllString(log, -1)) == 0 {
					t.Errorf("stderr off a terminal lacks the start or final line of %q:\n%s", s, log)
				}
			}
			// Issue 30: bars ended at 1/4 or 3/4 (a last step never logged,
			// a merge never reported). Every step ends at its total.
			for _, m := range regexp.MustCompile(`(?m)^([^\n]*): (done|stopped at) (\d+)/(\d+) in `).FindAllStringSubmatch(log, -1) {
				if m[2] != "done" || m[3] != m[4] {
					t.Errorf("step %q ended at %s/%s, not at its total:\n%s", m[1], m[3], m[4], log)
				}
			}
			if strings.ContainsAny(log, "\r\x1b") {
				t.Errorf("bar control characters off a terminal:\n%q", log)
			}
			// On a terminal: a bar with count, rate and ETA for every step.
			master, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal: %v", err)
			}
			defer master.Close()
			got := make(chan string)
			go func() {
				var buf bytes.Buffer
				_, _ = io.Copy(&buf, master)
				got <- buf.String()
			}()
			out.Reset()
			code := execute(args(), &out, tty)
			tty.Close()
			term := <-got
			if code != 0 {
				t.Fatalf("exit %d on a terminal: %s", code, term)
			}
			for _, s := range tc.steps {
				bar := regexp.MustCompile(regexp.QuoteMeta(s) + `[^\r\n]*\(\d+/\d+, \d+ it/(s|min|hr)\) \[\d+s:\d+s\]`)
				if !bar.MatchString(term) {
					t.Errorf("no bar with count, rate and ETA for %q on the terminal:\n%q", s, term)
				}
			}
		})
	}
}
