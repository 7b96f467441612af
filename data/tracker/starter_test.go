package tracker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// Record finishes every run started inside the call with the call's error:
// done, failed, or interrupted on cancellation; a nil Starter starts none.
func TestStoreRecord(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name   string
		runs   int
		err    error
		status string
	}{
		{"done", 1, nil, StatusDone},
		{"two runs", 2, nil, StatusDone},
		{"failed", 1, errors.New("boom"), StatusFailed},
		{"interrupted", 1, fmt.Errorf("train: %w", context.Canceled), StatusInterrupted},
		{"none", 0, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ids []string
			err := s.Record("v", "simplego", func(start Starter) error {
				for range c.runs {
					r, err := start.Start("test-"+c.name, map[string]int{"n": 1})
					if err != nil {
						return err
					}
					if r.Store() != s {
						t.Errorf("run %s: Store() is not the store it was started in", r.ID)
					}
					ids = append(ids, r.ID)
				}
				return c.err
			})
			if !errors.Is(err, c.err) {
				t.Fatalf("Record: %v, want %v", err, c.err)
			}
			if len(ids) != c.runs {
				t.Fatalf("%d runs started, want %d", len(ids), c.runs)
			}
			for _, id := range ids {
				d, err := s.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				if d.Status != c.status {
					t.Errorf("run %s: status %q, want %q", id, d.Status, c.status)
				}
			}
		})
	}
	if r, err := Starter(nil).Start("x", nil); r != nil || err != nil {
		t.Errorf("nil Starter: %v, %v; want no run and no error", r, err)
	}
}
