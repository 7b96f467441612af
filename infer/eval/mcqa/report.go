package mcqa

import (
	"fmt"
	"sort"
)

// DatasetScore is one condition's accuracy on one dataset.
type DatasetScore struct {
	Dataset string `json:"dataset"`
	N       int    `json:"n"`
	// Correct and Accuracy follow the run's parse mode; CI is their Wilson
	// 95% interval, Std MIRAGE's proportion std.
	Correct  int      `json:"correct"`
	Accuracy float64  `json:"accuracy"`
	CI       Interval `json:"ci95"`
	Std      float64  `json:"std"`
	// ParseFailures counts outputs the strict parser could not read, by
	// cause in FailureCauses; MIRAGEFallbacks counts outputs MIRAGE's
	// scorer read as "A" for want of a letter.
	ParseFailures   int            `json:"parse_failures"`
	FailureCauses   map[string]int `json:"failure_causes,omitempty"`
	MIRAGEFallbacks int            `json:"mirage_fallbacks"`
	// StrictAccuracy and MIRAGEAccuracy are both readings, whatever the mode.
	StrictAccuracy float64 `json:"strict_accuracy"`
	MIRAGEAccuracy float64 `json:"mirage_accuracy"`
	// LogLik holds acc and acc_norm of option log-likelihood when scored.
	LogLikAcc     *float64 `json:"loglik_acc,omitempty"`
	LogLikAccNorm *float64 `json:"loglik_acc_norm,omitempty"`
}

// FilterStats describes what the filter kept under one condition.
type FilterStats struct {
	Questions int `json:"questions"` // questions the filter ran on
	// MeanKept and MeanRetrieved are snippets per question.
	MeanKept      float64     `json:"mean_kept"`
	MeanRetrieved float64     `json:"mean_retrieved"`
	KeptCounts    map[int]int `json:"kept_counts"` // snippets kept → questions
	// NoneKept questions had every snippet dropped; NoneKeptAccuracy is the
	// accuracy on them (0 when there are none).
	NoneKept         int     `json:"none_kept"`
	NoneKeptCorrect  int     `json:"none_kept_correct"`
	NoneKeptAccuracy float64 `json:"none_kept_accuracy"`
}

// ConditionReport is one condition's row of the table.
type ConditionReport struct {
	Condition string         `json:"condition"`
	Datasets  []DatasetScore `json:"datasets"`
	// Average is MIRAGE's average: the unweighted mean of the datasets'
	// accuracies, with its normal 95% interval (MeanInterval).
	Average       float64      `json:"average"`
	AverageCI     Interval     `json:"average_ci95"`
	ParseFailures int          `json:"parse_failures"`
	Missing       int          `json:"missing"` // questions with no stored item (failed requests)
	Filter        *FilterStats `json:"filter,omitempty"`
}

// PairTest is McNemar's exact test between two conditions over the
// questions both answered: OnlyA questions only A got right, OnlyB only B.
type PairTest struct {
	A     string  `json:"a"`
	B     string  `json:"b"`
	N     int     `json:"n"`
	OnlyA int     `json:"only_a"`
	OnlyB int     `json:"only_b"`
	P     float64 `json:"p"`
}

// Report is a run's result.
type Report struct {
	Parse      string            `json:"parse"`
	Questions  map[string]int    `json:"questions"` // dataset → questions asked
	Datasets   []string          `json:"datasets"`
	Conditions []ConditionReport `json:"conditions"`
	Pairs      []PairTest        `json:"mcnemar"`
}

// correct is an item's correctness under the parse mode.
func correct(it Item, mode string) bool {
	if mode == ParseMIRAGE {
		return it.CorrectMIRAGE
	}
	return it.Correct
}

// BuildReport scores items (condition → question key → item) on datasets:
// per condition and dataset the accuracy under cfg.Parse with its Wilson
// interval, parse failures, both parsers' accuracies and option
// log-likelihood when scored; MIRAGE's average; the filter's kept counts;
// and McNemar's exact test for every pair of conditions in cfg.Conditions
// order. Questions without an item count as missing, not as wrong.
func BuildReport(cfg Config, datasets []Dataset, items map[string]map[string]Item) *Report {
	rep := &Report{Parse: cfg.Parse, Questions: map[string]int{}}
	for _, d := range datasets {
		rep.Datasets = append(rep.Datasets, d.Name)
		rep.Questions[d.Name] = len(d.Questions)
	}
	for _, cond := range cfg.Conditions {
		rep.Conditions = append(rep.Conditions, conditionReport(cond, cfg.Parse, datasets, items[cond]))
	}
	for i, a := range cfg.Conditions {
		for _, b := range cfg.Conditions[i+1:] {
			pt := PairTest{A: a, B: b}
			for _, d := range datasets {
				for _, q := range d.Questions {
					ia, okA := items[a][q.Key()]
					ib, okB := items[b][q.Key()]
					if !okA || !okB {
						continue
					}
					pt.N++
					ca, cb := correct(ia, cfg.Parse), correct(ib, cfg.Parse)
					if ca && !cb {
						pt.OnlyA++
					} else if cb && !ca {
						pt.OnlyB++
					}
				}
			}
			pt.P = McNemar(pt.OnlyA, pt.OnlyB)
			rep.Pairs = append(rep.Pairs, pt)
		}
	}
	return rep
}

func conditionReport(cond, mode string, datasets []Dataset, items map[string]Item) ConditionReport {
	cr := ConditionReport{Condition: cond}
	var accs []float64
	var ns []int
	fs := &FilterStats{KeptCounts: map[int]int{}}
	retrieved := 0
	for _, d := range datasets {
		s := datasetScore(d, mode, items, fs, &retrieved)
		cr.Missing += len(d.Questions) - s.N
		cr.ParseFailures += s.ParseFailures
		cr.Datasets = append(cr.Datasets, s)
		if s.N > 0 {
			accs, ns = append(accs, s.Accuracy), append(ns, s.N)
			cr.Average += s.Accuracy
		}
	}
	if len(accs) > 0 {
		cr.Average /= float64(len(accs))
	}
	cr.AverageCI = MeanInterval(accs, ns)
	if fs.Questions > 0 {
		fs.MeanKept /= float64(fs.Questions)
		fs.MeanRetrieved = float64(retrieved) / float64(fs.Questions)
		if fs.NoneKept > 0 {
			fs.NoneKeptAccuracy = float64(fs.NoneKeptCorrect) / float64(fs.NoneKept)
		}
		cr.Filter = fs
	}
	return cr
}

// datasetScore scores one dataset's stored items under mode, adding the
// filtered items to fs (MeanKept as a sum) and their retrieved counts to
// retrieved.
func datasetScore(d Dataset, mode string, items map[string]Item, fs *FilterStats, retrieved *int) DatasetScore {
	s := DatasetScore{Dataset: d.Name, FailureCauses: map[string]int{}}
	strict, mirage, ll, lln, nll := 0, 0, 0, 0, 0
	for _, q := range d.Questions {
		it, ok := items[q.Key()]
		if !ok {
			continue
		}
		s.N++
		s.Correct += b2i(correct(it, mode))
		strict += b2i(it.Correct)
		mirage += b2i(it.CorrectMIRAGE)
		s.MIRAGEFallbacks += b2i(it.MIRAGEFallback)
		if it.Parsed.Failure != "" {
			s.ParseFailures++
			s.FailureCauses[it.Parsed.Failure]++
		}
		if it.LogLik != nil {
			nll++
			ll += b2i(it.LogLik.Correct)
			lln += b2i(it.LogLik.CorrectNorm)
		}
		if it.Filtered {
			fs.Questions++
			fs.KeptCounts[len(it.Kept)]++
			fs.MeanKept += float64(len(it.Kept))
			*retrieved += len(it.Retrieved)
			if len(it.Kept) == 0 {
				fs.NoneKept++
				fs.NoneKeptCorrect += b2i(correct(it, mode))
			}
		}
	}
	if s.N > 0 {
		n := float64(s.N)
		s.Accuracy, s.StrictAccuracy, s.MIRAGEAccuracy = float64(s.Correct)/n, float64(strict)/n, float64(mirage)/n
	}
	s.CI, s.Std = Wilson(s.Correct, s.N), ProportionStd(s.Accuracy, s.N)
	if nll > 0 {
		a, an := float64(ll)/float64(nll), float64(lln)/float64(nll)
		s.LogLikAcc, s.LogLikAccNorm = &a, &an
	}
	if len(s.FailureCauses) == 0 {
		s.FailureCauses = nil
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Metrics are the run metrics of the report: "<condition>/<dataset>/accuracy"
// (and _low/_high, parse_failures, mirage_accuracy, loglik acc/acc_norm),
// "<condition>/average/accuracy", filter counts, and
// "mcnemar/<a>_vs_<b>/p".
func (r *Report) Metrics() map[string]float64 {
	m := map[string]float64{}
	for _, c := range r.Conditions {
		for _, d := range c.Datasets {
			p := c.Condition + "/" + d.Dataset + "/"
			m[p+"accuracy"] = d.Accuracy
			m[p+"accuracy_ci_low"] = d.CI.Low
			m[p+"accuracy_ci_high"] = d.CI.High
			m[p+"parse_failures"] = float64(d.ParseFailures)
			m[p+"mirage_accuracy"] = d.MIRAGEAccuracy
			m[p+"count"] = float64(d.N)
			if d.LogLikAcc != nil {
				m[p+"loglik_acc"], m[p+"loglik_acc_norm"] = *d.LogLikAcc, *d.LogLikAccNorm
			}
		}
		m[c.Condition+"/average/accuracy"] = c.Average
		if f := c.Filter; f != nil {
			m[c.Condition+"/filter/mean_kept"] = f.MeanKept
			m[c.Condition+"/filter/none_kept_count"] = float64(f.NoneKept)
			m[c.Condition+"/filter/none_kept_accuracy"] = f.NoneKeptAccuracy
		}
	}
	for _, p := range r.Pairs {
		m[fmt.Sprintf("mcnemar/%s_vs_%s/p", p.A, p.B)] = p.P
	}
	return m
}

// KeptCountsSorted returns the filter's kept counts as (kept, questions)
// pairs by kept.
func (f *FilterStats) KeptCountsSorted() [][2]int {
	var out [][2]int
	for k, n := range f.KeptCounts {
		out = append(out, [2]int{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
