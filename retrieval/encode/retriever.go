package encode

import (
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
