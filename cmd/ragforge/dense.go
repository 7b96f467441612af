package main

import (
	"fmt"

	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// loadDenseEncoder loads --encoder with the encoder flags applied and, for
// a pre-encoded corpus, checks that it encodes queries as the corpus was
// encoded. Errors: flags that make no sense, load failures, a mismatch.
func loadDenseEncoder(g *globals, r *retrieverFlags) (*encode.BERTEncoder, error) {
	if err := r.Enc.resolve(r.Encoder); err != nil {
		return nil, err
	}
	enc, err := encode.LoadBERT(r.Encoder, g.Backend, r.Enc.Pooling)
	if err != nil {
		return nil, err
	}
	if err := dense.CheckSearch(enc.Dim(), r.Factory, r.searchParams()); err != nil {
		return nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	r.Enc.apply(enc, g.Err)
	if r.pre != nil {
		if err := r.Enc.matchInfo(enc, r.Encoder, r.pre.Info); err != nil {
			return nil, err
		}
	}
	return enc, nil
}
