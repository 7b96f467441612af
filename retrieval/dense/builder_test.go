package dense

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// randomCorpus writes n unit vectors of dimension dim as a RAG² corpus "c"
// of shards of shard rows, and returns its ids and vectors.
func randomCorpus(t *testing.T, n, dim, shard int) (string, []string, []float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	chunks := make([]data.Chunk, n)
	ids := make([]string, n)
	vecs := make([]float32, n*dim)
	for i := range chunks {
		ids[i] = fmt.Sprintf("d%d#0", i)
		chunks[i] = data.Chunk{ID: ids[i], DocID: fmt.Sprintf("d%d", i), Text: "t"}
		var norm float64
		for j := range dim {
			v := rng.NormFloat64()
			vecs[i*dim+j] = float32(v)
			norm += v * v
		}
		for j := range dim {
			vecs[i*dim+j] /= float32(math.Sqrt(norm))
		}
	}
	root := t.TempDir()
	if err := data.WriteRAG2(root, "c", chunks, vecs, dim, shard, data.EncodeInfo{}); err != nil {
		t.Fatal(err)
	}
	return root, ids, vecs
}

// BuildRAG2 reads the shards one at a time; trained on every row (the
// sample then is the corpus, in order) and added in small batches, it gives
// the index Build gives from the whole corpus in memory: the same hits.
func TestBuildRAG2EqualsBuild(t *testing.T) {
	const n, dim = 3000, 16
	root, ids, vecs := randomCorpus(t, n, dim, 700)
	queries := vecs[:50*dim]
	for _, factory := range []string{"Flat", "IVF16,PQ4np"} {
		want, err := Build(ids, vecs, dim, factory)
		if err != nil {
			t.Fatal(err)
		}
		got, err := BuildRAG2(root, "c", factory, StreamOptions{TrainRows: n, AddBatch: 333})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.IDs(), ids) {
			t.Fatalf("%s: ids out of corpus order", factory)
		}
		for _, ix := range []*Index{want, got} {
			if err := ix.SetSearch(SearchParams{Nprobe: 4}); err != nil && strings.HasPrefix(factory, "IVF") {
				t.Fatal(err)
			}
		}
		wh, err := want.Search(queries, 10)
		if err != nil {
			t.Fatal(err)
		}
		gh, err := got.Search(queries, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gh, wh) {
			t.Fatalf("%s: BuildRAG2 hits differ from Build's", factory)
		}
		want.Close()
		got.Close()
	}
}

// Trained on a sample, an IVF index still holds every row; an id repeated
// in a later batch is refused.
func TestBuildRAG2Sample(t *testing.T) {
	const n, dim = 3000, 16
	root, _, vecs := randomCorpus(t, n, dim, 1000)
	ix, err := BuildRAG2(root, "c", "IVF16,Flat", StreamOptions{TrainRows: 800, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Len() != n || ix.Faiss().Ntotal() != n {
		t.Fatalf("%d ids, %d vectors; want %d", ix.Len(), ix.Faiss().Ntotal(), n)
	}
	if err := ix.SetSearch(SearchParams{Nprobe: 16}); err != nil {
		t.Fatal(err)
	}
	// nprobe = nlist visits every list: exact search, each row finds itself.
	hits, err := ix.Search(vecs[5*dim:6*dim], 1)
	if err != nil || hits[0][0].ID != "d5#0" {
		t.Fatalf("row 5 finds %v (%v)", hits, err)
	}
	rows, err := sampleRows(mustShards(t, root), dim, 800, 3)
	if err != nil || len(rows) != 800*dim {
		t.Fatalf("sample: %d floats, %v", len(rows), err)
	}
	if _, err := BuildRAG2(root, "c", "Flat", StreamOptions{TrainRows: -1}); err == nil {
		t.Fatal("negative TrainRows: want an error")
	}
	b, err := NewBuilder(dim, "Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Add([]string{"a", "b"}, vecs[:2*dim]); err != nil {
		t.Fatal(err)
	}
	if err := b.Add([]string{"c", "a"}, vecs[:2*dim]); err == nil || !strings.Contains(err.Error(), `duplicate id "a" at rows 0 and 3`) {
		t.Fatalf("id repeated in a later batch: got %v", err)
	}
}

func mustShards(t *testing.T, root string) []data.RAG2Shard {
	t.Helper()
	s, _, err := data.RAG2Shards(root, "c")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
