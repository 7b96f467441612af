package main

import (
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/retrieval/evalrun"
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

// retrievalLabel names a retrieval setting for summaries (evalrun.Label).
func retrievalLabel(mode string, denseWeight, bm25Weight float64) string {
	return evalrun.Label(mode, denseWeight, bm25Weight)
}
