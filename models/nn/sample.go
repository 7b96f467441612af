package nn

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Argmax is greedy decoding's choice: the index of the largest logit, the
// first one on ties (torch.argmax).
func Argmax(row []float32) int {
	best := 0
	for i, x := range row {
		if x > row[best] {
			best = i
		}
	}
	return best
}

// SampleToken draws a token from one row of logits after HF's warpers in
// HF's order, each keeping at least one token: TemperatureLogitsWarper
// (temperature ≤ 0 means 1), TopKLogitsWarper (topK ≤ 0 disables; every
// token whose logit ties the k-th largest is kept) and TopPLogitsWarper
// (topP ≤ 0 or ≥ 1 disables; the smallest set of most likely tokens whose
// mass reaches topP). One rng.Float64 per draw.
func SampleToken(row []float32, temperature float64, topK int, topP float64, rng *rand.Rand) int {
	if temperature <= 0 {
		temperature = 1
	}
	order := make([]int, len(row))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
	keep := len(order)
	if topK > 0 && topK < keep {
		kth := row[order[topK-1]]
		keep = topK
		for keep < len(order) && row[order[keep]] >= kth {
			keep++
		}
	}
	mx := float64(row[order[0]]) / temperature
	probs := make([]float64, keep)
	sum := 0.0
	for j := range keep {
		probs[j] = math.Exp(float64(row[order[j]])/temperature - mx)
		sum += probs[j]
	}
	if topP > 0 && topP < 1 {
		mass := 0.0
		for j := range keep {
			mass += probs[j] / sum
			if mass >= topP {
				keep = j + 1
				break
			}
		}
	}
	total := 0.0
	for j := range keep {
		total += probs[j]
	}
	u := rng.Float64() * total
	for j := range keep {
		u -= probs[j]
		if u < 0 {
			return order[j]
		}
	}
	return order[keep-1]
}
