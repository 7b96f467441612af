package evalrun

import "testing"

// A hybrid whose dense weight is 0 ranks by BM25 alone and is named so;
// other hybrids name their weights, other modes themselves.
func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		dense, bm25 float64
		want        string
	}{
		{"hybrid", 0, 1, "BM25 (dense weight 0)"},
		{"hybrid", 0.3, 0.7, "hybrid (dense 0.3, bm25 0.7)"},
		{"bm25", 0, 0, "bm25"},
		{"dense", 0, 0, "dense"},
	} {
		if got := Label(tc.mode, tc.dense, tc.bm25); got != tc.want {
			t.Errorf("Label(%s, %v, %v) = %q, want %q", tc.mode, tc.dense, tc.bm25, got, tc.want)
		}
	}
}
