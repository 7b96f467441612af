package lm

import (
	"errors"
	"fmt"
	"math"
)

// Perplexity is exp(-mean(logprobs)) over natural-log token probabilities
// (HF convention: exp of the mean token cross-entropy). Errors: no tokens, or a
// NaN / +Inf log-probability.
func Perplexity(logprobs []float64) (float64, error) {
	if len(logprobs) == 0 {
		return 0, errors.New("perplexity of zero tokens")
	}
	var sum float64
	for i, lp := range logprobs {
		if math.IsNaN(lp) || math.IsInf(lp, 1) {
			return 0, fmt.Errorf("token %d: log-probability %v", i, lp)
		}
		sum += lp
	}
	return math.Exp(-sum / float64(len(logprobs))), nil
}
