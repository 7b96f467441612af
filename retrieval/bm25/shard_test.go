package bm25

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

func walkOf(chunks []data.Chunk) func(func(data.Chunk) error) error {
	return func(yield func(data.Chunk) error) error {
		for _, c := range chunks {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// A sharded index scores with the statistics of the whole corpus: its hits
// (ids and scores, bit for bit) equal those of one index over the same
// chunks, for shard sizes that split batches, fall on them, and leave a
// short last shard.
func TestShardedEqualsOneIndex(t *testing.T) {
	chunks := synthChunks(2500, 30)
	root := t.TempDir()
	one, err := Build(filepath.Join(root, "one"), chunks, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	queries := []string{"carcinoma HER2+", "lâmina parafina coloração", "termoab micrótomo", "pH ≥10 5mL formol", "núcleo núcleo citoplasma", "zzz"}
	for _, size := range []int{700, 1000, 2499, 2500} {
		dir := filepath.Join(root, "sharded", itoa(size))
		var last int
		sh, err := BuildStream(dir, walkOf(chunks), DefaultConfig(), size, func(d int) { last = d })
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(chunks) + size - 1) / size; sh.Shards() != want || sh.Count() != len(chunks) || last != len(chunks) {
			t.Fatalf("size %d: %d shards (want %d), %d chunks, progress ended at %d", size, sh.Shards(), want, sh.Count(), last)
		}
		if sh.AvgDocLen() != one.AvgDocLen() {
			t.Fatalf("size %d: avgdl %v, one index %v", size, sh.AvgDocLen(), one.AvgDocLen())
		}
		for _, q := range queries {
			for _, k := range []int{1, 10, 3000} {
				want, err := one.Search(q, k)
				if err != nil {
					t.Fatal(err)
				}
				got, err := sh.Search(q, k)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("size %d, %q, k=%d: sharded %v…, one index %v…", size, q, k, got[:min(3, len(got))], want[:min(3, len(want))])
				}
			}
		}
		// bleve's own scoring runs through the IndexAlias.
		if hits, err := sh.SearchBleve("carcinoma", 5); err != nil || len(hits) != 5 {
			t.Fatalf("size %d: SearchBleve: %v hits, %v", size, hits, err)
		}
		for _, i := range []int{0, size - 1, len(chunks) - 1} {
			i = min(i, len(chunks)-1)
			got, ok := sh.Doc(chunks[i].ID)
			if !ok || got.Text != chunks[i].Text || got.DocID != chunks[i].DocID {
				t.Fatalf("size %d: Doc(%s) = %+v, %v", size, chunks[i].ID, got, ok)
			}
		}
		if err := sh.Close(); err != nil {
			t.Fatal(err)
		}
		re, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := re.Search(queries[0], 10); !reflect.DeepEqual(got, mustSearch(t, one, queries[0], 10)) {
			t.Fatalf("size %d: reopened index searches differently", size)
		}
		re.Close()
	}
}

func mustSearch(t *testing.T, ix *Index, q string, k int) []retrieval.Hit {
	t.Helper()
	hits, err := ix.Search(q, k)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func TestBuildStreamErrors(t *testing.T) {
	chunks := synthChunks(30, 5)
	root := t.TempDir()
	dup := append(append([]data.Chunk(nil), chunks...), chunks[3])
	if _, err := BuildStream(filepath.Join(root, "dup"), walkOf(dup), DefaultConfig(), 10, nil); err == nil {
		t.Fatal("repeated id: want an error")
	}
	boom := errors.New("boom")
	failing := func(yield func(data.Chunk) error) error {
		for _, c := range chunks[:15] {
			if err := yield(c); err != nil {
				return err
			}
		}
		return boom
	}
	if _, err := BuildStream(filepath.Join(root, "fail"), failing, DefaultConfig(), 10, nil); !errors.Is(err, boom) {
		t.Fatalf("walk error: got %v", err)
	}
	if _, err := BuildStream(filepath.Join(root, "neg"), walkOf(chunks), DefaultConfig(), -1, nil); err == nil {
		t.Fatal("negative shard size: want an error")
	}
	cfg := DefaultConfig()
	cfg.MetaFields = []string{"title"}
	if _, err := BuildStream(filepath.Join(root, "meta"), walkOf(chunks), cfg, 10, nil); err == nil {
		t.Fatal("meta field no chunk has: want an error")
	}
	for _, d := range []string{"dup", "fail", "neg", "meta"} {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: failed build left its directory (%v)", d, err)
		}
	}
	empty, err := BuildStream(filepath.Join(root, "empty"), walkOf(nil), DefaultConfig(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if hits, err := empty.Search("carcinoma", 3); err != nil || len(hits) != 0 || empty.Shards() != 1 {
		t.Fatalf("empty sharded index: %v, %v, %d shards", hits, err, empty.Shards())
	}
}
