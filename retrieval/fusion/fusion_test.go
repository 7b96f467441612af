package fusion

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval"
)

func ids(xs ...string) []retrieval.Hit {
	out := make([]retrieval.Hit, len(xs))
	for i, x := range xs {
		// Input scores are deliberately inverted to show RRF ignores them.
		out[i] = retrieval.Hit{ID: x, Score: float64(i)}
	}
	return out
}

type want struct {
	id    string
	score float64
}

func check(t *testing.T, got []retrieval.Hit, w []want) {
	t.Helper()
	if len(got) != len(w) {
		t.Fatalf("got %d hits %v, want %d %v", len(got), got, len(w), w)
	}
	for i := range w {
		if got[i].ID != w[i].id || math.Abs(got[i].Score-w[i].score) > 1e-15 {
			t.Errorf("hit %d = %v, want %v", i, got[i], w[i])
		}
	}
}

func TestRRF(t *testing.T) {
	dense := ids("a", "b", "c")
	bm25 := ids("b", "d", "a")
	ap := []float64{DenseWeight, BM25Weight}
	// Hand computation, c = 60:
	//   a: 0.3/61 + 0.7/63 = 0.004918 + 0.011111 = 0.016029
	//   b: 0.3/62 + 0.7/61 = 0.004839 + 0.011475 = 0.016314
	//   c: 0.3/63          = 0.004762
	//   d: 0.7/62          = 0.011290
	a := 0.3/61 + 0.7/63
	b := 0.3/62 + 0.7/61
	c := 0.3 / 63
	d := 0.7 / 62
	tests := []struct {
		name    string
		lists   [][]retrieval.Hit
		weights []float64
		k       int
		opt     Options
		want    []want
	}{
		{"AP weights, cut to k", [][]retrieval.Hit{dense, bm25}, ap, 3, Options{}, []want{{"b", b}, {"a", a}, {"d", d}}},
		{"k beyond union", [][]retrieval.Hit{dense, bm25}, ap, 10, Options{}, []want{{"b", b}, {"a", a}, {"d", d}, {"c", c}}},
		// Union, k = 2: fuse dense[:2] = a b and bm25[:2] = b d, return all 3:
		//   b 0.016314, d 0.011290, a 0.3/61 = 0.004918.
		{"paper union of top-k", [][]retrieval.Hit{dense, bm25}, ap, 2, Options{Union: true}, []want{{"b", b}, {"d", d}, {"a", 0.3 / 61}}},
		// nil weights = 1/2 each; x and y both 0.5/61 + 0.5/62: tie, x first seen.
		{"tie by first appearance", [][]retrieval.Hit{ids("x", "y"), ids("y", "x")}, nil, 2, Options{}, []want{{"x", 0.5/61 + 0.5/62}, {"y", 0.5/61 + 0.5/62}}},
		{"tie, other list first", [][]retrieval.Hit{ids("q"), ids("p")}, nil, 2, Options{}, []want{{"q", 0.5 / 61}, {"p", 0.5 / 61}}},
		// Duplicate a counts once at rank 1; b keeps its position rank 3.
		{"duplicate in a list", [][]retrieval.Hit{ids("a", "a", "b")}, []float64{1}, 5, Options{}, []want{{"a", 1.0 / 61}, {"b", 1.0 / 63}}},
		{"custom constant", [][]retrieval.Hit{ids("a", "b")}, []float64{1}, 5, Options{C: 1}, []want{{"a", 1.0 / 2}, {"b", 1.0 / 3}}},
		{"zero weight list still contributes ids", [][]retrieval.Hit{ids("a"), ids("z")}, []float64{1, 0}, 5, Options{}, []want{{"a", 1.0 / 61}, {"z", 0}}},
		{"no lists", nil, nil, 3, Options{}, []want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RRF(tt.lists, tt.weights, tt.k, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, tt.want)
		})
	}
}

func TestRRFErrors(t *testing.T) {
	l := [][]retrieval.Hit{ids("a"), ids("b")}
	tests := []struct {
		name    string
		weights []float64
		k       int
		opt     Options
		want    string
	}{
		{"k zero", nil, 0, Options{}, "k = 0"},
		{"weights mismatch", []float64{1}, 2, Options{}, "1 weights for 2 lists"},
		{"negative weight", []float64{1, -1}, 2, Options{}, "weight 1 = -1"},
		{"nan weight", []float64{math.NaN(), 1}, 2, Options{}, "weight 0 = NaN"},
		{"negative constant", nil, 2, Options{C: -1}, "C = -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RRF(l, tt.weights, tt.k, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func corpus(name string, n int) []retrieval.Hit {
	out := make([]retrieval.Hit, n)
	for i := range out {
		out[i] = retrieval.Hit{ID: fmt.Sprintf("%s%d", name, i+1), Score: float64(100 - i)}
	}
	return out
}

func TestBalanced(t *testing.T) {
	tests := []struct {
		name string
		per  map[string][]retrieval.Hit
		k    int
		want string
	}{
		// 7 over 3 corpora: quotas 3 2 2 (remainder to "p", first by name).
		{"equal share with remainder", map[string][]retrieval.Hit{"w": corpus("w", 5), "p": corpus("p", 5), "t": corpus("t", 5)}, 7, "p1 t1 w1 p2 t2 w2 p3"},
		// p holds 1 of its 3: shortfall 2 goes to t then w: quotas 1 3 3.
		{"shortfall handed on", map[string][]retrieval.Hit{"w": corpus("w", 5), "p": corpus("p", 1), "t": corpus("t", 5)}, 7, "p1 t1 w1 t2 w2 t3 w3"},
		{"fewer hits than k", map[string][]retrieval.Hit{"a": corpus("a", 1), "b": corpus("b", 2)}, 10, "a1 b1 b2"},
		// k < n: quotas 1 1 0.
		{"k below corpus count", map[string][]retrieval.Hit{"w": corpus("w", 5), "p": corpus("p", 5), "t": corpus("t", 5)}, 2, "p1 t1"},
		{"empty corpus", map[string][]retrieval.Hit{"a": nil, "b": corpus("b", 3)}, 2, "b1 b2"},
		{"k zero", map[string][]retrieval.Hit{"a": corpus("a", 3)}, 0, ""},
		{"no corpora", nil, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Balanced(tt.per, tt.k)
			var names []string
			for _, h := range got {
				names = append(names, h.ID)
			}
			if s := strings.Join(names, " "); s != tt.want {
				t.Errorf("Balanced = %q, want %q", s, tt.want)
			}
		})
	}
	// Scores are kept: p2 is the second hit of p with score 99.
	got := Balanced(map[string][]retrieval.Hit{"p": corpus("p", 2)}, 2)
	if got[1] != (retrieval.Hit{ID: "p2", Score: 99}) {
		t.Errorf("hit 1 = %v, want {p2 99}", got[1])
	}
}

func TestWeightsFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadWeights(dir); ok || err != nil {
		t.Fatalf("ReadWeights without a file = %v, %v", ok, err)
	}
	want := Weights{Dense: 0, BM25: 1, ChosenBy: "test"}
	if err := WriteWeights(dir, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadWeights(dir)
	if err != nil || !ok || got != want {
		t.Fatalf("ReadWeights = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	for _, bad := range []Weights{{Dense: -1, BM25: 1}, {Dense: 0, BM25: 0}, {Dense: math.NaN(), BM25: 1}} {
		if err := WriteWeights(dir, bad); err == nil {
			t.Errorf("WriteWeights(%+v) succeeded", bad)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), []byte(`{"dense_weight": -2, "bm25_weight": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadWeights(dir); err == nil || !strings.Contains(err.Error(), WeightsFile) {
		t.Errorf("ReadWeights of a bad file: %v, want an error naming the file", err)
	}
}
