package filter

import (
	"fmt"
	"math"
)

// Aggregation rules of window probabilities into one per instruction. The
// empty rule means AggregateMax, the default of RAG²'s evaluation.
const (
	AggregateMax   = "max"   // highest P(helpful) over the windows (default)
	AggregateMean  = "mean"  // mean P(helpful)
	AggregateFirst = "first" // the first window only (plain truncation)
)

// CheckAggregate returns an error for a rule other than "", max, mean and
// first; configurations call it when they are validated.
func CheckAggregate(rule string) error {
	switch rule {
	case "", AggregateMax, AggregateMean, AggregateFirst:
		return nil
	}
	return fmt.Errorf("aggregate %q: want %s, %s or %s", rule, AggregateMax, AggregateMean, AggregateFirst)
}

// Aggregate combines window probabilities p (one per window, p[i] of
// wins[i]) into one per instruction, n of them, by rule, and returns the
// number of windows of each. An instruction without windows gets 0. Errors:
// an unknown rule (CheckAggregate).
func Aggregate(wins []Window, p []float64, n int, rule string) ([]float64, []int, error) {
	if err := CheckAggregate(rule); err != nil {
		return nil, nil, err
	}
	out := make([]float64, n)
	count := make([]int, n)
	for i, w := range wins {
		e := w.Example
		switch {
		case count[e] == 0:
			out[e] = p[i]
		case rule == AggregateMean:
			out[e] += p[i]
		case rule == AggregateFirst:
		default:
			out[e] = math.Max(out[e], p[i])
		}
		count[e]++
	}
	if rule == AggregateMean {
		for e := range out {
			if count[e] > 0 {
				out[e] /= float64(count[e])
			}
		}
	}
	return out, count, nil
}
