package dense

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval"
)

// Three unit chunk vectors and hand-computed inner products with the query
// q = (0.6, 0.8): c#0 (1, 0) → 0.6, c#1 (0, 1) → 0.8, c#2 (0.8, 0.6) → 0.96.
var (
	handIDs  = []string{"d1#0", "d1#1", "d2#0"}
	handVecs = []float32{1, 0, 0, 1, 0.8, 0.6}
	handQ    = []float32{0.6, 0.8}
	handWant = []retrieval.Hit{{ID: "d2#0", Score: 0.96}, {ID: "d1#1", Score: 0.8}, {ID: "d1#0", Score: 0.6}}
)

func checkHits(t *testing.T, got, want []retrieval.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("hits = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-6 {
			t.Fatalf("hits = %v, want %v", got, want)
		}
	}
}

func TestIndexSearchHandComputed(t *testing.T) {
	for _, factory := range []string{"Flat", "HNSW8"} {
		t.Run(factory, func(t *testing.T) {
			ix, err := Build(handIDs, handVecs, 2, factory)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			if ix.Len() != 3 || ix.Dim() != 2 {
				t.Fatalf("Len %d Dim %d, want 3 2", ix.Len(), ix.Dim())
			}
			for _, k := range []int{2, 3, 10} { // 10 > Len: only 3 hits, no -1
				hits, err := ix.Search(handQ, k)
				if err != nil {
					t.Fatal(err)
				}
				checkHits(t, hits[0], handWant[:min(k, 3)])
			}
		})
	}
}

func TestIndexSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	ix, err := Build(handIDs, handVecs, 2, "Flat")
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Save(dir); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	hits, err := back.Search(append(handQ, 1, 0), 3)
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, hits[0], handWant)
	checkHits(t, hits[1], []retrieval.Hit{{ID: "d1#0", Score: 1}, {ID: "d2#0", Score: 0.8}, {ID: "d1#1", Score: 0}})

	// ids.json that disagrees with the index is an error naming both files.
	if err := os.WriteFile(filepath.Join(dir, IDsFile), []byte(`["a", "b"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "index holds 3 vectors but") {
		t.Errorf("Load with 2 ids for 3 vectors: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, IDsFile), []byte(`["a", "a", "b"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `duplicate id "a"`) {
		t.Errorf("Load with duplicate ids: err = %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), IDsFile) {
		t.Errorf("Load of an empty dir: err = %v", err)
	}
}

func TestIndexIVFBuildTrains(t *testing.T) {
	// 400 vectors on the unit circle; IVF4 is trained by Build, and with
	// nprobe 4 (all lists) the search is exact.
	const n = 400
	ids := make([]string, n)
	vecs := make([]float32, 0, 2*n)
	for i := range n {
		a := 2 * math.Pi * float64(i) / n
		ids[i] = fmt.Sprintf("c#%d", i)
		vecs = append(vecs, float32(math.Cos(a)), float32(math.Sin(a)))
	}
	ix, err := Build(ids, vecs, 2, "IVF4,Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Faiss().SetNprobe(4); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(vecs[2*37:2*38], 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits[0]) != 1 || hits[0][0].ID != ids[37] || math.Abs(hits[0][0].Score-1) > 1e-6 {
		t.Errorf("nearest to row 37 = %v, want %s with score 1", hits[0], ids[37])
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		ids     []string
		vecs    []float32
		dim     int
		factory string
		want    string
	}{
		{"length", []string{"a", "b"}, []float32{1, 2, 3}, 2, "Flat", "needs 4 floats, got 3"},
		{"dim 0", []string{"a"}, nil, 0, "Flat", "dimension 0"},
		{"duplicate", []string{"a", "a"}, []float32{1, 2}, 1, "Flat", `duplicate id "a" at rows 0 and 1`},
		{"empty id", []string{""}, []float32{1}, 1, "Flat", "id 0 is empty"},
		{"factory", []string{"a"}, []float32{1}, 1, "Bogus", `"Bogus"`},
		{"too few to train", []string{"a", "b"}, []float32{1, 2}, 1, "IVF4,Flat", "train"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix, err := Build(tt.ids, tt.vecs, tt.dim, tt.factory)
			if err == nil {
				ix.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	ix, err := Build(handIDs, handVecs, 2, "Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Search([]float32{1, 2, 3}, 1); err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("Search with 3 floats in dim 2: err = %v", err)
	}
}

func TestCheckSearchAndSetSearch(t *testing.T) {
	for _, c := range []struct {
		factory string
		p       SearchParams
		ok      bool
	}{
		{"Flat", SearchParams{}, true},
		{"Flat", SearchParams{Nprobe: 4}, false},
		{"IVF4,Flat", SearchParams{Nprobe: 4}, true},
		{"IVF4,Flat", SearchParams{EfSearch: 64}, false},
		{"HNSW32", SearchParams{EfSearch: 64}, true},
		{"HNSW32", SearchParams{Nprobe: 2}, false},
		{"HNSW32", SearchParams{EfSearch: -1}, false},
	} {
		if err := CheckSearch(4, c.factory, c.p); (err == nil) != c.ok {
			t.Errorf("CheckSearch(%s, %+v) = %v, want ok %v", c.factory, c.p, err, c.ok)
		}
	}
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	vecs := make([]float32, 4*len(ids))
	for i := range vecs {
		vecs[i] = float32(i%7) - 3
	}
	ix, err := Build(ids, vecs, 4, "IVF4,Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.SetSearch(SearchParams{Nprobe: 4}); err != nil || ix.Faiss().Nprobe() != 4 {
		t.Fatalf("SetSearch nprobe 4: %v, nprobe %d", err, ix.Faiss().Nprobe())
	}
	// All 4 lists visited: every query gets every vector.
	hits, err := ix.Search(vecs[:4], len(ids))
	if err != nil || len(hits[0]) != len(ids) {
		t.Errorf("nprobe 4 of 4: %d hits (%v), want %d", len(hits[0]), err, len(ids))
	}
}
