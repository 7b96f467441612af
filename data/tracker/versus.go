package tracker

// Versus puts a learned model's metric next to its baseline (the majority
// class, chance, round 0, BM25), so a reader sees whether training did
// anything.
type Versus struct {
	Model    string  `json:"model"`
	Metric   string  `json:"metric"`
	Learned  float64 `json:"learned"`
	Baseline string  `json:"baseline"`
	Value    float64 `json:"baseline_value"`
}

// Diff is learned − baseline.
func (v Versus) Diff() float64 { return v.Learned - v.Value }
