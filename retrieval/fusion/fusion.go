// Package fusion merges ranked hit lists: weighted Reciprocal Rank Fusion (the
// AP paper's hybrid BM25 + dense retriever, LangChain EnsembleRetriever) and
// RAG²'s balanced retrieval across corpora.
package fusion

import (
	"fmt"
	"math"
	"sort"

	"github.com/ragforge/ragforge/retrieval"
)

// Defaults of the AP paper's best hybrid configuration (Pires et al. 2025):
// RRF constant 60 (Cormack et al. 2009, LangChain's c), weight 0.3 for the
// dense list and 0.7 for the BM25 list.
const (
	DefaultC    = 60
	DenseWeight = 0.3
	BM25Weight  = 0.7
)

// Options tunes RRF.
type Options struct {
	// C is the rank constant; 0 means DefaultC.
	C float64
	// Union reproduces the AP paper's ensemble retriever: each list is cut
	// to its top k, the union of those is fused and returned whole, so the
	// result may hold up to len(lists)·k hits (2k for BM25 + dense). By
	// default all supplied hits are fused and the result is cut to k.
	Union bool
}

// RRF fuses ranked lists with weighted Reciprocal Rank Fusion, as LangChain's
// EnsembleRetriever.weighted_reciprocal_rank:
//
//	score(d) = Σ_i weights[i] / (C + rank_i(d))
//
// summing over the lists that contain d, with rank_i starting at 1 in list i's
// given order (input scores are ignored). A duplicate id within one list counts
// at its first rank only. The result is sorted by fused score descending; ties
// keep the order of first appearance (list 0 first, then list 1, ...). Each
// returned Hit carries its fused score. Without Options.Union it holds exactly
// min(k, |union of ids|) hits.
//
// weights nil means equal weights 1/len(lists) (LangChain's default); for the
// AP hybrid pass {DenseWeight, BM25Weight} with lists {dense, BM25}.
//
// Errors: k < 1, len(weights) != len(lists), a negative or non-finite weight,
// or C < 0.
func RRF(lists [][]retrieval.Hit, weights []float64, k int, opt Options) ([]retrieval.Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("rrf: k = %d: must be >= 1", k)
	}
	if weights == nil {
		weights = make([]float64, len(lists))
		for i := range weights {
			weights[i] = 1 / float64(len(lists))
		}
	}
	if len(weights) != len(lists) {
		return nil, fmt.Errorf("rrf: %d weights for %d lists", len(weights), len(lists))
	}
	for i, w := range weights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("rrf: weight %d = %v: must be finite and >= 0", i, w)
		}
	}
	c := opt.C
	if c == 0 {
		c = DefaultC
	}
	if c < 0 || math.IsNaN(c) {
		return nil, fmt.Errorf("rrf: C = %v: must be >= 0", c)
	}
	score := map[string]float64{}
	var order []string
	for i, l := range lists {
		if opt.Union && len(l) > k {
			l = l[:k]
		}
		seen := make(map[string]bool, len(l))
		for r, h := range l {
			if seen[h.ID] {
				continue
			}
			seen[h.ID] = true
			if _, ok := score[h.ID]; !ok {
				order = append(order, h.ID)
			}
			score[h.ID] += weights[i] / (c + float64(r+1))
		}
	}
	out := make([]retrieval.Hit, len(order))
	for i, id := range order {
		out[i] = retrieval.Hit{ID: id, Score: score[id]}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if !opt.Union && len(out) > k {
		out = out[:k]
	}
	return out, nil
}

// Balanced implements RAG²'s balanced retrieval over several corpora: each
// of the n corpora gets a quota of ⌊k/n⌋ hits, the first k mod n corpora (by
// name, sorted, for determinism) one more; a corpus holding fewer hits than
// its quota hands the shortfall on to the others, again in name order, so the
// result holds min(k, total hits) hits. The kept hits (each corpus's top ones,
// in the given order) are interleaved by rank: rank 1 of every corpus in name
// order, then rank 2, ... RAG² concatenates the per-corpus lists; interleaving
// keeps every corpus represented at any prefix, and scores of different
// corpora are not compared. Hits keep their original scores. Ids are assumed
// unique across corpora (prefix them if not); nothing is deduplicated.
// k < 1 or no corpora give nil.
func Balanced(perCorpus map[string][]retrieval.Hit, k int) []retrieval.Hit {
	if k < 1 || len(perCorpus) == 0 {
		return nil
	}
	names := make([]string, 0, len(perCorpus))
	for n := range perCorpus {
		names = append(names, n)
	}
	sort.Strings(names)
	n := len(names)
	quota := make([]int, n)
	for i := range quota {
		quota[i] = k / n
		if i < k%n {
			quota[i]++
		}
	}
	// Cap each quota at the corpus size, then hand the shortfall out one hit
	// at a time, in name order, to corpora with hits to spare.
	spare := 0
	for i, name := range names {
		if have := len(perCorpus[name]); quota[i] > have {
			spare += quota[i] - have
			quota[i] = have
		}
	}
	for progress := true; spare > 0 && progress; {
		progress = false
		for i, name := range names {
			if spare > 0 && quota[i] < len(perCorpus[name]) {
				quota[i]++
				spare--
				progress = true
			}
		}
	}
	var out []retrieval.Hit
	maxQ := 0
	for _, q := range quota {
		maxQ = max(maxQ, q)
	}
	for r := 0; r < maxQ; r++ {
		for i, name := range names {
			if r < quota[i] {
				out = append(out, perCorpus[name][r])
			}
		}
	}
	return out
}
