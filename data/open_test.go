package data

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, filepath.Join(dir, "empty.jsonl"), "")
	for _, tc := range []struct {
		name, path string
		ids        []string
		err        string
	}{
		{"beir dir", "testdata/beir", []string{"d1", "d2"}, ""},
		{"csv", "testdata/corpus.csv", nil, ""},
		{"missing", filepath.Join(dir, "nope.jsonl"), nil, "corpus: "},
		{"no documents", empty, nil, "no documents"},
		{"unknown format", "testdata/apqa.csv.txt", nil, "corpus: "},
		{"bad rag2", EncodedScheme + dir, nil, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(tc.path, FieldOptions{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Path != tc.path || c.Encoded != nil || len(c.Docs) == 0 {
				t.Fatalf("got %+v", c)
			}
			for i, id := range tc.ids {
				if c.Docs[i].ID != id {
					t.Errorf("doc %d: id %q, want %q", i, c.Docs[i].ID, id)
				}
			}
		})
	}
}

func TestOpenEncodedCorpus(t *testing.T) {
	root := t.TempDir()
	chunks := []Chunk{{ID: "a#0", DocID: "a", Text: "alpha"}, {ID: "b#0", DocID: "b", Text: "beta"}}
	if err := WriteRAG2(root, "c", chunks, []float32{1, 0, 0, 1}, 2, 0, EncodeInfo{}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(EncodedScheme+root, FieldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Docs != nil || c.Encoded == nil || c.Encoded.Dim != 2 || len(c.Encoded.Docs) != 2 {
		t.Fatalf("got %+v", c)
	}
}

func TestOpenQueries(t *testing.T) {
	qs, qrels, err := OpenQueries("testdata/beir", "")
	if err != nil {
		t.Fatal(err)
	}
	// q3 has no judgment and is dropped.
	if len(qs) != 2 || qs[0].ID != "q1" || qs[1].ID != "q2" || len(qrels) != 2 {
		t.Errorf("beir: queries %+v, qrels %v", qs, qrels)
	}
	qs, qrels, err = OpenQueries("testdata/apqa.csv", "test")
	if err != nil || len(qs) == 0 || qrels != nil {
		t.Errorf("csv: %d queries, qrels %v, err %v", len(qs), qrels, err)
	}
	if _, _, err := OpenQueries("testdata/beir", "dev"); err == nil || !strings.Contains(err.Error(), "dev.tsv") {
		t.Errorf("missing split: err = %v", err)
	}
	if _, _, err := OpenQueries("testdata/corpus.jsonl.gz", ""); err == nil {
		t.Error("missing file: no error")
	}
	if _, _, err := OpenQueries("testdata/beir/corpus.jsonl", ""); err == nil || !strings.Contains(err.Error(), "want an AP QA .csv or a BEIR directory") {
		t.Errorf("jsonl: err = %v", err)
	}
}
