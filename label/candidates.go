package label

import (
	"fmt"
	"io"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// LoadCandidates reads what candidate labeling (evidence, perplexity)
// ranks: the questions of qa (an AP QA CSV or a BEIR dir, split "test"; the
// first limit, 0: all) with their qrels, and an in-memory BM25 index (bm)
// over the chunks of corpus, loaded with progress on log. The caller closes
// the index.
func LoadCandidates(qa string, limit int, corpus *evalrun.Corpus, bm evalrun.BM25, log io.Writer) ([]data.Query, data.Qrels, *bm25.Index, error) {
	if qa == "" {
		return nil, nil, nil, fmt.Errorf("--qa is required")
	}
	cfg, err := bm.Config()
	if err != nil {
		return nil, nil, nil, err
	}
	queries, qrels, err := data.OpenQueries(qa, "test")
	if err != nil {
		return nil, nil, nil, err
	}
	if limit > 0 && limit < len(queries) {
		queries = queries[:limit]
	}
	ld, err := corpus.Load(log)
	if err != nil {
		return nil, nil, nil, err
	}
	idx, err := bm25.NewMemory(ld.Chunks, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return queries, qrels, idx, nil
}
