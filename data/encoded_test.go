package data

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/npy"
)

func TestWriteRAG2RoundTrip(t *testing.T) {
	chunks := []Chunk{
		{ID: "d1#0", DocID: "d1", Index: 0, Text: "primeiro trecho", Start: 0, End: 15, Meta: map[string]any{"category": "Tecnicas", "page": 2.0}},
		{ID: "d1#1", DocID: "d1", Index: 1, Text: "segundo <trecho> & mais", Start: 10, End: 33},
		{ID: "d2", DocID: "d2", Index: 0, Text: "outro documento", Start: 0, End: 15},
	}
	vecs := []float32{1, 0, 0.5, -0.5, 0, 1}
	root := t.TempDir()
	info := EncodeInfo{Encoder: "/models/bge", Pooling: "cls", Normalize: true, MaxLength: 512, QueryPrefix: "query: "}
	if err := WriteRAG2(root, "ap", chunks, vecs, 2, 2, info); err != nil {
		t.Fatal(err)
	}
	// Two shards of at most 2 rows, named as RAG²'s PubMed shards.
	for _, f := range []struct {
		name string
		n    int
	}{{"ap_Embeds_0.npy", 2}, {"ap_Embeds_1.npy", 1}} {
		n, d, err := npy.ReadShape(filepath.Join(root, "embeddings", "ap", f.name))
		if err != nil || n != f.n || d != 2 {
			t.Errorf("%s: shape [%d, %d], err %v; want [%d, 2]", f.name, n, d, err, f.n)
		}
	}
	for _, f := range []string{"ap_Articles_0.json", "ap_Articles_1.json"} {
		if _, err := os.Stat(filepath.Join(root, "articles", "ap", f)); err != nil {
			t.Error(err)
		}
	}
	for _, spec := range []string{"rag2:" + root, "rag2:" + root + "#ap"} {
		enc, err := OpenEncoded(spec)
		if err != nil {
			t.Fatal(err)
		}
		if enc.Name != "ap" || enc.Dim != 2 || !slices.Equal(enc.Vectors, vecs) {
			t.Errorf("%s: name %q dim %d vectors %v", spec, enc.Name, enc.Dim, enc.Vectors)
		}
		want := info
		want.Rows, want.Dim = 3, 2
		if enc.Info == nil || *enc.Info != want {
			t.Errorf("%s: info %+v, want %+v", spec, enc.Info, want)
		}
		if got := enc.Chunks(); !reflect.DeepEqual(got, chunks) {
			t.Errorf("%s: chunks\n got %+v\nwant %+v", spec, got, chunks)
		}
	}
	if err := WriteRAG2(root, "ap", chunks, vecs, 2, 0, info); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second write: err = %v, want already exists", err)
	}
}

func TestOpenEncodedErrors(t *testing.T) {
	root := t.TempDir()
	one := []Chunk{{ID: "a", DocID: "a", Text: "x", End: 1}}
	for _, name := range []string{"c1", "c2"} {
		if err := WriteRAG2(root, name, one, []float32{1}, 1, 0, EncodeInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(root, "embeddings", "c2", EncodeInfoFile)
	if err := os.WriteFile(bad, []byte(`{"rows": 5, "dim": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ spec, want string }{
		{root, "want rag2:DIR"},
		{"rag2:", "want rag2:DIR"},
		{"rag2:" + root, "holds 2 corpora"},
		{"rag2:" + root + "#c2", `"rows"/"dim" say [5, 1]`},
		{"rag2:" + root + "#absent", "absent"},
		{"rag2:" + filepath.Join(root, "nothing"), "embeddings"},
	}
	for _, tt := range tests {
		if _, err := OpenEncoded(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.spec, err, tt.want)
		}
	}
	if _, err := OpenEncoded("rag2:" + root + "#c1"); err != nil {
		t.Errorf("c1: %v", err)
	}
	if err := WriteRAG2(root, "../x", one, []float32{1}, 1, 0, EncodeInfo{}); err == nil {
		t.Error("name ../x accepted")
	}
	if err := WriteRAG2(root, "c3", one, []float32{1, 2}, 1, 0, EncodeInfo{}); err == nil {
		t.Error("2 floats for 1 chunk of dim 1 accepted")
	}
}
