package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A label ict value that makes no sense is an error naming the flag.
func TestLabelICTBadFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--db", filepath.Join(dir, "runs.db"), "label", "ict", "--corpus", filepath.Join(dir, "missing.jsonl"), "--out", filepath.Join(dir, "ict.jsonl")}
	for _, tc := range []struct{ flag, value string }{
		{"--per-chunk", "0"}, {"--negatives", "0"}, {"--keep", "1.5"}, {"--keep", "-0.1"},
		{"--query-words", "-1"}, {"--drop-words", "1"}, {"--drop-words", "-0.2"}, {"--content-words", "-1"},
	} {
		code, stderr := runErr(append(base, tc.flag, tc.value)...)
		if code == 0 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%s %q: exit %d, stderr %q; want an error naming %s", tc.flag, tc.value, code, stderr, tc.flag)
		}
	}
}
