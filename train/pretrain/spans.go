// Package pretrain is self-supervised pretraining of a T5 checkpoint on the
// user's own corpus: T5's span-corruption objective (Raffel et al. 2020,
// "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
// Transformer", §3.1.4 and §3.3), trained with the shared optimisation loop
// of train/trainer. No weights are downloaded: the starting point is any T5
// checkpoint, usually a `ragforge models init` one.
package pretrain

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Span-corruption defaults of the T5 paper (§3.3.4: corruption rate 15%,
// mean span length 3), the values of HF
// examples/flax/language-modeling/run_t5_mlm_flax.py.
const (
	DefaultNoiseDensity   = 0.15
	DefaultMeanSpanLength = 3.0
)

// NoiseMask is random_spans_noise_mask of HF run_t5_mlm_flax.py (from
// t5.data.preprocessors): it marks round(length·density) of length
// positions as noise (at least 1 and at most length−1), grouped into
// round(min(noise, non-noise)/meanSpan) spans (at least 1). The sequence
// alternates non-noise and noise spans and always starts with non-noise;
// span lengths are a uniformly random partition into non-empty segments,
// drawn from rng. length must be ≥ 2.
func NoiseMask(length int, density, meanSpan float64, rng *rand.Rand) []bool {
	numNoise := int(math.RoundToEven(float64(length) * density))
	numNoise = min(max(numNoise, 1), length-1)
	numNonNoise := length - numNoise
	numSpans := max(int(math.RoundToEven(float64(min(numNoise, numNonNoise))/meanSpan)), 1)
	noise := segment(numNoise, numSpans, rng)
	plain := segment(numNonNoise, numSpans, rng)
	mask := make([]bool, 0, length)
	for s := range numSpans {
		for range plain[s] {
			mask = append(mask, false)
		}
		for range noise[s] {
			mask = append(mask, true)
		}
	}
	return mask
}

// segment is _random_segmentation: n items split into k non-empty segments
// at k−1 distinct cut points chosen uniformly among the n−1 gaps; it
// returns the k lengths in order. Needs 1 ≤ k ≤ n.
func segment(n, k int, rng *rand.Rand) []int {
	cut := make([]bool, n-1)
	for i := range k - 1 {
		cut[i] = true
	}
	rng.Shuffle(len(cut), func(i, j int) { cut[i], cut[j] = cut[j], cut[i] })
	lens := make([]int, 0, k)
	run := 1
	for _, c := range cut {
		if c {
			lens = append(lens, run)
			run = 0
		}
		run++
	}
	return append(lens, run)
}

// SpanCorrupt applies noise (one flag per id, NoiseMask) to ids as
// run_t5_mlm_flax.py's create_sentinel_ids + filter_input_ids do: in the
// input each noise span is replaced by one sentinel, and the target lists
// the sentinels each followed by the span it replaced; both end with eos.
// sentinels[k] is the id of <extra_id_k>, so the spans get <extra_id_0>,
// <extra_id_1>, … in order (T5's sentinels count down from the end of the
// vocabulary). Example: ids "a b c d e" with c, d noise give input
// "a b <extra_id_0> e </s>" and target "<extra_id_0> c d </s>". Errors:
// len(noise) ≠ len(ids), more spans than sentinels.
func SpanCorrupt(ids []int, noise []bool, sentinels []int, eos int) (input, target []int, err error) {
	if len(noise) != len(ids) {
		return nil, nil, fmt.Errorf("span corruption: %d noise flags for %d ids", len(noise), len(ids))
	}
	span := 0
	for i, x := range ids {
		if noise[i] {
			if i == 0 || !noise[i-1] {
				if span >= len(sentinels) {
					return nil, nil, fmt.Errorf("span corruption: more than %d noise spans in %d tokens (one sentinel each)", len(sentinels), len(ids))
				}
				input = append(input, sentinels[span])
				target = append(target, sentinels[span])
				span++
			}
			target = append(target, x)
			continue
		}
		input = append(input, x)
	}
	return append(input, eos), append(target, eos), nil
}
