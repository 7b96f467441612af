package search

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// IndexChunks encodes every chunk with enc (encode.EncodeCorpus) and
// indexes the vectors, row i for chunks[i], with the FAISS index_factory
// string factory ("Flat", "HNSW32", "IVF256,Flat"; IVF indexes are trained
// on the chunk vectors). progress receives (chunks encoded, total).
func IndexChunks(enc encode.Encoder, chunks []data.Chunk, factory string, progress func(done, total int)) (*dense.Index, error) {
	vecs, dim, err := encode.EncodeCorpus(enc, chunks, progress)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	return dense.Build(ids, vecs, dim, factory)
}

// IndexEncoded indexes a pre-encoded corpus's stored vectors (row i is
// chunk i of pre.Chunks()) with the FAISS index_factory string factory, for
// queries encoded by enc. Errors: enc's dimension differs from the
// corpus's, faiss errors; they name the corpus.
func IndexEncoded(enc encode.Encoder, pre *data.Encoded, factory string) (*dense.Index, error) {
	if enc.Dim() != pre.Dim {
		return nil, fmt.Errorf("encoded corpus %s#%s: vectors have dim %d, encoder %s has %d", pre.Root, pre.Name, pre.Dim, enc.Name(), enc.Dim())
	}
	ids := make([]string, len(pre.Docs))
	for i, d := range pre.Docs {
		ids[i] = d.ID
	}
	idx, err := dense.Build(ids, pre.Vectors, pre.Dim, factory)
	if err != nil {
		return nil, fmt.Errorf("encoded corpus %s#%s: %w", pre.Root, pre.Name, err)
	}
	return idx, nil
}
