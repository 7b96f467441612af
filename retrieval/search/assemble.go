package search

import (
	"errors"
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// Assembly is what Assemble builds a Pipeline from: the retrieval settings
// and the indexes' settings. The encoder comes loaded (encode.LoadBERT and
// the directory's settings are the caller's choice).
type Assembly struct {
	// Config: mode, hybrid weights, RRF C, depth, union (the AP paper's
	// hybrid: C fusion.DefaultC 60, Depth DefaultDepth 100).
	Config
	BM25     bm25.Config // analyzer, k1, b of the BM25 index
	IndexDir string      // where the BM25 index is written; "" keeps it in memory
	// Encoder encodes the queries (and the chunks, unless Encoded is set);
	// needed by every mode but bm25.
	Encoder encode.Encoder
	// Factory is the FAISS index_factory string of the dense index
	// ("Flat", "HNSW32", "IVF256,Flat") and Search its query-time settings.
	Factory string
	Search  dense.SearchParams
	// Encoded, when set, is a pre-encoded corpus (data.Open of rag2:DIR)
	// whose stored vectors are indexed as they are, row i for chunk i.
	Encoded *data.Encoded
	// Progress, when set, is told the stage ("bm25 index", "encode") and
	// how many chunks of it are done.
	Progress func(stage string, done, total int)
}

// Assemble builds the retrieval pipeline over chunks: the BM25 index, and
// for every mode but bm25 the dense index of the encoded chunks or of
// Encoded's vectors (dense, hybrid, hyde), and validates it. The returned
// function releases the indexes. Errors: invalid settings (bm25.Config,
// dense.CheckSearch, Pipeline.Validate), indexing and encoding failures.
func Assemble(chunks []data.Chunk, a Assembly) (*Pipeline, func(), error) {
	if err := a.Mode.Check(); err != nil {
		return nil, nil, fmt.Errorf("assemble retrieval: %w", err)
	}
	prog := func(stage string) func(done, total int) {
		if a.Progress == nil {
			return nil
		}
		return func(done, total int) { a.Progress(stage, done, total) }
	}
	var closers []func()
	release := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	p := &Pipeline{Config: a.Config}
	{
		// Built for every mode, as the index of record: Mode may be set
		// to bm25 or hybrid later without rebuilding.
		var idx *bm25.Index
		var err error
		if a.IndexDir != "" {
			idx, err = bm25.Build(a.IndexDir, chunks, a.BM25, prog("bm25 index"))
		} else {
			idx, err = bm25.NewMemory(chunks, a.BM25)
			if f := prog("bm25 index"); f != nil {
				f(len(chunks), len(chunks)) // one batch in memory
			}
		}
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { idx.Close() })
		p.BM25 = idx
	}
	if a.Mode.Dense() {
		if a.Encoder == nil {
			release()
			return nil, nil, errors.New("assemble retrieval: mode " + string(a.Mode) + " needs an encoder")
		}
		if err := dense.CheckSearch(a.Encoder.Dim(), a.Factory, a.Search); err != nil {
			release()
			return nil, nil, fmt.Errorf("faiss %s: %w", a.Factory, err)
		}
		var idx *dense.Index
		var err error
		if a.Encoded != nil {
			idx, err = IndexEncoded(a.Encoder, a.Encoded, a.Factory)
		} else {
			idx, err = IndexChunks(a.Encoder, chunks, a.Factory, prog("encode"))
		}
		if err != nil {
			release()
			return nil, nil, err
		}
		closers = append(closers, func() { idx.Close() })
		if err := idx.SetSearch(a.Search); err != nil {
			release()
			return nil, nil, fmt.Errorf("faiss %s: %w", a.Factory, err)
		}
		p.Encoder, p.Index = a.Encoder, idx
	}
	if err := p.Validate(); err != nil {
		release()
		return nil, nil, err
	}
	return p, release, nil
}
