package main

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

// buildDense encodes the chunks with the --encoder model into a FAISS index.
func buildDense(g *globals, r *retrieverFlags, chunks []data.Chunk) (retrieval.Retriever, func(), error) {
	return nil, nil, fmt.Errorf("dense retrieval: encoder support is not wired yet")
}
