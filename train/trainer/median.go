package trainer

// Median of sorted xs (the mean of the two middle values for an even
// count): the per-step time the benchmarks report, as the PyTorch peer
// benchmark does.
func Median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
