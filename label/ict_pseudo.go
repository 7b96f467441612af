package label

import (
	"context"

	"github.com/ragforge/ragforge/data"
)

// ICTPseudoQueries draws one ICT pseudo-query per chunk (ICTQueries with
// PerChunk 1), a keep fraction of the sentences left in the index text:
// the pseudo-query source of `eval retrieval --pseudo-queries ict`
// (retrieval/evalrun.Config.PseudoQueries). It returns the queries, their
// chunk-level judgments and the chunks to index in place of the corpus's.
func ICTPseudoQueries(ctx context.Context, chunks []data.Chunk, keep float64, seed uint64) ([]data.Query, data.Qrels, []data.Chunk, error) {
	ict, err := ICTQueries(ctx, chunks, ICTOptions{PerChunk: 1, Keep: keep, Seed: seed})
	if err != nil {
		return nil, nil, nil, err
	}
	return ict.Queries, ict.Qrels, ict.Chunks, nil
}
