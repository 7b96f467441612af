package data

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// writeRAG2 lays out root/embeddings/<corpus>/<name>.npy and
// root/articles/<corpus>/<json name> from raw file contents.
func writeRAG2(t *testing.T, root, corpus string, npy map[string][]byte, articles map[string]string) {
	t.Helper()
	for dir, files := range map[string]map[string][]byte{"embeddings": npy, "articles": {}} {
		if err := os.MkdirAll(filepath.Join(root, dir, corpus), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(root, dir, corpus, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, s := range articles {
		if err := os.WriteFile(filepath.Join(root, "articles", corpus, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func f4npy(shape string, v ...float32) []byte {
	return testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': "+shape+", }", testutil.F4Bytes(v...))
}

func TestLoadRAG2Corpus(t *testing.T) {
	root := t.TempDir()
	// Four PubMed-style chunks: name order must be 0, 1, 2, 10 (numeric),
	// not 0, 1, 10, 2. Row r of chunk c holds the vector (c, r+1) (an
	// all-zero row is refused).
	writeRAG2(t, root, "pubmed",
		map[string][]byte{
			"PubMed_Embeds_0.npy":  f4npy("(2, 2)", 0, 1, 0, 2),
			"PubMed_Embeds_1.npy":  f4npy("(1, 2)", 1, 1),
			"PubMed_Embeds_10.npy": f4npy("(1, 2)", 10, 1),
			"PubMed_Embeds_2.npy":  f4npy("(1, 2)", 2, 1),
		},
		map[string]string{
			"PubMed_Articles_0.json":  `["first text", "second text"]`,
			"PubMed_Articles_1.json":  `[{"pmid": 12345, "t": "A title", "a": "An abstract.", "d": "2020"}]`,
			"PubMed_Articles_10.json": `[{"id": "doc-ten", "title": "T10", "contents": "ten"}]`,
			"PubMed_Articles_2.json":  `[{"content": "two"}]`,
			"Unrelated.json":          `not even json`,
		})
	docs, vecs, dim, err := LoadRAG2Corpus(root, "pubmed")
	if err != nil {
		t.Fatal(err)
	}
	if dim != 2 {
		t.Fatalf("dim = %d, want 2", dim)
	}
	wantVecs := []float32{0, 1, 0, 2, 1, 1, 2, 1, 10, 1}
	if !slices.Equal(vecs, wantVecs) {
		t.Errorf("vecs = %v, want %v", vecs, wantVecs)
	}
	type doc struct{ id, title, text, file string }
	want := []doc{
		{"pubmed/PubMed_Articles_0.json:0", "", "first text", "PubMed_Articles_0.json"},
		{"pubmed/PubMed_Articles_0.json:1", "", "second text", "PubMed_Articles_0.json"},
		{"12345", "A title", "An abstract.", "PubMed_Articles_1.json"},
		{"pubmed/PubMed_Articles_2.json:0", "", "two", "PubMed_Articles_2.json"},
		{"doc-ten", "T10", "ten", "PubMed_Articles_10.json"},
	}
	if len(docs) != len(want) {
		t.Fatalf("%d docs, want %d", len(docs), len(want))
	}
	for i, w := range want {
		d := docs[i]
		if d.ID != w.id || d.Title != w.title || d.Text != w.text || d.Meta["file"] != w.file || d.Meta["corpus"] != "pubmed" {
			t.Errorf("doc %d = %+v, want %+v", i, d, w)
		}
	}
	if got := docs[2].Meta["d"]; got != "2020" {
		t.Errorf("extra field d kept in Meta as %v, want 2020", got)
	}
	if got := docs[1].Meta["row"]; got != 1 {
		t.Errorf("Meta row = %v, want 1", got)
	}
}

func TestLoadRAG2CorpusSameStem(t *testing.T) {
	root := t.TempDir()
	writeRAG2(t, root, "cpg",
		map[string][]byte{"cpg.npy": f4npy("(1, 3)", 1, 2, 3)},
		map[string]string{"cpg.json": `["guideline"]`})
	docs, vecs, dim, err := LoadRAG2Corpus(root, "cpg")
	if err != nil {
		t.Fatal(err)
	}
	if dim != 3 || len(docs) != 1 || docs[0].Text != "guideline" || !slices.Equal(vecs, []float32{1, 2, 3}) {
		t.Errorf("got %v %v %d", docs, vecs, dim)
	}
}

func TestLoadRAG2CorpusErrors(t *testing.T) {
	tests := []struct {
		name     string
		npy      map[string][]byte
		articles map[string]string
		want     string
	}{
		{"no npy", map[string][]byte{}, nil, "no .npy files"},
		{"missing json", map[string][]byte{"X_Embeds_0.npy": f4npy("(1, 1)", 1)}, nil, "no articles file (tried"},
		{"count mismatch", map[string][]byte{"X_Embeds_0.npy": f4npy("(2, 1)", 1, 2)},
			map[string]string{"X_Articles_0.json": `["only one"]`}, "has 2 rows but"},
		{"dimension mismatch", map[string][]byte{"a.npy": f4npy("(1, 2)", 1, 2), "b.npy": f4npy("(1, 3)", 1, 2, 3)},
			map[string]string{"a.json": `["a"]`, "b.json": `["b"]`}, "dimension 3, but"},
		{"not a list", map[string][]byte{"a.npy": f4npy("(1, 1)", 1)},
			map[string]string{"a.json": `{"text": "x"}`}, "want a JSON list of records"},
		{"number record", map[string][]byte{"a.npy": f4npy("(1, 1)", 1)},
			map[string]string{"a.json": `[42]`}, "record 0: want a string or an object"},
		{"text not string", map[string][]byte{"a.npy": f4npy("(2, 1)", 1, 2)},
			map[string]string{"a.json": `["ok", {"text": 3}]`}, `record 1: field "text": want a string`},
		{"duplicate id", map[string][]byte{"a.npy": f4npy("(2, 1)", 1, 2)},
			map[string]string{"a.json": `[{"id": "x"}, {"id": "x"}]`}, `duplicate id "x"`},
		{"NaN embedding", map[string][]byte{"a.npy": f4npy("(2, 2)", 1, 2, 3, float32(math.NaN()))},
			map[string]string{"a.json": `["a", "b"]`}, "a.npy: row 1 column 1 is NaN"},
		{"Inf embedding", map[string][]byte{"a.npy": f4npy("(2, 2)", float32(math.Inf(-1)), 2, 3, 4)},
			map[string]string{"a.json": `["a", "b"]`}, "a.npy: row 0 column 0 is -Inf"},
		{"zero embedding", map[string][]byte{"a.npy": f4npy("(3, 2)", 1, 2, 0, 0, 3, 4)},
			map[string]string{"a.json": `["a", "b", "c"]`}, "a.npy: row 1 is all zeros"},
		{"float64 embeddings", map[string][]byte{"a.npy": testutil.RawNPY(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }", make([]byte, 8))},
			map[string]string{"a.json": `["a"]`}, `a.npy: dtype "<f8"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeRAG2(t, root, "c", tt.npy, tt.articles)
			_, _, _, err := LoadRAG2Corpus(root, "c")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, _, _, err := LoadRAG2Corpus(t.TempDir(), "absent"); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing corpus dir: err = %v", err)
	}
}

func TestNaturalCompare(t *testing.T) {
	got := []string{"E_10.npy", "E_2.npy", "E_1.npy", "E_02.npy", "Abs.npy", "E_0.npy", "Main.npy"}
	slices.SortFunc(got, naturalCompare)
	want := []string{"Abs.npy", "E_0.npy", "E_1.npy", "E_02.npy", "E_2.npy", "E_10.npy", "Main.npy"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted = %v, want %v", got, want)
	}
}
