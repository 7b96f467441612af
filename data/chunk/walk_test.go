package chunk

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/testutil"
)

// Walk streams the chunks Corpus returns for the opened corpus, in order,
// for every reader (BEIR directory, CSV, save_to_disk) and both chunk modes.
func TestWalkEqualsCorpus(t *testing.T) {
	paths := []string{
		filepath.Join("..", "testdata", "beir"),
		filepath.Join("..", "testdata", "corpus.csv"),
		testutil.SharedPath(t, "data/ap_protocols"),
	}
	for _, path := range paths {
		for _, cfg := range []Config{{}, DefaultConfig(), {Size: 120, Overlap: 30}} {
			t.Run(filepath.Base(path), func(t *testing.T) {
				c, err := data.Open(path, data.FieldOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want, err := Corpus(c, cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []data.Chunk
				st, err := Walk(path, data.FieldOptions{}, cfg, func(ch data.Chunk) error {
					got = append(got, ch)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("size %d: Walk gave %d chunks, Corpus %d (or they differ)", cfg.Size, len(got), len(want))
				}
				if st.Chunks != len(want) || st.Docs != len(c.Docs) {
					t.Fatalf("stats %+v, want %d chunks of %d documents", st, len(want), len(c.Docs))
				}
			})
		}
	}
}

func TestWalkStopsAndRefuses(t *testing.T) {
	path := filepath.Join("..", "testdata", "corpus.csv")
	n := 0
	st, err := Walk(path, data.FieldOptions{}, DefaultConfig(), func(data.Chunk) error {
		if n++; n == 2 {
			return data.ErrStop
		}
		return nil
	})
	if err != nil || st.Chunks != 1 {
		t.Fatalf("stop after 2: stats %+v, err %v; want 1 chunk passed, no error", st, err)
	}
	boom := errors.New("boom")
	if _, err := Walk(path, data.FieldOptions{}, DefaultConfig(), func(data.Chunk) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("callback error: got %v", err)
	}
	if _, err := Walk(path, data.FieldOptions{}, Config{Size: 10, Overlap: 10}, nil); err == nil {
		t.Fatal("overlap = size: want a config error")
	}
	if _, err := Walk("rag2:"+path, data.FieldOptions{}, DefaultConfig(), nil); err == nil {
		t.Fatal("rag2: spec: want an error")
	}
}
