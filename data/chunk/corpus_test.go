package chunk

import (
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/data"
)

func TestCorpus(t *testing.T) {
	docs := []data.Document{{ID: "a", Title: "T", Text: "one  two\nthree"}, {ID: "b", Text: "four"}}
	whole, err := Corpus(&data.Corpus{Path: "x", Docs: docs}, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []data.Chunk{{ID: "a", DocID: "a", Text: "T one two three", End: 14}, {ID: "b", DocID: "b", Text: "four", End: 4}}
	if !reflect.DeepEqual(whole, want) {
		t.Errorf("whole documents: got %+v, want %+v", whole, want)
	}
	cfg := DefaultConfig()
	cfg.Size, cfg.Overlap = 5, 0
	got, err := Corpus(&data.Corpus{Path: "x", Docs: docs}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	split, _, err := SplitAll(docs, cfg, nil)
	if err != nil || !reflect.DeepEqual(got, split) {
		t.Errorf("split: got %+v, SplitAll %+v (%v)", got, split, err)
	}
	enc := &data.Encoded{Docs: []data.Document{{ID: "c#0", Text: "stored", Meta: map[string]any{"doc_id": "c"}}}, Dim: 1, Vectors: []float32{1}}
	got, err = Corpus(&data.Corpus{Encoded: enc}, cfg, nil)
	if err != nil || !reflect.DeepEqual(got, enc.Chunks()) {
		t.Errorf("encoded: got %+v, want %+v (%v)", got, enc.Chunks(), err)
	}
	cfg.Overlap = 9
	if _, err := Corpus(&data.Corpus{Path: "x", Docs: docs}, cfg, nil); err == nil {
		t.Error("invalid config: no error")
	}
}
