package main

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/retrieve"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// buildDense encodes the chunks with the --encoder model into a FAISS index.
func buildDense(g *globals, r *retrieverFlags, chunks []data.Chunk) (retrieval.Retriever, func(), error) {
	enc, err := retrieve.LoadBERTEncoder(r.Encoder, g.Backend, r.Pooling)
	if err != nil {
		return nil, nil, err
	}
	if err := dense.CheckSearch(enc.Dim(), r.Factory, r.searchParams()); err != nil {
		return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	bar := progress.New(g.Err, len(chunks), "encode")
	ret, idx, err := retrieve.BuildDense(enc, chunks, r.Factory, bar.Func())
	bar.Finish()
	if err != nil {
		return nil, nil, err
	}
	if err := idx.SetSearch(r.searchParams()); err != nil {
		idx.Close()
		return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	return ret, func() { idx.Close() }, nil
}
