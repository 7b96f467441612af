package sqlitedb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDSNEscapesPath(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/w/x#y.db", "file:/w/x%23y.db?"},
		{"/w/a?b.db", "file:/w/a%3Fb.db?"},
		{"/w/p%41.db", "file:/w/p%2541.db?"},
		{"/w/sp ace.db", "file:/w/sp%20ace.db?"},
		{"/w/plain-name_1.db", "file:/w/plain-name_1.db?"},
	}
	for _, tt := range tests {
		got, err := DSN(tt.path, false)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("DSN(%q) = %q, want prefix %q", tt.path, got, tt.want)
		}
	}
	ro, _ := DSN("/w/a.db", true)
	if !strings.Contains(ro, "mode=ro") || !strings.Contains(ro, "_query_only=1") {
		t.Errorf("read-only DSN %q", ro)
	}
}

func TestOpenCheckedRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "it's.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenChecked(path)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != path {
		t.Fatalf("OpenChecked(garbage) err = %v, want a *CorruptError for %s", err, path)
	}
	if !strings.Contains(err.Error(), `sqlite3 'it'\''s.db' .recover`) && !strings.Contains(err.Error(), `'\''s.db' .recover | sqlite3 fixed.db`) {
		t.Errorf("recovery command not shell-quoted: %v", err)
	}
	db, err := OpenChecked(filepath.Join(t.TempDir(), "new.db"))
	if err != nil {
		t.Fatalf("a new file: %v", err)
	}
	db.Close()
}
