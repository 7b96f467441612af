package main

import (
	"fmt"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/retrieval/search"
)

// readEvaluatedRetrieval reads run id (an exact id or unique prefix) from
// the run store: it must be a finished `eval retrieval` run.
func readEvaluatedRetrieval(g *globals, id string) (*pipeline.Evaluated, error) {
	st, err := openStoreRead(g)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return pipeline.ReadEvaluated(st, id)
}

// retrievalLabel names a retrieval setting for summaries: a hybrid whose
// dense weight is 0 ranks by BM25 alone and says so.
func retrievalLabel(mode string, denseWeight, bm25Weight float64) string {
	if mode == string(search.Hybrid) {
		if denseWeight == 0 {
			return "BM25 (dense weight 0)"
		}
		return fmt.Sprintf("hybrid (dense %.2g, bm25 %.2g)", denseWeight, bm25Weight)
	}
	return mode
}
