package bm25

import (
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval"
)

// BenchmarkSearch measures Search (this package's BM25 pass over bleve
// postings) on a synthetic 20,000-chunk corpus of 60 words per chunk, with
// 6-term queries, k = 10. Compare BenchmarkSearchBleve.
func BenchmarkSearch(b *testing.B) { benchSearch(b, (*Index).Search) }

// BenchmarkSearchBleve measures bleve's native BM25 search on the same corpus.
func BenchmarkSearchBleve(b *testing.B) { benchSearch(b, (*Index).SearchBleve) }

func benchSearch(b *testing.B, search func(*Index, string, int) ([]retrieval.Hit, error)) {
	chunks := synthChunks(20000, 60)
	ix, err := NewMemory(chunks, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = strings.Join(strings.Fields(chunks[i*7].Text)[:6], " ")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		hits, err := search(ix, queries[i%len(queries)], 10)
		if err != nil || len(hits) == 0 {
			b.Fatalf("query %q: %v hits, %v", queries[i%len(queries)], len(hits), err)
		}
	}
}
