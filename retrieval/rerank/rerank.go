// Package rerank re-orders and filters retrieved candidates: a cosine
// similarity threshold (the "reranking retrieval" of the anatomical-pathology
// RAG study, Pires, Perezhohin, Castelli 2025: keep candidates whose cosine
// similarity to the query is at least 0.40) and a cross-encoder that rescores
// the top-N fused candidates and keeps the best K (the breast-lesion RAG
// study: top 20 → 3, MedCPT-Cross-Encoder style).
package rerank

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/ragforge/ragforge/retrieval"
)

// DefaultThreshold is the AP study's minimum cosine similarity.
const DefaultThreshold = 0.40

// Cosine is a·b / (|a| |b|) in float64; 0 when either vector is zero.
// Errors: vectors of different lengths.
func Cosine(a, b []float32) (float64, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("cosine: dims %d and %d differ", len(a), len(b))
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0, nil
	}
	return dot / math.Sqrt(na*nb), nil
}

// Threshold keeps the hits whose cosine similarity between queryVec [dim]
// and the hit's vector vecOf(id) [dim] is >= min (use DefaultThreshold),
// re-sorted by that similarity, highest first (ties keep the input order),
// with Score set to the similarity. Vectors need not be normalised. An
// empty result is valid: no candidate is close enough. Errors: a hit whose
// vector is missing (ok false) or has another dimension, naming the hit;
// a NaN min.
func Threshold(queryVec []float32, hits []retrieval.Hit, vecOf func(id string) ([]float32, bool), min float64) ([]retrieval.Hit, error) {
	if math.IsNaN(min) {
		return nil, errors.New("rerank threshold: min is NaN")
	}
	out := make([]retrieval.Hit, 0, len(hits))
	for i, h := range hits {
		v, ok := vecOf(h.ID)
		if !ok {
			return nil, fmt.Errorf("rerank threshold: hit %d %q: no vector", i, h.ID)
		}
		c, err := Cosine(queryVec, v)
		if err != nil {
			return nil, fmt.Errorf("rerank threshold: hit %d %q: %w", i, h.ID, err)
		}
		if c >= min {
			out = append(out, retrieval.Hit{ID: h.ID, Score: c})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out, nil
}
