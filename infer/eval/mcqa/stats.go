package mcqa

import "math"

// z95 is the standard normal quantile Φ⁻¹(0.975).
const z95 = 1.959963984540054

// Interval is a 95% confidence interval for an accuracy.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Wilson is the Wilson score 95% interval of a proportion of k successes in
// n trials (Wilson, JASA 1927; recommended over the normal interval for
// small n and p near 0 or 1 by Brown, Cai & DasGupta, Statistical Science
// 2001): centre (p̂ + z²/2n)/(1 + z²/n), half-width
// z/(1 + z²/n)·√(p̂(1−p̂)/n + z²/4n²). n = 0 gives [0, 1].
func Wilson(k, n int) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	p, nf, z2 := float64(k)/float64(n), float64(n), z95*z95
	den := 1 + z2/nf
	c := (p + z2/(2*nf)) / den
	h := z95 / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return Interval{math.Max(0, c-h), math.Min(1, c+h)}
}

// ProportionStd is MIRAGE's "proportion std" √(acc(1−acc)/n)
// (src/evaluate.py), reported beside the interval for comparison with
// published tables.
func ProportionStd(acc float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return math.Sqrt(acc * (1 - acc) / float64(n))
}

// MeanInterval is the 95% normal interval of MIRAGE's average, the
// unweighted mean of D datasets' accuracies p_i on n_i questions: mean ±
// z·√(Σ p_i(1−p_i)/n_i)/D (independent datasets). It is the normal
// approximation, not Wilson: the mean of proportions is not a binomial
// proportion. Like every normal interval it collapses to a point when every
// accuracy is 0 or 1; the per-dataset Wilson intervals do not.
func MeanInterval(accs []float64, ns []int) Interval {
	if len(accs) == 0 {
		return Interval{0, 1}
	}
	var mean, v float64
	for i, p := range accs {
		mean += p
		if ns[i] > 0 {
			v += p * (1 - p) / float64(ns[i])
		}
	}
	d := float64(len(accs))
	mean /= d
	h := z95 * math.Sqrt(v) / d
	return Interval{math.Max(0, mean-h), math.Min(1, mean+h)}
}

// McNemar is McNemar's exact test of two conditions on the same questions
// (McNemar 1947; exact form: the binomial test on the discordant pairs,
// Fagerland, Lydersen & Laake, BMC Med Res Methodol 2013): b questions only
// the first answers correctly, c only the second; under the null each
// discordant pair goes either way with probability ½, and the two-sided p is
// min(1, 2·P(X ≤ min(b, c))), X ~ Binomial(b + c, ½). b + c = 0 gives 1.
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	m := min(b, c)
	lf := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	var tail float64
	for i := 0; i <= m; i++ {
		tail += math.Exp(lf(n) - lf(i) - lf(n-i) - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*tail)
}
