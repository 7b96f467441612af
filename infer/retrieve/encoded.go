package retrieve

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// DenseFromEncoded indexes a pre-encoded corpus's vectors with the FAISS
// index_factory string factory and returns a retriever that encodes
// queries with enc. Row i is chunk i of pre.Chunks(). Errors: enc's
// dimension differs from the corpus's, faiss errors.
func DenseFromEncoded(enc encode.Encoder, pre *data.Encoded, factory string) (*encode.Retriever, *dense.Index, error) {
	if enc.Dim() != pre.Dim {
		return nil, nil, fmt.Errorf("encoded corpus %s#%s: vectors have dim %d, encoder %s has %d", pre.Root, pre.Name, pre.Dim, enc.Name(), enc.Dim())
	}
	ids := make([]string, len(pre.Docs))
	for i, d := range pre.Docs {
		ids[i] = d.ID
	}
	idx, err := dense.Build(ids, pre.Vectors, pre.Dim, factory)
	if err != nil {
		return nil, nil, fmt.Errorf("encoded corpus %s#%s: %w", pre.Root, pre.Name, err)
	}
	return &encode.Retriever{Encoder: enc, Index: idx}, idx, nil
}
