package data

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Walk passes the documents Open loads, in order, and refuses what Open
// refuses: an empty corpus, a duplicate id (after the documents before it).
func TestWalk(t *testing.T) {
	for _, path := range []string{filepath.Join("testdata", "beir"), filepath.Join("testdata", "corpus.csv")} {
		c, err := Open(path, FieldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []Document
		if err := Walk(path, FieldOptions{}, func(d Document) error { got = append(got, d); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.Docs) {
			t.Fatalf("%s: Walk gave %d documents, Open %d (or they differ)", path, len(got), len(c.Docs))
		}
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	dup := filepath.Join(dir, "dup.jsonl")
	os.WriteFile(empty, []byte("\n"), 0o644)
	os.WriteFile(dup, []byte(`{"_id":"a","text":"x"}`+"\n"+`{"_id":"b","text":"y"}`+"\n"+`{"_id":"a","text":"z"}`+"\n"), 0o644)
	if err := Walk(empty, FieldOptions{}, func(Document) error { return nil }); err == nil || !strings.Contains(err.Error(), "no documents") {
		t.Fatalf("empty corpus: got %v", err)
	}
	n := 0
	err := Walk(dup, FieldOptions{}, func(Document) error { n++; return nil })
	if err == nil || n != 2 {
		t.Fatalf("duplicate id: %d documents passed, err %v; want 2 and an error", n, err)
	}
}
