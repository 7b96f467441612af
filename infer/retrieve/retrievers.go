package retrieve

import (
	"context"
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/fusion"
)

// Modes are the retriever modes ragforge evaluates and serves.
const (
	ModeBM25   = "bm25"
	ModeDense  = "dense"
	ModeHybrid = "hybrid"
)

// Hybrid fuses a dense and a BM25 retriever with weighted RRF (AP paper:
// dense 0.3, BM25 0.7, c = 60). Each side is asked for Depth hits (default
// max(k, 100)) before fusion; the result holds exactly min(k, |union|) hits,
// or the union of both top-k lists when Union is set (the paper's ensemble
// behaviour, which can return up to 2k).
type Hybrid struct {
	Dense, BM25             retrieval.Retriever
	DenseWeight, BM25Weight float64
	Union                   bool
	Depth                   int
}

// Search implements retrieval.Retriever.
func (h *Hybrid) Search(q string, k int) ([]retrieval.Hit, error) {
	depth := h.Depth
	if depth < k {
		depth = max(k, 100)
	}
	if h.Union {
		depth = k // the paper fused each retriever's top-k
	}
	d, err := h.Dense.Search(q, depth)
	if err != nil {
		return nil, fmt.Errorf("hybrid: dense: %w", err)
	}
	b, err := h.BM25.Search(q, depth)
	if err != nil {
		return nil, fmt.Errorf("hybrid: bm25: %w", err)
	}
	return fusion.RRF([][]retrieval.Hit{d, b}, []float64{h.DenseWeight, h.BM25Weight}, k, fusion.Options{C: fusion.DefaultC, Union: h.Union})
}

// RunQueries searches every query (top k) and returns the run, keyed by
// query id. progress receives (queries done, total).
func RunQueries(ctx context.Context, r retrieval.Retriever, queries []data.Query, k int, progress func(done, total int)) (eval.Run, error) {
	run := make(eval.Run, len(queries))
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hits, err := r.Search(q.Text, k)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q.ID, err)
		}
		run[q.ID] = hits
		if progress != nil {
			progress(i+1, len(queries))
		}
	}
	return run, nil
}

// DocRun maps a chunk-level run to document ids (a document's score is its
// best chunk's), for document-level qrels such as BEIR's when the corpus was
// chunked.
func DocRun(run eval.Run, chunks []data.Chunk) eval.Run {
	docOf := make(map[string]string, len(chunks))
	for _, c := range chunks {
		docOf[c.ID] = c.DocID
	}
	out := make(eval.Run, len(run))
	for qid, hits := range run {
		seen := map[string]bool{}
		var docs []retrieval.Hit
		for _, h := range hits { // hits are best first
			d, ok := docOf[h.ID]
			if !ok {
				d = h.ID
			}
			if !seen[d] {
				seen[d] = true
				docs = append(docs, retrieval.Hit{ID: d, Score: h.Score})
			}
		}
		out[qid] = docs
	}
	return out
}
