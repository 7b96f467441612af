package main

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/search"
)

// buildDense loads the --encoder model and indexes the chunks it encodes
// in a FAISS index, or, for a pre-encoded corpus (r.pre), indexes its
// stored vectors and encodes only the queries, configured as the corpus
// was encoded. The caller closes the index.
func buildDense(g *globals, r *retrieverFlags, chunks []data.Chunk) (*encode.BERTEncoder, *dense.Index, error) {
	if err := r.Enc.resolve(r.Encoder); err != nil {
		return nil, nil, err
	}
	enc, err := encode.LoadBERT(r.Encoder, g.Backend, r.Enc.Pooling)
	if err != nil {
		return nil, nil, err
	}
	if err := dense.CheckSearch(enc.Dim(), r.Factory, r.searchParams()); err != nil {
		return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	r.Enc.apply(enc, g.Err)
	var idx *dense.Index
	if r.pre != nil {
		if err := r.Enc.matchInfo(enc, r.Encoder, r.pre.Info); err != nil {
			return nil, nil, err
		}
		if idx, err = search.IndexEncoded(enc, r.pre, r.Factory); err != nil {
			return nil, nil, err
		}
	} else {
		bar := progress.New(g.Err, len(chunks), "encode")
		idx, err = search.IndexChunks(enc, chunks, r.Factory, bar.Func())
		bar.Finish()
		if err != nil {
			return nil, nil, err
		}
	}
	if err := idx.SetSearch(r.searchParams()); err != nil {
		idx.Close()
		return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	return enc, idx, nil
}
