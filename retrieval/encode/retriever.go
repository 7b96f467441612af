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
	walk := func(yield func(data.Chunk) error) error {
		for _, c := range chunks {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
	_, err = EncodeStream(enc, walk, func(_ []data.Chunk, v []float32) error {
		vecs = append(vecs, v...)
		return nil
	}, func(done int) {
		if progress != nil {
			progress(done, len(chunks))
		}
	})
	if err != nil {
		return nil, 0, err
	}
	return vecs, dim, nil
}

// EncodeStream embeds the chunks walk yields (chunk.Walk's shape: walk calls
// yield once per chunk, in order) in blocks of CorpusBlock, and passes each
// block with its vectors, row-major [len(block), enc.Dim()], to emit before
// reading on: memory holds one block whatever the corpus size. emit must not
// keep the slices (they are reused; data.RAG2Writer.Add copies). progress,
// when non-nil, receives the chunks done after every block. It returns the
// number of chunks encoded. Errors: walk's, emit's, and encoding errors
// naming the block's first chunk id and position, or a vector whose length
// is not enc.Dim().
func EncodeStream(enc Encoder, walk func(yield func(data.Chunk) error) error, emit func(block []data.Chunk, vecs []float32) error, progress func(done int)) (int, error) {
	dim := enc.Dim()
	block := make([]data.Chunk, 0, CorpusBlock)
	texts := make([]string, 0, CorpusBlock)
	vecs := make([]float32, 0, CorpusBlock*dim)
	done := 0
	run := func() error {
		texts, vecs = texts[:0], vecs[:0]
		for _, c := range block {
			texts = append(texts, c.Text)
		}
		out, err := enc.EncodeDocs(texts)
		if err != nil {
			return fmt.Errorf("encode corpus with %s: chunks %d.. (id %q): %w", enc.Name(), done, block[0].ID, err)
		}
		for i, v := range out {
			if len(v) != dim {
				return fmt.Errorf("encode corpus with %s: chunk %q: vector length %d, want %d", enc.Name(), block[i].ID, len(v), dim)
			}
			vecs = append(vecs, v...)
		}
		if err := emit(block, vecs); err != nil {
			return err
		}
		done += len(block)
		clear(block)
		block = block[:0]
		if progress != nil {
			progress(done)
		}
		return nil
	}
	err := walk(func(c data.Chunk) error {
		if block = append(block, c); len(block) == CorpusBlock {
			return run()
		}
		return nil
	})
	if err == nil && len(block) > 0 {
		err = run()
	}
	return done, err
}

// VectorSearcher searches a vector index whose entries carry string ids;
// *dense.Index (retrieval/dense) implements it. vecs is row-major
// [nq, Dim()]; the result holds, per query, at most k hits best first, never
// an invalid id.
type VectorSearcher interface {
	Search(vecs []float32, k int) ([][]retrieval.Hit, error)
	Dim() int
}

// EncodeToRAG2 streams walk's chunks through enc (EncodeStream) into corpus
// name under root in RAG²'s layout (data.RAG2Writer), shardRows rows per
// .npy/.json pair: memory holds one block being encoded and one shard being
// filled, never the corpus, so a corpus of any size encodes in bounded
// memory; its chunk texts live in the articles files. info is written with
// Rows and Dim set. It returns the rows written. On error nothing is left
// under root. Errors: shardRows < 1, and those of EncodeStream and
// data.RAG2Writer.
func EncodeToRAG2(enc Encoder, walk func(yield func(data.Chunk) error) error, root, name string, shardRows int, info data.EncodeInfo, progress func(done int)) (int, error) {
	w, err := data.NewRAG2Writer(root, name, enc.Dim(), shardRows)
	if err != nil {
		return 0, err
	}
	n, err := EncodeStream(enc, walk, w.Add, progress)
	if err != nil {
		w.Abort()
		return 0, err
	}
	if err := w.Close(info); err != nil {
		return 0, err
	}
	return n, nil
}
