package tracker

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRecordInDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "filter")
	if err := RecordInDir(dir, &Run{ID: "20261204-train-filter-ab12"}, "train-filter"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, DirRunFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"train-filter","run_id":"20261204-train-filter-ab12"}` + "\n"; string(b) != want {
		t.Errorf("run.json = %q, want %q", b, want)
	}
}

func TestRunsBase(t *testing.T) {
	for _, tc := range []struct{ db, base, dir string }{
		{"work/ragforge.db", "work", "work/runs/r1"},
		{"postgres://u@h/db", ".", "runs/r1"},
	} {
		if got := RunsBase(tc.db); got != tc.base {
			t.Errorf("RunsBase(%q) = %q, want %q", tc.db, got, tc.base)
		}
		if got := RunDir(tc.db, "r1"); got != tc.dir {
			t.Errorf("RunDir(%q) = %q, want %q", tc.db, got, tc.dir)
		}
	}
}
