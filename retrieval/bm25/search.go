package bm25

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/blevesearch/bleve/v2"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/ragforge/ragforge/retrieval"
)

// ErrBadK is returned (wrapped) by Search and SearchBleve for k ≤ 0.
var ErrBadK = errors.New("k must be > 0")

// Search returns the top-k chunks for query by BM25 (see the package
// documentation), best first. The query is analyzed with the index's analyzer
// and its terms are OR-ed: a chunk matching any term is a candidate. Equal
// scores are ordered by chunk ID. It returns at most k hits, fewer when fewer
// chunks match; a query with no terms after analysis (empty, blank, only
// punctuation or stop words) returns an empty slice and no error.
// Errors: k ≤ 0 (ErrBadK), or a bleve read error.
func (ix *Index) Search(query string, k int) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("bm25 search: k=%d: %w", k, ErrBadK)
	}
	qtf := map[string]int{}
	var order []string
	for _, t := range ix.analyzer.Analyze([]byte(query)) {
		if qtf[string(t.Term)] == 0 {
			order = append(order, string(t.Term))
		}
		qtf[string(t.Term)]++
	}
	hits := []retrieval.Hit{}
	if len(order) == 0 || ix.meta.Docs == 0 {
		return hits, nil
	}
	sort.Strings(order) // fixed summation order, so equal inputs give equal floats

	// A sharded index is scored with the statistics of the whole: N and
	// avgdl from ragforge.json, each term's document frequency summed over
	// the shards, so a chunk scores as it would in one index.
	readers := make([]index.IndexReader, len(ix.shards))
	defer func() {
		for _, r := range readers {
			if r != nil {
				_ = r.Close()
			}
		}
	}()
	for k, sh := range ix.shards {
		adv, err := sh.Advanced()
		if err != nil {
			return nil, fmt.Errorf("bm25 search: shard %d: %w", k, err)
		}
		if readers[k], err = adv.Reader(); err != nil {
			return nil, fmt.Errorf("bm25 search: shard %d: %w", k, err)
		}
	}

	N := float64(ix.meta.Docs)
	avgdl := ix.AvgDocLen()
	k1, b := ix.meta.K1, ix.meta.B
	accs := make([]*accumulator, len(readers))
	for k := range accs {
		accs[k] = accPool.Get().(*accumulator)
		defer accs[k].release()
	}
	tfrs := make([]index.TermFieldReader, len(readers))
	closeTFRs := func() {
		for k, t := range tfrs {
			if t != nil {
				_ = t.Close()
				tfrs[k] = nil
			}
		}
	}
	defer closeTFRs()
	var tfd index.TermFieldDoc
	for _, term := range order {
		n := 0.0
		for k, r := range readers {
			tfr, err := r.TermFieldReader(context.Background(), []byte(term), fieldText, true, true, false)
			if err != nil {
				return nil, fmt.Errorf("bm25 search: shard %d: term %q: %w", k, term, err)
			}
			tfrs[k] = tfr
			n += float64(tfr.Count())
		}
		idf := math.Log(1 + (N-n+0.5)/(n+0.5))
		w := float64(qtf[term]) * idf
		for k, tfr := range tfrs {
			for {
				d, err := tfr.Next(tfd.Reset())
				if err != nil {
					return nil, fmt.Errorf("bm25 search: shard %d: term %q: %w", k, term, err)
				}
				if d == nil {
					break
				}
				// scorch internal ids are 8-byte big-endian document numbers
				// below the snapshot's document total.
				if len(d.ID) != 8 || binary.BigEndian.Uint64(d.ID) >= maxDocNum {
					return nil, fmt.Errorf("bm25 search: shard %d: term %q: internal id %x: not a scorch document number", k, term, []byte(d.ID))
				}
				tf := float64(d.Freq)
				// bleve stores norm = float32(1/√dl) (zapx); dl is an integer.
				dl := math.Round(1 / (d.Norm * d.Norm))
				accs[k].add(binary.BigEndian.Uint64(d.ID), w*tf*(k1+1)/(tf+k1*(1-b+b*dl/avgdl)))
			}
		}
		closeTFRs()
	}

	// Each shard's top k (with ties at the k-th) holds every chunk of the
	// overall top k that lies in it.
	var cs []cand
	for sh, r := range readers {
		top := accs[sh].top(k)
		for i := range top {
			ext, err := r.ExternalID(binary.BigEndian.AppendUint64(nil, top[i].id))
			if err != nil {
				return nil, fmt.Errorf("bm25 search: shard %d: %w", sh, err)
			}
			top[i].ext = ext
		}
		cs = append(cs, top...)
	}
	// Order ties by external id.
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score > cs[j].score
		}
		return cs[i].ext < cs[j].ext
	})
	if len(cs) > k {
		cs = cs[:k]
	}
	for _, c := range cs {
		hits = append(hits, retrieval.Hit{ID: c.ext, Score: c.score})
	}
	return hits, nil
}

// SearchBleve runs the same OR-ed match query through bleve's own "bm25"
// scoring (k1 = 1.2, b = 0.75 whatever the Config, √tf, vocabulary-based
// average length, query norm and coordination factor; see the package
// documentation) and returns at most k hits, best first. It exists to compare
// with Search; a query with no terms returns an empty slice.
// Errors: k ≤ 0 (ErrBadK), or a bleve search error.
func (ix *Index) SearchBleve(query string, k int) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("bm25 bleve search: k=%d: %w", k, ErrBadK)
	}
	hits := []retrieval.Hit{}
	if len(ix.analyzer.Analyze([]byte(query))) == 0 {
		return hits, nil
	}
	q := bleve.NewMatchQuery(query)
	q.SetField(fieldText)
	q.Analyzer = bleveName(ix.meta.Analyzer)
	req := bleve.NewSearchRequestOptions(q, k, 0, false)
	res, err := ix.idx.Search(req)
	if err != nil {
		return nil, fmt.Errorf("bm25 bleve search: %w", err)
	}
	for _, h := range res.Hits {
		hits = append(hits, retrieval.Hit{ID: h.ID, Score: h.Score})
	}
	return hits, nil
}

// maxDocNum bounds the scorch document numbers Search accepts (and so the
// accumulator's size).
const maxDocNum = 1 << 31

type cand struct {
	id    uint64 // scorch document number
	ext   string // external id (Chunk.ID), filled for the returned candidates
	score float64
}

// accumulator sums per-document scores in a dense slice indexed by scorch
// document number. BM25 contributions are > 0, so a zero score means "not
// seen"; touched lists the documents seen, for top and for resetting.
type accumulator struct {
	scores  []float64
	touched []uint64
	heap    candHeap
}

var accPool = sync.Pool{New: func() any { return new(accumulator) }}

func (a *accumulator) add(id uint64, v float64) {
	if id >= uint64(len(a.scores)) {
		a.scores = append(a.scores, make([]float64, int(id)+1-len(a.scores))...)
	}
	if a.scores[id] == 0 {
		a.touched = append(a.touched, id)
	}
	a.scores[id] += v
}

// top returns the k best candidates and every candidate tied with the k-th,
// in no particular order. It costs O(n log k) for n candidates.
func (a *accumulator) top(k int) []cand {
	h := a.heap[:0]
	for _, id := range a.touched {
		s := a.scores[id]
		if len(h) < k {
			heap.Push(&h, cand{id: id, score: s})
		} else if s > h[0].score {
			h[0] = cand{id: id, score: s}
			heap.Fix(&h, 0)
		}
	}
	a.heap = h
	if len(h) == 0 {
		return nil
	}
	kth := h[0].score
	cs := make([]cand, 0, len(h))
	for _, id := range a.touched {
		if s := a.scores[id]; s >= kth {
			cs = append(cs, cand{id: id, score: s})
		}
	}
	return cs
}

func (a *accumulator) release() {
	for _, id := range a.touched {
		a.scores[id] = 0
	}
	a.touched = a.touched[:0]
	a.heap = a.heap[:0]
	accPool.Put(a)
}

// candHeap is a min-heap on score.
type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].score < h[j].score }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
