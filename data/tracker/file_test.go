package tracker

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/sqlitedb"
)

// --db is a file path: '#', '?', '%' and spaces are literal characters.
func TestOpenLiteralPath(t *testing.T) {
	for _, name := range []string{"x#y.db", "a?mode=ro.db", "p%41%.db", "sp ace&b=c.db", "file:z.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Start("x", nil, "v", "cpu"); err != nil {
				t.Fatal(err)
			}
			s.Close()
			ents, _ := os.ReadDir(dir)
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
			}
			sort.Strings(got)
			if len(got) != 1 || got[0] != name {
				t.Errorf("directory holds %q, want exactly %q", got, name)
			}
			s, err = Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if l, _ := s.List(ListOptions{}); len(l) != 1 {
				t.Errorf("reopened store lists %d runs, want 1", len(l))
			}
		})
	}
}

// corruptCopy writes a store with runs and metrics, closes it, and
// overwrites bytes inside the metrics table's root page.
func corruptStore(t *testing.T, path string) string {
	t.Helper()
	s := openAt(t, path, t0)
	r, _ := s.Start("train", nil, "v", "cpu")
	for i := 0; i < 50; i++ {
		r.Metric("loss", i, float64(i))
	}
	r.Finish(nil)
	var root, pageSize int
	if err := s.db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'metrics'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	s.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Flip the bytes of the b-tree page header and first cell pointers.
	off := int64((root - 1) * pageSize)
	buf := make([]byte, 16)
	f.ReadAt(buf, off)
	for i := range buf {
		buf[i] ^= 0x5a
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func TestCorruptStoreRefusedForWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	id := corruptStore(t, path)
	before, _ := os.ReadFile(path)

	_, err := Open(path)
	if !errors.Is(err, sqlitedb.ErrCorrupt) {
		t.Fatalf("Open of a corrupt file: err = %v, want ErrCorrupt", err)
	}
	for _, want := range []string{path, "quick_check", ".recover", "restore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Logf("Open: %v", err)

	s, err := OpenRead(path)
	if err != nil {
		t.Fatalf("OpenRead of a corrupt file: %v", err)
	}
	defer s.Close()
	if !errors.Is(s.Warning(), sqlitedb.ErrCorrupt) {
		t.Errorf("Warning() = %v, want ErrCorrupt", s.Warning())
	}
	l, err := s.List(ListOptions{})
	if err != nil || len(l) != 1 || l[0].ID != id {
		t.Errorf("read-only List = %v, %v; want the one run", l, err)
	}
	if _, err := s.Start("x", nil, "v", "cpu"); err == nil {
		t.Error("Start on a read-only corrupt store succeeded")
	}
	s.Close()
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Error("the corrupt file changed")
	}
}
