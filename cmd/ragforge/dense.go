package main

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/retrieve"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// buildDense encodes the chunks with the --encoder model into a FAISS index,
// or, for a pre-encoded corpus (r.pre), indexes its stored vectors and
// encodes only the queries, configured as the corpus was encoded.
func buildDense(g *globals, r *retrieverFlags, chunks []data.Chunk) (retrieval.Retriever, func(), error) {
	enc, err := retrieve.LoadBERTEncoder(r.Encoder, g.Backend, r.Pooling)
	if err != nil {
		return nil, nil, err
	}
	if err := dense.CheckSearch(enc.Dim(), r.Factory, r.searchParams()); err != nil {
		return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	r.Enc.apply(enc)
	if r.pre != nil {
		if err := r.Enc.matchInfo(enc, r.Encoder, r.changed != nil && r.changed("pooling"), r.pre.Info); err != nil {
			return nil, nil, err
		}
		ret, idx, err := retrieve.DenseFromEncoded(enc, r.pre, r.Factory)
		if err != nil {
			return nil, nil, err
		}
		if err := idx.SetSearch(r.searchParams()); err != nil {
			idx.Close()
			return nil, nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
		}
		return ret, func() { idx.Close() }, nil
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
