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
	// Every path reports its documents done, even when it splits nothing
	// (a "chunk: done 0" line read as if the corpus were empty).
	for _, tc := range []struct {
		name string
		c    *data.Corpus
		cfg  Config
		want [2]int
	}{
		{"whole documents", &data.Corpus{Path: "x", Docs: docs}, Config{}, [2]int{2, 2}},
		{"split", &data.Corpus{Path: "x", Docs: docs}, DefaultConfig(), [2]int{2, 2}},
		{"encoded", &data.Corpus{Encoded: enc}, DefaultConfig(), [2]int{1, 1}},
	} {
		var last [2]int
		if _, err := Corpus(tc.c, tc.cfg, func(done, total int) { last = [2]int{done, total} }); err != nil {
			t.Fatal(err)
		}
		if last != tc.want {
			t.Errorf("%s: last progress %v, want %v", tc.name, last, tc.want)
		}
	}
}
