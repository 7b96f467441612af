package selflearn

import "github.com/ragforge/ragforge/retrieval"

// RankOf is the 1-based position of id in hits, or len(hits)+1 when absent
// (Eq. 4: the rank of the true document among D for a candidate query).
func RankOf(hits []retrieval.Hit, id string) int {
	for i, h := range hits {
		if h.ID == id {
			return i + 1
		}
	}
	return len(hits) + 1
}

// SelectBest returns the index of the lowest rank (Eq. 5, d* = argmin rank),
// the first one on ties, or -1 for no ranks.
func SelectBest(ranks []int) int {
	best := -1
	for i, r := range ranks {
		if best < 0 || r < ranks[best] {
			best = i
		}
	}
	return best
}
