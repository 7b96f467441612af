package nn

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestArgmaxFirstOnTies(t *testing.T) {
	if got := Argmax([]float32{0, 3, 1, 3}); got != 1 {
		t.Fatalf("Argmax = %d, want 1 (first of the tied maxima)", got)
	}
}

// Each warper must keep exactly the allowed tokens: 2000 draws see all of
// them and nothing else.
func TestSampleTokenWarpers(t *testing.T) {
	row := []float32{0, 3, 1, 3, 2}
	cases := []struct {
		name        string
		temperature float64
		topK        int
		topP        float64
		allow       []int
	}{
		{"no warper", 1, 0, 0, []int{0, 1, 2, 3, 4}},
		{"top_k 2 keeps ties", 1, 2, 0, []int{1, 3}},
		{"top_k 1 keeps the tie", 1, 1, 0, []int{1, 3}},
		{"top_k 3", 1, 3, 0, []int{1, 3, 4}},
		{"top_p 0.5", 1, 0, 0.5, []int{1, 3}},
		{"top_p 0.9 after top_k 3", 1, 3, 0.9, []int{1, 3, 4}},
		{"cold temperature", 1e-3, 3, 0, []int{1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[int]bool{}
			rng := rand.New(rand.NewPCG(1, 2))
			for range 2000 {
				seen[SampleToken(row, tc.temperature, tc.topK, tc.topP, rng)] = true
			}
			for id := range seen {
				if !slices.Contains(tc.allow, id) {
					t.Fatalf("sampled %d, allowed %v", id, tc.allow)
				}
			}
			if len(seen) != len(tc.allow) {
				t.Fatalf("sampled %v, want every one of %v", seen, tc.allow)
			}
		})
	}
}
