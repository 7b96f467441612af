package encode

import (
	"errors"
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

// CorpusBlock is the number of chunks EncodeCorpus hands to EncodeDocs per
// call (and so the progress granularity).
const CorpusBlock = 256

// EncodeCorpus embeds the Text of every chunk with enc.EncodeDocs and
// returns the vectors row-major, [len(chunks), dim], row i for chunks[i]
// (the layout faiss.Index.Add takes). progress, when non-nil, receives the
// number of chunks done after every block of CorpusBlock chunks. Errors name
// the failing block's first chunk id, and a vector whose length is not
// enc.Dim().
func EncodeCorpus(enc Encoder, chunks []data.Chunk, progress Progress) (vecs []float32, dim int, err error) {
	dim = enc.Dim()
	vecs = make([]float32, 0, len(chunks)*dim)
	texts := make([]string, 0, CorpusBlock)
	for start := 0; start < len(chunks); start += CorpusBlock {
		block := chunks[start:min(start+CorpusBlock, len(chunks))]
		texts = texts[:0]
		for _, c := range block {
			texts = append(texts, c.Text)
		}
		out, err := enc.EncodeDocs(texts)
		if err != nil {
			return nil, 0, fmt.Errorf("encode corpus with %s: chunks %d.. (id %q): %w", enc.Name(), start, block[0].ID, err)
		}
		for i, v := range out {
			if len(v) != dim {
				return nil, 0, fmt.Errorf("encode corpus with %s: chunk %q: vector length %d, want %d", enc.Name(), block[i].ID, len(v), dim)
			}
			vecs = append(vecs, v...)
		}
		if progress != nil {
			progress(start+len(block), len(chunks))
		}
	}
	return vecs, dim, nil
}

// VectorSearcher searches a vector index whose entries carry string ids;
// *dense.Index (retrieval/dense) implements it. vecs is row-major
// [nq, Dim()]; the result holds, per query, at most k hits best first, never
// an invalid id.
type VectorSearcher interface {
	Search(vecs []float32, k int) ([][]retrieval.Hit, error)
	Dim() int
}

// Retriever implements retrieval.Retriever for a dense index: the query is
// embedded with Encoder.EncodeQueries and searched in Index (a
// *dense.Index built from EncodeCorpus's vectors).
type Retriever struct {
	Encoder Encoder
	Index   VectorSearcher
}

// Search returns the top-k chunks for query, best first. Errors: an encoder
// or index failure, or encoder and index dimensions that differ.
func (r *Retriever) Search(query string, k int) ([]retrieval.Hit, error) {
	if r.Encoder == nil || r.Index == nil {
		return nil, errors.New("dense retriever: Encoder and Index are required")
	}
	if r.Encoder.Dim() != r.Index.Dim() {
		return nil, fmt.Errorf("dense retriever: encoder %s has dim %d, index %d", r.Encoder.Name(), r.Encoder.Dim(), r.Index.Dim())
	}
	vecs, err := r.Encoder.EncodeQueries([]string{query})
	if err != nil {
		return nil, fmt.Errorf("dense retriever: encode query: %w", err)
	}
	hits, err := r.Index.Search(vecs[0], k)
	if err != nil {
		return nil, fmt.Errorf("dense retriever: search: %w", err)
	}
	return hits[0], nil
}

var _ retrieval.Retriever = (*Retriever)(nil)
