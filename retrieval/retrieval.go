// Package retrieval holds the types shared by ragforge's retrievers (BM25,
// FAISS dense, fusion) and their evaluation.
package retrieval

// Hit is one retrieved item: a chunk or document id and its score.
// Higher scores rank first; scores of different retrievers are not comparable.
type Hit struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// Retriever returns the top-k hits for a query text, best first.
// It returns at most k hits (fewer when the index holds fewer) and never
// invalid ids.
type Retriever interface {
	Search(query string, k int) ([]Hit, error)
}
