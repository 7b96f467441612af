package retrieve

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// LoadBERTEncoder loads a BERT bi-encoder (HF layout with vocab.txt or
// tokenizer.json) on the named backend ("" = default). pooling is "cls" (BGE,
// MedEmbed), "mean" (sentence-transformers mean pooling) or "" (what dir
// declares, encode.DirPooling); vectors are L2-normalized so FAISS inner product is cosine similarity.
func LoadBERTEncoder(dir, backendName, pooling string) (*encode.BERTEncoder, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := bert.Load(be, dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.LoadFor(dir, m.Config.VocabSize)
	if err != nil {
		return nil, err
	}
	enc := encode.NewBERTEncoder(m, tok, dir)
	if pooling == "" {
		if enc.Pooling, err = encode.DirPooling(dir); err != nil {
			return nil, err
		}
		return enc, nil
	}
	p := bert.Pooling(pooling)
	if !p.Valid() {
		return nil, fmt.Errorf("pooling %q: want cls or mean", pooling)
	}
	enc.Pooling = p
	return enc, nil
}

// BuildDense encodes every chunk with enc and indexes the vectors with the
// FAISS index_factory string factory ("Flat", "HNSW32", "IVF256,Flat"; IVF
// indexes are trained on the chunk vectors). progress receives (chunks
// encoded, total).
func BuildDense(enc encode.Encoder, chunks []data.Chunk, factory string, progress func(done, total int)) (*encode.Retriever, *dense.Index, error) {
	vecs, dim, err := encode.EncodeCorpus(enc, chunks, progress)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	idx, err := dense.Build(ids, vecs, dim, factory)
	if err != nil {
		return nil, nil, err
	}
	return &encode.Retriever{Encoder: enc, Index: idx}, idx, nil
}
