package faiss

import (
	"strconv"
	"testing"
)

// benchSearch measures searches (k = 10) of batches of nq queries over 10k
// random unit 64-d vectors; ns/op is per batch, and "ns/query" is reported.
func benchSearch(b *testing.B, factory string, ef, nq int) {
	const d, n, k, pool = 64, 10000, 10, 256
	ix := mustNew(b, d, factory, MetricInnerProduct)
	if err := ix.Add(randVecs(20, n, d, true)); err != nil {
		b.Fatal(err)
	}
	if ef > 0 {
		if err := ix.SetEfSearch(ef); err != nil {
			b.Fatal(err)
		}
	}
	q := randVecs(21, pool, d, true)
	i := 0
	for b.Loop() {
		j := i % (pool - nq + 1)
		if _, _, err := ix.Search(q[j*d:(j+nq)*d], k); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nq), "ns/query")
}

func BenchmarkFlatSearch(b *testing.B) {
	for _, nq := range []int{1, 64} {
		b.Run("nq"+strconv.Itoa(nq), func(b *testing.B) { benchSearch(b, "Flat", 0, nq) })
	}
}

func BenchmarkHNSWSearch(b *testing.B) {
	for _, ef := range []int{16, 128} {
		for _, nq := range []int{1, 64} {
			b.Run("ef"+strconv.Itoa(ef)+"/nq"+strconv.Itoa(nq), func(b *testing.B) { benchSearch(b, "HNSW32", ef, nq) })
		}
	}
}
