// Package search is ragforge's one retrieval pipeline: BM25, dense
// (encoder + FAISS), their weighted-RRF hybrid (the AP paper's), HyDE /
// SL-HyDE query fusion (Eq. 10–11) and optional reranking behind one type,
// searched one query at a time (retrieval.Retriever) or in batches. `eval
// retrieval`, the server and the self-learning evaluation all search
// through it.
//
// Batching is kept as the caller chooses: SearchBatch embeds its queries in
// one encoder call and searches them in one index call, Search embeds and
// searches one query. Encoders and FAISS give the same rankings either way
// only up to float rounding, so callers that must reproduce earlier runs
// keep their batch shape.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/hyde"
)

// Mode selects the retriever.
type Mode string

// The retrieval modes.
const (
	BM25   Mode = "bm25"   // Okapi BM25 (retrieval/bm25)
	Dense  Mode = "dense"  // the query embedding in the FAISS index
	Hybrid Mode = "hybrid" // weighted RRF of the dense and BM25 lists
	HyDE   Mode = "hyde"   // the SL-HyDE fused vector (Eq. 10–11) in the FAISS index
)

// Modes lists the modes in documentation order.
var Modes = []Mode{BM25, Dense, Hybrid, HyDE}

// Check returns an error naming the valid modes when m is not one of Modes;
// the one validation of a mode name (flags, pipeline.json, requests).
func (m Mode) Check() error {
	for _, v := range Modes {
		if m == v {
			return nil
		}
	}
	names := make([]string, len(Modes))
	for i, v := range Modes {
		names[i] = string(v)
	}
	return fmt.Errorf("unknown mode %q (want one of %s)", string(m), strings.Join(names, ", "))
}

// Dense reports whether the mode searches the dense index (all but bm25).
func (m Mode) Dense() bool { return m != BM25 }

// Lexical reports whether the mode searches the BM25 index (bm25, hybrid).
func (m Mode) Lexical() bool { return m == BM25 || m == Hybrid }

// DefaultDepth is how many hits each side of the hybrid contributes to the
// fusion by default (at least k).
const DefaultDepth = 100

// Config configures a Pipeline.
type Config struct {
	Mode Mode
	// DenseWeight and BM25Weight are the hybrid's RRF weights (AP paper:
	// fusion.DenseWeight 0.3, fusion.BM25Weight 0.7).
	DenseWeight, BM25Weight float64
	// C is the RRF rank constant; 0 means fusion.DefaultC (60).
	C float64
	// Depth: each side of the hybrid is asked for max(k, Depth) hits
	// before fusion (0: exactly k).
	Depth int
	// Union fuses each side's top k and returns the whole union (up to
	// 2k hits), as the AP paper's ensemble retriever did; Depth is then
	// ignored.
	Union bool
	// HyDE configures query fusion in mode HyDE (hyde.DefaultConfig:
	// ModeFusion, N 1, normalised).
	HyDE hyde.Config
}

// DefaultConfig is the AP paper's hybrid: weights 0.3 / 0.7, C 60, depth
// DefaultDepth; HyDE as hyde.DefaultConfig.
func DefaultConfig() Config {
	return Config{Mode: Hybrid, DenseWeight: fusion.DenseWeight, BM25Weight: fusion.BM25Weight, C: fusion.DefaultC,
		Depth: DefaultDepth, HyDE: hyde.DefaultConfig()}
}

// Reranker rescores a query's hits (retrieval/rerank.CrossEncoder);
// textOf returns a hit's text.
type Reranker interface {
	Rerank(query string, hits []retrieval.Hit, textOf func(id string) (string, bool)) ([]retrieval.Hit, error)
}

// Pipeline retrieves with one Config over one corpus. The retrievers a mode
// needs must be set: BM25 for bm25 and hybrid; Encoder and Index for
// dense, hybrid and hyde.
type Pipeline struct {
	Config
	BM25    retrieval.Retriever   // *bm25.Index
	Encoder encode.Encoder        // query encoder of Index
	Index   encode.VectorSearcher // *dense.Index of the corpus vectors
	// Reranker, when set, rescores every query's hits (TextOf gives the
	// chunk texts); the number of hits is then the reranker's.
	Reranker Reranker
	TextOf   func(id string) (string, bool)
}

// Query is one search: its text and, in mode HyDE, its hypothetical
// documents d′_1..d′_N (none: the plain query, see hyde.EncodeBatch).
type Query struct {
	Text  string
	Hypos []string
}

// Validate reports a mode the pipeline cannot serve: an unknown mode, a
// missing retriever, an invalid weight or HyDE mode.
func (p *Pipeline) Validate() error {
	dense := p.Encoder != nil && p.Index != nil
	switch p.Mode {
	case BM25:
		if p.BM25 == nil {
			return errors.New("retrieval pipeline: mode bm25 needs a BM25 index")
		}
	case Dense, HyDE:
		if !dense {
			return fmt.Errorf("retrieval pipeline: mode %s needs an encoder and a dense index", p.Mode)
		}
	case Hybrid:
		if !dense || p.BM25 == nil {
			return errors.New("retrieval pipeline: mode hybrid needs a BM25 index, an encoder and a dense index")
		}
	default:
		return fmt.Errorf("retrieval pipeline: %w", p.Mode.Check())
	}
	for _, w := range []float64{p.DenseWeight, p.BM25Weight, p.C} {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("retrieval pipeline: weights and C must be finite and ≥ 0 (dense %v, bm25 %v, C %v)", p.DenseWeight, p.BM25Weight, p.C)
		}
	}
	if !p.HyDE.Mode.Valid() {
		return fmt.Errorf("retrieval pipeline: unknown HyDE mode %q", p.HyDE.Mode)
	}
	if p.Reranker != nil && p.TextOf == nil {
		return errors.New("retrieval pipeline: a reranker needs TextOf")
	}
	if dense && p.Encoder.Dim() != p.Index.Dim() {
		return fmt.Errorf("retrieval pipeline: encoder %s has dim %d, index %d", p.Encoder.Name(), p.Encoder.Dim(), p.Index.Dim())
	}
	return nil
}

// Search implements retrieval.Retriever: SearchBatch of one query.
func (p *Pipeline) Search(query string, k int) ([]retrieval.Hit, error) {
	hits, err := p.SearchBatch(context.Background(), []Query{{Text: query}}, k)
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

// SearchBatch returns the top-k hits of every query, best first: Encode,
// then SearchVectors, then the reranker when set. Errors: Validate's,
// ctx's, encoder, index and BM25 failures.
func (p *Pipeline) SearchBatch(ctx context.Context, qs []Query, k int) ([][]retrieval.Hit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	vecs, err := p.Encode(qs)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hits, err := p.SearchVectors(qs, vecs, k)
	if err != nil || p.Reranker == nil {
		return hits, err
	}
	for i, q := range qs {
		if hits[i], err = p.Reranker.Rerank(q.Text, hits[i], p.TextOf); err != nil {
			return nil, fmt.Errorf("rerank: %w", err)
		}
	}
	return hits, nil
}

// Encode returns the query vectors the mode searches with, [len(qs)][dim]:
// dense and hybrid embed the texts in one Encoder.EncodeQueries call, HyDE
// fuses each query with its hypothetical documents (hyde.EncodeBatch, one
// call per kind of text); BM25 needs none (nil). The vectors of one
// encoder may be reused across pipelines that share it (several corpora,
// several fusion weights).
func (p *Pipeline) Encode(qs []Query) ([][]float32, error) {
	texts := make([]string, len(qs))
	for i, q := range qs {
		texts[i] = q.Text
	}
	switch p.Mode {
	case Dense, Hybrid:
		v, err := p.Encoder.EncodeQueries(texts)
		if err != nil {
			return nil, fmt.Errorf("encode %d queries: %w", len(qs), err)
		}
		return v, nil
	case HyDE:
		hypos := make([][]string, len(qs))
		for i, q := range qs {
			hypos[i] = q.Hypos
		}
		return hyde.EncodeBatch(p.Encoder, p.HyDE, texts, hypos)
	}
	return nil, nil
}

// SearchVectors returns the top-k hits of every query given its Encode
// vector (vecs[i] for qs[i]; ignored in mode bm25): bm25 searches the texts;
// dense and hyde search all vectors in one index call; hybrid fuses, per
// query, the dense and BM25 top max(k, Depth) lists (top k with Union) by
// weighted RRF (Fuse).
func (p *Pipeline) SearchVectors(qs []Query, vecs [][]float32, k int) ([][]retrieval.Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("retrieval pipeline: k = %d: must be ≥ 1", k)
	}
	if p.Mode == BM25 {
		return p.searchBM25(qs, k)
	}
	if len(vecs) != len(qs) {
		return nil, fmt.Errorf("retrieval pipeline: %d vectors for %d queries", len(vecs), len(qs))
	}
	depth := k
	if p.Mode == Hybrid && !p.Union {
		depth = max(k, p.Depth)
	}
	dh, err := p.searchDense(vecs, depth)
	if err != nil || p.Mode != Hybrid {
		return dh, err
	}
	bh, err := p.searchBM25(qs, depth)
	if err != nil {
		return nil, err
	}
	return p.Fuse(dh, bh, k)
}

// Fuse merges, per query, a dense and a BM25 hit list by weighted RRF with
// the pipeline's weights, C and Union (fusion.RRF): exactly min(k, |union|)
// hits, or the union of both top-k lists with Union.
func (p *Pipeline) Fuse(dense, bm [][]retrieval.Hit, k int) ([][]retrieval.Hit, error) {
	if len(dense) != len(bm) {
		return nil, fmt.Errorf("retrieval pipeline: fuse %d dense and %d BM25 lists", len(dense), len(bm))
	}
	out := make([][]retrieval.Hit, len(dense))
	for i := range dense {
		var err error
		out[i], err = fusion.RRF([][]retrieval.Hit{dense[i], bm[i]}, []float64{p.DenseWeight, p.BM25Weight}, k, fusion.Options{C: p.C, Union: p.Union})
		if err != nil {
			return nil, fmt.Errorf("hybrid: %w", err)
		}
	}
	return out, nil
}

func (p *Pipeline) searchBM25(qs []Query, k int) ([][]retrieval.Hit, error) {
	out := make([][]retrieval.Hit, len(qs))
	for i, q := range qs {
		var err error
		if out[i], err = p.BM25.Search(q.Text, k); err != nil {
			return nil, fmt.Errorf("bm25: %w", err)
		}
	}
	return out, nil
}

func (p *Pipeline) searchDense(vecs [][]float32, k int) ([][]retrieval.Hit, error) {
	dim := p.Index.Dim()
	flat := make([]float32, 0, len(vecs)*dim)
	for i, v := range vecs {
		if len(v) != dim {
			return nil, fmt.Errorf("dense: query %d: vector length %d, index dim %d", i, len(v), dim)
		}
		flat = append(flat, v...)
	}
	if len(vecs) == 0 {
		return [][]retrieval.Hit{}, nil
	}
	hits, err := p.Index.Search(flat, k)
	if err != nil {
		return nil, fmt.Errorf("dense: search %d queries: %w", len(vecs), err)
	}
	return hits, nil
}

var _ retrieval.Retriever = (*Pipeline)(nil)
