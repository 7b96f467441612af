package selflearn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/search"
)

// FusionGrid are the dense RRF weights tried when the hybrid's weight is
// chosen (BM25 gets 1 − w): 0 (BM25 alone) to 1 (dense alone) in steps of
// 0.1, which includes the AP paper's 0.3.
var FusionGrid = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// FusionChoice is how a round chose its hybrid's weights: nDCG@10 of each
// grid weight on the round's held-out pseudo-queries (each query's own
// chunk is its one relevant chunk; no relevance labels are used).
type FusionChoice struct {
	DenseWeight float64            `json:"dense_weight"`
	BM25Weight  float64            `json:"bm25_weight"`
	HeldOut     int                `json:"held_out"` // pseudo-queries it was chosen on
	NDCG        map[string]float64 `json:"ndcg_at_10"`
}

// splitHoldout returns the keys kept for training and the ones held out:
// the pseudo-queries of a fraction cfg.FusionHoldout of the round's chunks
// (at least one chunk when the fraction is > 0 and at least one stays for
// training), chosen by a PCG(Seed, 2000+t) permutation of the chunks in key
// order. Whole chunks are held out, so with several queries per chunk
// (QueriesPerChunk) the hybrid's weight is chosen on chunks the retriever
// was not trained to retrieve, as most evaluation questions' chunks are when
// only Samples of a large corpus are sampled; with one query per chunk this
// is the split by query.
func (s *state) splitHoldout(t int, keys []string) (train, held []string) {
	var chunks []string
	seen := map[string]bool{}
	for _, k := range keys {
		if c := s.chunkOfKey(k); !seen[c] {
			seen[c] = true
			chunks = append(chunks, c)
		}
	}
	n := int(s.cfg.FusionHoldout*float64(len(chunks)) + 0.5)
	if s.cfg.FusionHoldout > 0 {
		n = max(n, 1)
	}
	n = min(n, len(chunks)-1)
	if n <= 0 {
		return keys, nil
	}
	perm := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(2000+t))).Perm(len(chunks))
	isHeld := map[string]bool{}
	for _, i := range perm[:n] {
		isHeld[chunks[i]] = true
	}
	for _, k := range keys {
		if isHeld[s.chunkOfKey(k)] {
			held = append(held, k)
		} else {
			train = append(train, k)
		}
	}
	return train, held
}

// chooseFusion picks the grid weight with the highest nDCG@10 of the
// hybrid with R_t on the held-out pseudo-queries (query text qs[key][0],
// relevant chunk = the key's chunk); ties go to the smaller dense weight,
// so a dense model that adds nothing gets weight 0 (BM25 alone).
func (s *state) chooseFusion(ctx context.Context, t int, held []string, qs map[string][]string) (*FusionChoice, error) {
	queries := make([]string, len(held))
	qrels := data.Qrels{}
	for i, k := range held {
		queries[i] = qs[k][0]
		qrels["h"+strconv.Itoa(i)] = map[string]int{s.chunkOfKey(k): 1}
	}
	ix, enc, err := s.index(t)
	if err != nil {
		return nil, err
	}
	bm, err := s.bm25()
	if err != nil {
		return nil, err
	}
	// One dense and one BM25 search of every held-out query (top EvalDepth),
	// fused with each grid weight.
	k := s.cfg.EvalDepth
	p := &search.Pipeline{Config: search.Config{Mode: search.Dense}, BM25: bm, Encoder: enc, Index: ix}
	pq := make([]search.Query, len(queries))
	for i, q := range queries {
		pq[i] = search.Query{Text: q}
	}
	vecs, err := p.Encode(pq)
	if err != nil {
		return nil, fmt.Errorf("fusion: encode held-out queries: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dh, err := p.SearchVectors(pq, vecs, k)
	if err != nil {
		return nil, fmt.Errorf("fusion: search held-out queries: %w", err)
	}
	p.Mode = search.BM25
	bh, err := p.SearchVectors(pq, nil, k)
	if err != nil {
		return nil, fmt.Errorf("fusion: %w", err)
	}
	ch := &FusionChoice{HeldOut: len(held), NDCG: map[string]float64{}, DenseWeight: -1}
	best := -1.0
	for _, w := range FusionGrid {
		p.Mode, p.DenseWeight, p.BM25Weight = search.Hybrid, w, 1-w
		fused, err := p.Fuse(dh, bh, k)
		if err != nil {
			return nil, err
		}
		run := eval.Run{}
		for i := range queries {
			run["h"+strconv.Itoa(i)] = fused[i]
		}
		rep, err := eval.Evaluate(run, qrels, []int{10})
		if err != nil {
			return nil, err
		}
		v := rep.Mean["nDCG@10"]
		ch.NDCG[strconv.FormatFloat(w, 'f', 1, 64)] = v
		if v > best+1e-12 {
			best, ch.DenseWeight, ch.BM25Weight = v, w, 1-w
		}
	}
	return ch, nil
}
