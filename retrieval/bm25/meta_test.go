package bm25

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// metaChunks are two documents' middle chunks whose text never names their
// document; only the title does.
func metaChunks() []data.Chunk {
	return []data.Chunk{
		{ID: "a#1", DocID: "a", Index: 1, Text: "Corar durante cinco minutos e lavar.", Meta: map[string]any{"title": "Giemsa", "keywords": "Mastócitos, Eosina"}},
		{ID: "b#1", DocID: "b", Index: 1, Text: "Corar durante dez minutos e lavar.", Meta: map[string]any{"title": "Grocott", "keywords": "Prata"}},
		{ID: "c#0", DocID: "c", Index: 0, Text: "Página sem título: Giemsa citado."},
	}
}

// TestMetaFields: a query naming a document's title or keywords finds its
// chunks only when MetaFields indexes them, hits and Doc keep the chunk's
// own text, and the choice survives Build/Open.
func TestMetaFields(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		query  string
		want   []string // hit ids, best first
	}{
		{"text only: the title is not indexed", nil, "Grocott", []string{}},
		{"title", []string{"title"}, "Grocott", []string{"b#1"}},
		// c#0 is the shorter chunk (BM25's length normalization).
		{"title, and a chunk naming it in its text", []string{"title"}, "Giemsa", []string{"c#0", "a#1"}},
		{"keywords", []string{"title", "keywords"}, "mastócitos", []string{"a#1"}},
		{"keywords not asked for", []string{"title"}, "mastócitos", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MetaFields = tc.fields
			ix, err := NewMemory(metaChunks(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			hits, err := ix.Search(tc.query, 10)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(hits))
			for i, h := range hits {
				got[i] = h.ID
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Search(%q) = %v, want %v", tc.query, got, tc.want)
			}
			for _, c := range metaChunks() {
				if d, ok := ix.Doc(c.ID); !ok || d.Text != c.Text {
					t.Errorf("Doc(%s).Text = %q (found %v), want the chunk's own %q", c.ID, d.Text, ok, c.Text)
				}
			}
		})
	}
}

func TestMetaFieldsPersist(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MetaFields = []string{"title", "keywords"}
	dir := filepath.Join(t.TempDir(), "ix")
	ix, err := Build(dir, metaChunks(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	avg := ix.AvgDocLen()
	ix.Close()
	plain, err := NewMemory(metaChunks(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// "Giemsa Mastócitos, Eosina" and "Grocott Prata" add 3 + 2 terms over 3 chunks.
	if want := plain.AvgDocLen() + 5.0/3; math.Abs(avg-want) > 1e-12 {
		t.Errorf("AvgDocLen with title and keywords = %v, want %v (the meta terms count in dl)", avg, want)
	}
	re, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if !re.Config().Equal(cfg) {
		t.Errorf("Open: Config = %+v, want %+v", re.Config(), cfg)
	}
	hits, err := re.Search("prata", 1)
	if err != nil || len(hits) != 1 || hits[0].ID != "b#1" {
		t.Errorf("reopened Search(prata) = %v, %v; want b#1", hits, err)
	}
	if d, _ := re.Doc("b#1"); d.Text != metaChunks()[1].Text || d.Meta["title"] != "Grocott" {
		t.Errorf("reopened Doc(b#1) = %+v, want the chunk's own text and meta", d)
	}
}

func TestMetaFieldsErrors(t *testing.T) {
	number := metaChunks()
	number[1].Meta["page"] = float64(2)
	tests := []struct {
		name   string
		chunks []data.Chunk
		fields []string
		want   string
	}{
		{"empty name", metaChunks(), []string{"title", " "}, `"MetaFields": entry 1 is empty`},
		{"repeated", metaChunks(), []string{"title", "title"}, `"MetaFields": "title" repeats`},
		{"no chunk has it", metaChunks(), []string{"titel"}, `meta field "titel": no chunk has it`},
		{"not a string", number, []string{"page"}, `chunk 1 (b#1): meta field "page": want a string, got float64`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MetaFields = tc.fields
			ix, err := NewMemory(tc.chunks, cfg)
			if err == nil {
				ix.Close()
				t.Fatalf("NewMemory with MetaFields %q: no error, want %s", tc.fields, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %s", err, tc.want)
			}
		})
	}
}
