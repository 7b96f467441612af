package lm

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPerplexity(t *testing.T) {
	for _, tc := range []struct {
		lp   []float64
		want float64
		err  bool
	}{
		{[]float64{-math.Ln2}, 2, false},
		{[]float64{0, 0}, 1, false},
		{[]float64{-1, -3}, math.Exp(2), false},      // mean -2
		{[]float64{-0.2, -0.8}, 1.6487212707, false}, // e^0.5
		{nil, 0, true},
		{[]float64{-1, math.NaN()}, 0, true},
		{[]float64{math.Inf(1)}, 0, true},
	} {
		got, err := Perplexity(tc.lp)
		if (err != nil) != tc.err || !near(got, tc.want, 1e-9) {
			t.Errorf("Perplexity(%v) = %v, %v; want %v (error %v)", tc.lp, got, err, tc.want, tc.err)
		}
	}
}
