package sensitivity

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Pearson is the sample Pearson correlation r = Σ(x-x̄)(y-ȳ) /
// sqrt(Σ(x-x̄)² Σ(y-ȳ)²) (scipy.stats.pearsonr). Errors: different lengths,
// fewer than 2 points, a constant x or y (r undefined), a non-finite value.
func Pearson(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("pearson: %d x values but %d y values", len(x), len(y))
	}
	if len(x) < 2 {
		return 0, fmt.Errorf("pearson: %d points, need at least 2", len(x))
	}
	var mx, my float64
	for i := range x {
		if math.IsNaN(x[i]) || math.IsInf(x[i], 0) || math.IsNaN(y[i]) || math.IsInf(y[i], 0) {
			return 0, fmt.Errorf("pearson: point %d: non-finite value (%v, %v)", i, x[i], y[i])
		}
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, errors.New("pearson: constant input, correlation undefined")
	}
	r := sxy / math.Sqrt(sxx*syy)
	return math.Max(-1, math.Min(1, r)), nil
}

// Ranks returns 1-based ranks of xs, ties given their average rank
// (scipy.stats.rankdata method="average").
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// Spearman is Spearman's rho: the Pearson correlation of the average ranks
// (scipy.stats.spearmanr). Errors as Pearson.
func Spearman(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("spearman: %d x values but %d y values", len(x), len(y))
	}
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) {
			return 0, fmt.Errorf("spearman: point %d: NaN", i)
		}
	}
	r, err := Pearson(Ranks(x), Ranks(y))
	if err != nil {
		return 0, fmt.Errorf("spearman: %w", err)
	}
	return r, nil
}
