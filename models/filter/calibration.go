package filter

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// CalibrationKey is the config.json key of a filter checkpoint whose
// P([HELPFUL]) is recalibrated (Calibration, as JSON). transformers keeps it
// as a config attribute; a checkpoint without it reports the T5's own
// probability.
const CalibrationKey = "ragforge_filter_calibration"

// The features a Calibration combines, each a number per instruction.
const (
	// FeatureLogOdds is log(p / (1 − p)) of the T5's P([HELPFUL]), p
	// clipped to [1e-7, 1 − 1e-7]: alone, Platt scaling.
	FeatureLogOdds = "log_odds"
	// FeatureCoverage is the IDF-weighted share of the question's words
	// (MinChars letters or more, compared by their first PrefixChars) found
	// in the evidence, in [0, 1]; IDF is log((N + 1) / (df + 0.5)) over
	// DocFreq, BM25's smoothing.
	FeatureCoverage = "coverage"
	// FeatureLevelSum is the sum of the evidence words' match levels
	// (MatchMarks' rule with PrefixChars, MinChars and MaxRun, no rarity)
	// divided by 50, so that its weight is of the others' size under the
	// fit's L2 penalty.
	FeatureLevelSum = "level_sum"
)

// CalibrationFeatures lists the features in the order Check accepts them.
var CalibrationFeatures = []string{FeatureLogOdds, FeatureCoverage, FeatureLevelSum}

// levelSumScale divides FeatureLevelSum (see there).
const levelSumScale = 50

// Calibration maps the T5's P([HELPFUL]) and two label-free word-overlap
// scores of the instruction to a calibrated P([HELPFUL]) =
// σ(Weights[0] + Σ Weights[i+1]·feature_i): logistic regression stacked on
// the classifier (Platt, 1999, "Probabilistic outputs for support vector
// machines", with features added as in Wolpert's stacking, 1992), fitted
// on labeled examples the T5 was not trained on (train/filtertrain.Calibrate).
// The word scores are DrQA's exact match (Chen et al., 2017) and the
// question's IDF-weighted coverage: a random T5 trained on ICT examples
// reads the first but not how much of its question an evidence covers
// (docs/recipes.md, "Filter: calibration with word-overlap features").
type Calibration struct {
	Features    []string  `json:"features"`     // names from CalibrationFeatures, each once, in that order
	Weights     []float64 `json:"weights"`      // intercept, then one per feature
	PrefixChars int       `json:"prefix_chars"` // word key length for coverage and level_sum (5; 0: whole words)
	MinChars    int       `json:"min_chars"`    // shortest question word counted, shortest single matched word (3)
	MaxRun      int       `json:"max_run"`      // level cap (5)
	// DocFreq counts every word key over the distinct evidence texts the
	// coverage IDF is taken from; needed with FeatureCoverage.
	DocFreq *DocFreq `json:"doc_freq,omitempty"`
}

// Check returns an error naming the first field that makes no sense.
func (c Calibration) Check() error {
	if err := CheckCalibrationFeatures(c.Features); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	if len(c.Weights) != len(c.Features)+1 {
		return fmt.Errorf("calibration: %d weights for %d features, want the intercept and one per feature", len(c.Weights), len(c.Features))
	}
	for i, w := range c.Weights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("calibration: weight %d is %v", i, w)
		}
	}
	switch {
	case c.PrefixChars < 0:
		return fmt.Errorf("calibration: prefix_chars %d, want ≥ 0 (0 compares whole words)", c.PrefixChars)
	case c.MinChars < 1:
		return fmt.Errorf("calibration: min_chars %d, want ≥ 1", c.MinChars)
	case c.MaxRun < 1:
		return fmt.Errorf("calibration: max_run %d, want ≥ 1", c.MaxRun)
	case slices.Contains(c.Features, FeatureCoverage) && (c.DocFreq == nil || c.DocFreq.Docs < 1):
		return fmt.Errorf("calibration: feature %q needs doc_freq with docs ≥ 1", FeatureCoverage)
	}
	return nil
}

// CheckCalibrationFeatures returns an error unless features holds names of
// CalibrationFeatures, at least one, each once, in that order.
func CheckCalibrationFeatures(features []string) error {
	if len(features) == 0 {
		return fmt.Errorf("no features, want some of %s", strings.Join(CalibrationFeatures, ", "))
	}
	last := -1
	for _, f := range features {
		i := slices.Index(CalibrationFeatures, f)
		switch {
		case i < 0:
			return fmt.Errorf("feature %q, want %s", f, strings.Join(CalibrationFeatures, ", "))
		case i <= last:
			return fmt.Errorf("features %v, want each once in the order %s", features, strings.Join(CalibrationFeatures, ", "))
		}
		last = i
	}
	return nil
}

// DefaultCalibration is the uncalibrated shape `calibrate filter` fits:
// every feature, words by their first 5 letters (chosen on the AP training
// questions, docs/recipes.md), weights still to fit.
func DefaultCalibration() Calibration {
	return Calibration{Features: slices.Clone(CalibrationFeatures), PrefixChars: 5, MinChars: 3, MaxRun: 5}
}

// CountDocFreq counts, over the distinct texts of evidences, the documents
// holding each word key (words compared as the calibration's PrefixChars).
func (c Calibration) CountDocFreq(evidences []string) *DocFreq {
	d := &DocFreq{Counts: map[string]int{}}
	seen := map[string]bool{}
	for _, e := range evidences {
		if seen[e] {
			continue
		}
		seen[e] = true
		d.Docs++
		in := map[string]bool{}
		for _, w := range words(e, c.PrefixChars) {
			if !in[w.key] {
				in[w.key] = true
				d.Counts[w.key]++
			}
		}
	}
	return d
}

// FeatureValues returns c.Features' values for an instruction whose T5
// gave pHelpful. Errors: an instruction that is not RAG²'s.
func (c Calibration) FeatureValues(pHelpful float64, instruction string) ([]float64, error) {
	evidence, question, err := ParseInstruction(strings.TrimSpace(instruction))
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	ev, q := words(evidence, c.PrefixChars), words(question, c.PrefixChars)
	out := make([]float64, len(c.Features))
	for i, f := range c.Features {
		switch f {
		case FeatureLogOdds:
			p := min(max(pHelpful, 1e-7), 1-1e-7)
			out[i] = math.Log(p / (1 - p))
		case FeatureCoverage:
			out[i] = c.coverage(ev, q)
		case FeatureLevelSum:
			sum := 0
			for _, l := range matchLevels(ev, q, c.MinChars, c.MaxRun) {
				sum += l
			}
			out[i] = float64(sum) / levelSumScale
		}
	}
	return out, nil
}

func (c Calibration) coverage(ev, q []word) float64 {
	in := map[string]bool{}
	for _, w := range ev {
		in[w.key] = true
	}
	asked := map[string]bool{}
	var found, total float64
	for _, w := range q {
		if w.runes < c.MinChars || asked[w.key] {
			continue
		}
		asked[w.key] = true
		idf := math.Log((float64(c.DocFreq.Docs) + 1) / (float64(c.DocFreq.Counts[w.key]) + 0.5))
		total += idf
		if in[w.key] {
			found += idf
		}
	}
	if total <= 0 {
		return 0
	}
	return found / total
}

// Apply returns the calibrated P([HELPFUL]) of an instruction whose T5
// gave pHelpful. Errors: FeatureValues'.
func (c Calibration) Apply(pHelpful float64, instruction string) (float64, error) {
	x, err := c.FeatureValues(pHelpful, instruction)
	if err != nil {
		return 0, err
	}
	return Sigmoid(Logit(c.Weights, x)), nil
}

// Logit is w[0] + Σ w[i+1]·x[i].
func Logit(w, x []float64) float64 {
	z := w[0]
	for i, v := range x {
		z += w[i+1] * v
	}
	return z
}

// Sigmoid is 1 / (1 + e^−z).
func Sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// CalibrationOf returns the calibration recorded under CalibrationKey in a
// checkpoint's config.json (raw is that key's JSON, ok whether it was
// there); nil when it was not. Errors: a value that does not decode or
// fails Check, naming the key.
func CalibrationOf(raw json.RawMessage, ok bool) (*Calibration, error) {
	return configValue[Calibration](raw, ok, CalibrationKey)
}

// configValue decodes the config.json value raw of key (ok: whether the
// file had it) strictly, unknown fields refused, and checks it; nil when
// the key was absent. Errors name the key.
func configValue[T any, P interface {
	*T
	Check() error
}](raw json.RawMessage, ok bool, key string) (*T, error) {
	if !ok {
		return nil, nil
	}
	var v T
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("config.json: field %q: %w", key, err)
	}
	if err := P(&v).Check(); err != nil {
		return nil, fmt.Errorf("config.json: field %q: %w", key, err)
	}
	return &v, nil
}
