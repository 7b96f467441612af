package web

import (
	"sort"
	"strconv"
	"strings"
)

// Metric directions: whether a larger value of a metric is an improvement.
const (
	HigherIsBetter = "higher"
	LowerIsBetter  = "lower"
	NoDirection    = "" // hyperparameters and counts: a change is neither better nor worse
)

// Changes of a metric from run A to run B, judged by its direction.
const (
	ChangeBetter = "better"
	ChangeWorse  = "worse"
	ChangeSame   = "same"
)

// lowerWords mark metrics where smaller is better (losses, perplexity, times,
// error counts); neutralWords mark logged settings and counts. Both match a
// word of the name, split at '/', '_', '-', '@' and parentheses (the metric
// may come first, "perplexity/<variant>" of eval sensitivity, or last,
// "<variant>/nDCG@10" of selflearn), so "train/loss", "eval_loss",
// "perplexity/v1", "latency_ms" and "answer_errors@5" are lower-is-better and
// "pearson(length,rougeL)" and "learning_rate" are neutral. Everything else (accuracy, F1, nDCG, Recall, BLEU, ...) is
// higher-is-better, as in HF Trainer's metric_for_best_model with
// greater_is_better left to its default for non-loss metrics.
var (
	lowerWords = map[string]bool{"loss": true, "perplexity": true, "ppl": true, "latency": true, "ms": true,
		"seconds": true, "time": true, "duration": true, "error": true, "errors": true}
	neutralWords = map[string]bool{"lr": true, "learning": true, "grad": true, "norm": true, "epoch": true,
		"step": true, "labels": true, "length": true, "pearson": true, "spearman": true, "baseline": true,
		"queries": true, "skipped": true, "count": true, "tokens": true}
)

// Direction returns HigherIsBetter, LowerIsBetter or NoDirection for a metric
// name as the run store records it ("train/loss", "nDCG@10",
// "sl-hyde/Recall@10", "learning_rate", "labels_helpful").
func Direction(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return r == '/' || r == '_' || r == '-' || r == '@' || r == '(' || r == ')' || r == ',' || r == ' ' || r == '.'
	})
	dir := HigherIsBetter
	for _, w := range words {
		switch {
		case neutralWords[w]:
			return NoDirection
		case lowerWords[w]:
			dir = LowerIsBetter
		}
	}
	return dir
}

// judge returns the change from a to b of a metric with direction dir.
func judge(dir string, a, b float64) string {
	switch {
	case dir == NoDirection:
		return ""
	case a == b:
		return ChangeSame
	case (b > a) == (dir == HigherIsBetter):
		return ChangeBetter
	default:
		return ChangeWorse
	}
}

// NamedValue is one metric's value.
type NamedValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// headlineOrder lists the metrics the runs list shows first, in order of
// preference; "@*" stands for the largest cutoff present. The names are
// those the commands record: eval retrieval (retrieval/eval), selflearn
// (variant/metric of its last round), train filter and eval filter
// (train/filtertrain EvalReport.Metrics), label runs, retriever training, eval
// answers (infer/eval/answers) and eval mcqa (MIRAGE's average per condition).
var headlineOrder = []string{
	"nDCG@10", "Recall@10", "MRR@10", "Success@10", "nDCG@*", "Recall@*", "P@*",
	"sl-hyde/nDCG@10", "sl-hyde/Recall@10", "hybrid/nDCG@10", "hyde/nDCG@10", "dense/nDCG@10",
	"valid/accuracy", "valid/f1", "train/loss",
	"accuracy", "f1", "roc_auc",
	"rag2/average/accuracy", "rag/average/accuracy", "cot/average/accuracy", // eval mcqa (infer/eval/mcqa)
	"labels_helpful", "labels_not_helpful",
	"rougeL@*", "bleu@*",
	"loss",
}

// headlineCount is how many metrics a runs list row shows.
const headlineCount = 3

// Headline picks up to three of a run's final metrics for its row in the
// runs list: the first of headlineOrder present (at most one per metric
// family, so nDCG@10 and nDCG@100 are not both shown), then other metrics
// with a direction, by name. Names compare case-insensitively.
func Headline(final map[string]float64) []NamedValue {
	lower := make(map[string]string, len(final)) // lower-cased name → name
	names := make([]string, 0, len(final))
	for n := range final {
		lower[strings.ToLower(n)] = n
		names = append(names, n)
	}
	sort.Strings(names)
	var out []NamedValue
	families := map[string]bool{}
	add := func(n string) {
		fam := strings.ToLower(n)
		if i := strings.LastIndex(fam, "@"); i >= 0 {
			fam = fam[:i]
		}
		if len(out) >= headlineCount || families[fam] {
			return
		}
		families[fam] = true
		out = append(out, NamedValue{Name: n, Value: final[n]})
	}
	for _, p := range headlineOrder {
		lp := strings.ToLower(p)
		if base, ok := strings.CutSuffix(lp, "@*"); ok {
			if n := largestCutoff(names, base); n != "" {
				add(n)
			}
		} else if n, ok := lower[lp]; ok {
			add(n)
		}
	}
	for _, n := range names {
		if Direction(n) != NoDirection {
			add(n)
		}
	}
	return out
}

// largestCutoff returns the name base@k with the largest k among names
// (base lower-cased), or "".
func largestCutoff(names []string, base string) string {
	best, bestK := "", -1
	for _, n := range names {
		b, k, ok := strings.Cut(strings.ToLower(n), "@")
		if !ok || b != base {
			continue
		}
		if v, err := strconv.Atoi(k); err == nil && v > bestK {
			best, bestK = n, v
		}
	}
	return best
}
