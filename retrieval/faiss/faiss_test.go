package faiss

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// randVecs returns n random vectors of dimension d, row-major, uniform in
// [-1, 1), optionally L2-normalized.
func randVecs(seed uint64, n, d int, normalize bool) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
	}
	if normalize {
		if err := Normalize(x, d); err != nil {
			panic(err)
		}
	}
	return x
}

// bruteForce is the reference search: every stored vector scored in float64,
// sorted best first (ties by id).
func bruteForce(db, q []float32, d, k int, metric Metric) ([][]int64, [][]float64) {
	n, nq := len(db)/d, len(q)/d
	ids := make([][]int64, nq)
	scores := make([][]float64, nq)
	for i := range nq {
		type cand struct {
			id int64
			s  float64
		}
		c := make([]cand, n)
		for j := range n {
			var s float64
			for t := range d {
				a, b := float64(q[i*d+t]), float64(db[j*d+t])
				if metric == MetricL2 {
					s += (a - b) * (a - b)
				} else {
					s += a * b
				}
			}
			c[j] = cand{int64(j), s}
		}
		sort.Slice(c, func(a, b int) bool {
			if c[a].s != c[b].s {
				if metric == MetricL2 {
					return c[a].s < c[b].s
				}
				return c[a].s > c[b].s
			}
			return c[a].id < c[b].id
		})
		for j := range min(k, n) {
			ids[i] = append(ids[i], c[j].id)
			scores[i] = append(scores[i], c[j].s)
		}
	}
	return ids, scores
}

func mustNew(t testing.TB, d int, factory string, m Metric) *Index {
	t.Helper()
	ix, err := New(d, factory, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	return ix
}

func TestFlatEqualsBruteForce(t *testing.T) {
	const d, n, k = 16, 500, 10
	db := randVecs(1, n, d, false)
	tests := []struct {
		name   string
		metric Metric
		nq     int // faiss switches to BLAS sgemm from 20 queries on
	}{
		{"ip/few-queries", MetricInnerProduct, 5},
		{"ip/blas", MetricInnerProduct, 40},
		{"l2/few-queries", MetricL2, 5},
		{"l2/blas", MetricL2, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := mustNew(t, d, "Flat", tt.metric)
			if err := ix.Add(db); err != nil {
				t.Fatal(err)
			}
			if got := ix.Ntotal(); got != n {
				t.Fatalf("Ntotal = %d, want %d", got, n)
			}
			q := randVecs(2, tt.nq, d, false)
			scores, ids, err := ix.Search(q, k)
			if err != nil {
				t.Fatal(err)
			}
			wantIDs, wantScores := bruteForce(db, q, d, k, tt.metric)
			for i := range tt.nq {
				for j := range k {
					if ids[i*k+j] != wantIDs[i][j] {
						t.Fatalf("query %d rank %d: id %d, want %d", i, j, ids[i*k+j], wantIDs[i][j])
					}
					if diff := math.Abs(float64(scores[i*k+j]) - wantScores[i][j]); diff > 1e-5 {
						t.Fatalf("query %d rank %d: score %g, want %g (diff %g)", i, j, scores[i*k+j], wantScores[i][j], diff)
					}
				}
			}
		})
	}
}

func TestHandComputedInnerProduct(t *testing.T) {
	// db rows: e1, e2, (1,1)/√2; query (1, 0.5): scores 1, 0.5, 1.5/√2 ≈ 1.06066.
	ix := mustNew(t, 2, "Flat", MetricInnerProduct)
	s := float32(1 / math.Sqrt2)
	if err := ix.Add([]float32{1, 0, 0, 1, s, s}); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.SearchHits([]float32{1, 0.5}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Neighbor{{2, 1.5 / math.Sqrt2}, {0, 1}, {1, 0.5}}
	if len(hits) != 1 || len(hits[0]) != 3 {
		t.Fatalf("hits = %v, want 1 row of 3", hits)
	}
	for i, w := range want {
		if h := hits[0][i]; h.ID != w.ID || math.Abs(float64(h.Score-w.Score)) > 1e-6 {
			t.Errorf("rank %d = %+v, want %+v", i, h, w)
		}
	}
}

func TestKLargerThanNtotal(t *testing.T) {
	const d = 4
	for _, factory := range []string{"Flat", "HNSW32"} {
		t.Run(factory, func(t *testing.T) {
			ix := mustNew(t, d, factory, MetricInnerProduct)
			if err := ix.Add(randVecs(3, 5, d, true)); err != nil {
				t.Fatal(err)
			}
			q := randVecs(4, 2, d, true)
			// Raw Search keeps faiss's layout: [nq, k] padded with -1.
			_, ids, err := ix.Search(q, 8)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != 16 {
				t.Fatalf("len(ids) = %d, want 16", len(ids))
			}
			for i := range 2 {
				row := ids[i*8 : i*8+8]
				if got := slices.Index(row, -1); got != 5 {
					t.Errorf("query %d: raw row %v, want the first -1 at 5", i, row)
				}
			}
			hits, err := ix.SearchHits(q, 8)
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range hits {
				if len(row) != 5 {
					t.Errorf("query %d: %d hits, want 5", i, len(row))
				}
				seen := map[int64]bool{}
				for _, h := range row {
					if h.ID < 0 || h.ID >= 5 || seen[h.ID] {
						t.Errorf("query %d: bad or repeated id %d in %v", i, h.ID, row)
					}
					seen[h.ID] = true
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		ix := mustNew(t, d, "Flat", MetricInnerProduct)
		hits, err := ix.SearchHits(make([]float32, 2*d), 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 2 || len(hits[0]) != 0 || len(hits[1]) != 0 {
			t.Errorf("hits on empty index = %v, want 2 empty rows", hits)
		}
	})
}

func TestDimensionAndArgumentErrors(t *testing.T) {
	ix := mustNew(t, 4, "Flat", MetricInnerProduct)
	if err := ix.Add(make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"add 7 floats into dim 4", func() error { return ix.Add(make([]float32, 7)) }, "not a multiple of the index dimension 4"},
		{"search 5 floats", func() error { _, _, err := ix.Search(make([]float32, 5), 1); return err }, "not a multiple"},
		{"search hits 3 floats", func() error { _, err := ix.SearchHits(make([]float32, 3), 1); return err }, "not a multiple"},
		{"train 6 floats", func() error { return ix.Train(make([]float32, 6)) }, "not a multiple"},
		{"k = 0", func() error { _, _, err := ix.Search(make([]float32, 4), 0); return err }, "k = 0"},
		{"ids length", func() error { return ix.AddWithIDs(make([]float32, 8), []int64{1}) }, "2 vectors but 1 ids"},
		{"nprobe on Flat", func() error { return ix.SetNprobe(4) }, "not an IVF index"},
		{"efSearch on Flat", func() error { return ix.SetEfSearch(64) }, "not an HNSW index"},
		{"nprobe 0", func() error { return ix.SetNprobe(0) }, "0 < 1"},
		{"add_with_ids on Flat", func() error { return ix.AddWithIDs(make([]float32, 4), []int64{7}) }, "add 1 vectors with ids"},
		{"bad factory", func() error { _, err := New(4, "NoSuchIndex", MetricL2); return err }, `"NoSuchIndex"`},
		{"dim 0", func() error { _, err := New(0, "Flat", MetricL2); return err }, "dimension 0"},
		{"bad metric", func() error { _, err := New(4, "Flat", Metric(9)); return err }, "unknown metric 9"},
		{"normalize", func() error { return Normalize(make([]float32, 5), 2) }, "not a multiple of dimension 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if got := ix.Ntotal(); got != 2 {
		t.Errorf("Ntotal after failed calls = %d, want 2", got)
	}
}

func TestAddWithIDs(t *testing.T) {
	ix := mustNew(t, 2, "IDMap,Flat", MetricInnerProduct)
	if err := ix.AddWithIDs([]float32{1, 0, 0, 1}, []int64{100, 200}); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.SearchHits([]float32{0.1, 0.9}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{hits[0][0].ID, hits[0][1].ID}; !slices.Equal(got, []int64{200, 100}) {
		t.Errorf("ids = %v, want [200 100]", got)
	}
}

// recallAt returns the fraction of the exact top-k ids that got also holds.
func recallAt(got, exact []int64, nq, k int) float64 {
	hit := 0
	for i := range nq {
		want := map[int64]bool{}
		for _, id := range exact[i*k : (i+1)*k] {
			want[id] = true
		}
		for _, id := range got[i*k : (i+1)*k] {
			if want[id] {
				hit++
			}
		}
	}
	return float64(hit) / float64(nq*k)
}

func TestIVFTraining(t *testing.T) {
	const d, n, nq, k, nlist = 16, 2000, 50, 10, 16
	db := randVecs(5, n, d, true)
	q := randVecs(6, nq, d, true)
	exact := mustNew(t, d, "Flat", MetricInnerProduct)
	if err := exact.Add(db); err != nil {
		t.Fatal(err)
	}
	_, exactIDs, err := exact.Search(q, k)
	if err != nil {
		t.Fatal(err)
	}

	ix := mustNew(t, d, "IVF16,Flat", MetricInnerProduct)
	if ix.IsTrained() {
		t.Fatal("new IVF index reports trained")
	}
	if _, _, err := ix.Search(q, k); err == nil || !strings.Contains(err.Error(), "not trained") {
		t.Fatalf("search before Train: err = %v, want a not-trained error", err)
	}
	if _, err := ix.SearchHits(q, k); err == nil || !strings.Contains(err.Error(), "not trained") {
		t.Fatalf("SearchHits before Train: err = %v, want a not-trained error", err)
	}
	if err := ix.Add(db); err == nil || !strings.Contains(err.Error(), "not trained") {
		t.Fatalf("add before Train: err = %v, want a not-trained error", err)
	}
	if err := ix.Train(db); err != nil {
		t.Fatal(err)
	}
	if !ix.IsTrained() {
		t.Fatal("IsTrained false after Train")
	}
	if err := ix.Add(db); err != nil {
		t.Fatal(err)
	}
	// Recall@k is non-decreasing in nprobe: the lists visited at nprobe p are
	// a subset of those visited at p+1, and a true neighbor found stays in the
	// top k. At nprobe = nlist the search is exhaustive.
	prev := -1.0
	if got := ix.Nprobe(); got != 1 {
		t.Errorf("default Nprobe = %d, want faiss's 1", got)
	}
	for _, p := range []int{1, 2, 4, 8, nlist} {
		if err := ix.SetNprobe(p); err != nil {
			t.Fatal(err)
		}
		if got := ix.Nprobe(); got != p {
			t.Errorf("Nprobe = %d after SetNprobe(%d)", got, p)
		}
		_, ids, err := ix.Search(q, k)
		if err != nil {
			t.Fatal(err)
		}
		r := recallAt(ids, exactIDs, nq, k)
		t.Logf("IVF16,Flat nprobe %2d: recall@%d = %.3f", p, k, r)
		if r < prev {
			t.Errorf("nprobe %d: recall %.3f < %.3f at the previous nprobe", p, r, prev)
		}
		prev = r
		if p == 1 && r >= 1 {
			t.Errorf("nprobe 1 already exact (recall %.3f); test data too easy", r)
		}
		if p == nlist && !slices.Equal(ids, exactIDs) {
			t.Errorf("nprobe = nlist: ids differ from exact search")
		}
	}
}

func TestIVFPQ(t *testing.T) {
	const d, n = 16, 2000
	db := randVecs(7, n, d, false)
	ix := mustNew(t, d, "IVF16,PQ8x4np", MetricL2)
	if err := ix.Train(db); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(db); err != nil {
		t.Fatal(err)
	}
	if err := ix.SetNprobe(16); err != nil {
		t.Fatal(err)
	}
	// Each stored vector, queried against the index, should mostly come back
	// as its own nearest neighbor despite PQ compression.
	q := db[:100*d]
	hits, err := ix.SearchHits(q, 1)
	if err != nil {
		t.Fatal(err)
	}
	self := 0
	for i, row := range hits {
		if len(row) == 1 && row[0].ID == int64(i) {
			self++
		}
	}
	t.Logf("IVF16,PQ8x4np: %d/100 stored vectors are their own nearest neighbor", self)
	if self < 50 {
		t.Errorf("only %d/100 stored vectors found themselves", self)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	const d, n, nq, k = 8, 1000, 20, 5
	db := randVecs(8, n, d, true)
	q := randVecs(9, nq, d, true)
	for _, tt := range []struct {
		factory string
		metric  Metric
	}{
		{"Flat", MetricInnerProduct},
		{"Flat", MetricL2},
		{"IVF8,Flat", MetricInnerProduct},
		{"HNSW16", MetricInnerProduct},
	} {
		t.Run(tt.factory+"/"+tt.metric.String(), func(t *testing.T) {
			ix := mustNew(t, d, tt.factory, tt.metric)
			if err := ix.Train(db); err != nil {
				t.Fatal(err)
			}
			if err := ix.Add(db); err != nil {
				t.Fatal(err)
			}
			s1, i1, err := ix.Search(q, k)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "index.faiss")
			if err := ix.Write(path); err != nil {
				t.Fatal(err)
			}
			back, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if back.Dim() != d || back.Ntotal() != n || back.Metric() != tt.metric || !back.IsTrained() {
				t.Fatalf("read back dim %d ntotal %d metric %v trained %v; want %d %d %v true",
					back.Dim(), back.Ntotal(), back.Metric(), back.IsTrained(), d, n, tt.metric)
			}
			s2, i2, err := back.Search(q, k)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(i1, i2) || !slices.Equal(s1, s2) {
				t.Errorf("results differ after write/read:\n ids %v\n vs  %v", i1, i2)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.faiss")
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("err = %v, want an error naming %s", err, path)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.faiss")
		if err := os.WriteFile(path, []byte("not a faiss index"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(path); err == nil {
			t.Error("reading garbage succeeded")
		}
	})
}

func TestHNSWRecall(t *testing.T) {
	const d, n, nq, k = 64, 10000, 200, 10
	db := randVecs(10, n, d, true)
	q := randVecs(11, nq, d, true)
	exact := mustNew(t, d, "Flat", MetricInnerProduct)
	if err := exact.Add(db); err != nil {
		t.Fatal(err)
	}
	_, exactIDs, err := exact.Search(q, k)
	if err != nil {
		t.Fatal(err)
	}
	ix := mustNew(t, d, "HNSW32", MetricInnerProduct)
	if err := ix.Add(db); err != nil {
		t.Fatal(err)
	}
	recall := map[int]float64{}
	if got, np := ix.EfSearch(), ix.Nprobe(); got != 16 || np != 0 {
		t.Errorf("default EfSearch = %d (want faiss's 16), Nprobe = %d (want 0: not IVF)", got, np)
	}
	for _, ef := range []int{16, 128} {
		if err := ix.SetEfSearch(ef); err != nil {
			t.Fatal(err)
		}
		if got := ix.EfSearch(); got != ef {
			t.Errorf("EfSearch = %d after SetEfSearch(%d)", got, ef)
		}
		_, ids, err := ix.Search(q, k)
		if err != nil {
			t.Fatal(err)
		}
		recall[ef] = recallAt(ids, exactIDs, nq, k)
		t.Logf("HNSW32, 10k random unit 64-d vectors: efSearch %3d recall@%d = %.3f", ef, k, recall[ef])
	}
	if recall[128] < 0.95 {
		t.Errorf("efSearch 128: recall@10 = %.3f, want >= 0.95", recall[128])
	}
	if recall[128] < recall[16] {
		t.Errorf("recall fell from %.3f (ef 16) to %.3f (ef 128)", recall[16], recall[128])
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   []float32
		dim  int
		want []float32
	}{
		{"3-4-5", []float32{3, 4}, 2, []float32{0.6, 0.8}},
		{"zero row kept", []float32{0, 0, 0, -2}, 2, []float32{0, 0, 0, -1}},
		{"three dims", []float32{1, 2, 2}, 3, []float32{1.0 / 3, 2.0 / 3, 2.0 / 3}},
		{"empty", nil, 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := slices.Clone(tt.in)
			if err := Normalize(x, tt.dim); err != nil {
				t.Fatal(err)
			}
			for i := range tt.want {
				if math.Abs(float64(x[i]-tt.want[i])) > 1e-7 {
					t.Fatalf("got %v, want %v", x, tt.want)
				}
			}
		})
	}
}

func TestClose(t *testing.T) {
	ix, err := New(2, "Flat", MetricInnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix.Close() // idempotent
	if err := ix.Add([]float32{1, 2}); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: err = %v, want ErrClosed", err)
	}
	if _, _, err := ix.Search([]float32{1, 2}, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Search after Close: err = %v, want ErrClosed", err)
	}
	if ix.Ntotal() != 0 || ix.IsTrained() {
		t.Error("accessors after Close should report an empty, untrained index")
	}
}

// A flat search large enough to run on every OpenMP thread (queries ×
// vectors × dim ≥ 2^26, rf_search's threshold) returns the same ids and
// scores, bit for bit, with OMP_NUM_THREADS=1 and =2: what lets rf_search
// run small searches on the calling thread only without changing any
// result. The test runs itself in two subprocesses (the thread count is read
// when the library loads). HNSW: TestHNSWSearchSameAloneOrBatched.
func TestSearchSameOnAnyThreadCount(t *testing.T) {
	const d, n, nq, k = 64, 4096, 300, 10 // 300·4096·64 ≈ 2^26.2
	if out := os.Getenv("RAGFORGE_FAISS_TEST_DUMP"); out != "" {
		db, q := randVecs(11, n, d, true), randVecs(12, nq, d, true)
		var buf bytes.Buffer
		for _, factory := range []string{"Flat", "IVF4,Flat"} {
			ix := mustNew(t, d, factory, MetricInnerProduct)
			if err := ix.Train(db); err != nil {
				t.Fatal(err)
			}
			if err := ix.Add(db); err != nil {
				t.Fatal(err)
			}
			scores, ids, err := ix.Search(q, k)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ids {
				fmt.Fprintf(&buf, "%s %d %d %08x\n", factory, i, ids[i], math.Float32bits(scores[i]))
			}
		}
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := t.TempDir()
	var got [2][]byte
	for i, threads := range []string{"1", "2"} {
		path := filepath.Join(dir, "threads-"+threads)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSearchSameOnAnyThreadCount$")
		// OpenBLAS (faiss's sgemm) would follow OMP_NUM_THREADS too; ragforge
		// runs it on one thread (models/backend/hook), so only OpenMP varies.
		cmd.Env = append(os.Environ(), "RAGFORGE_FAISS_TEST_DUMP="+path, "OMP_NUM_THREADS="+threads, "OPENBLAS_NUM_THREADS=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("OMP_NUM_THREADS=%s: %v\n%s", threads, err, out)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = b
	}
	if len(got[0]) == 0 || !bytes.Equal(got[0], got[1]) {
		a, b := strings.Split(string(got[0]), "\n"), strings.Split(string(got[1]), "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("search results differ by thread count: 1 thread %q, 2 threads %q", a[i], b[i])
			}
		}
		t.Fatalf("search results differ by thread count (%d vs %d bytes)", len(got[0]), len(got[1]))
	}
}

// HNSW searches each query on its own, so a batch above rf_search's
// threading threshold (all threads) and the same queries one at a time
// (calling thread only) give the same results. (Its parallel add, not
// search, depends on the thread count, so one index serves both.)
func TestHNSWSearchSameAloneOrBatched(t *testing.T) {
	const d, n, nq, k = 64, 4096, 300, 10
	ix := mustNew(t, d, "HNSW16", MetricInnerProduct)
	if err := ix.Add(randVecs(11, n, d, true)); err != nil {
		t.Fatal(err)
	}
	q := randVecs(12, nq, d, true)
	scores, ids, err := ix.Search(q, k)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nq {
		s1, id1, err := ix.Search(q[i*d:(i+1)*d], k)
		if err != nil {
			t.Fatal(err)
		}
		for j := range k {
			if id1[j] != ids[i*k+j] || s1[j] != scores[i*k+j] {
				t.Fatalf("query %d rank %d: alone (%d, %g), in the batch (%d, %g)", i, j, id1[j], s1[j], ids[i*k+j], scores[i*k+j])
			}
		}
	}
}
