package evalrun

import (
	"fmt"

	"github.com/ragforge/ragforge/retrieval/search"
)

// Label names a retrieval setting for summaries: a hybrid whose dense
// weight is 0 ranks by BM25 alone and says so.
func Label(mode string, denseWeight, bm25Weight float64) string {
	if mode == string(search.Hybrid) {
		if denseWeight == 0 {
			return "BM25 (dense weight 0)"
		}
		return fmt.Sprintf("hybrid (dense %.2g, bm25 %.2g)", denseWeight, bm25Weight)
	}
	return mode
}
