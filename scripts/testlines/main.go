// Command testlines turns `go test -json` on stdin into one line per
// finished top-level test ("--- PASS: TestX (1.2s)"), the output of each
// failed test, and go test's own package lines ("ok  pkg 12s", "FAIL pkg"),
// so a long package shows progress in `make test` instead of minutes of
// silence. It exits 1 when any test, package or build failed: POSIX sh has
// no pipefail, so the pipe's status must come from here.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one test2json record (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	failed, err := filter(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlines:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// filter copies the lines worth reading from r's test2json stream to w and
// reports whether anything failed.
func filter(r io.Reader, w io.Writer) (failed bool, err error) {
	out := map[string]*strings.Builder{} // output of running top-level tests, by package and name
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(w, string(line)) // not JSON: e.g. an error of go test itself
			continue
		}
		top, _, isSub := strings.Cut(e.Test, "/")
		key := e.Package + " " + top // a subtest's output goes with its test's
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			// Package lines: "ok  pkg 1.2s", "FAIL pkg", "PASS", panics outside tests.
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "": // a package's start, pass, fail or skip
			failed = failed || e.Action == "fail"
		case e.Action == "output":
			if out[key] == nil {
				out[key] = &strings.Builder{}
			}
			out[key].WriteString(e.Output)
		case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
			failed = failed || e.Action == "fail"
			if isSub {
				continue // reported with its test
			}
			if b := out[key]; b != nil && e.Action == "fail" {
				fmt.Fprint(w, b.String())
			}
			fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", strings.ToUpper(e.Action), e.Test, e.Elapsed)
			delete(out, key)
		}
	}
	return failed, sc.Err()
}
