package answers

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/ragforge/ragforge/data"
)

// Lexical metric names (besides Faithfulness, AnswerRelevance,
// ContextRecall). BLEU is the corpus BLEU of all answers at one K;
// SentenceBLEU the mean of per-item sentence BLEU.
const (
	MetricBLEU         = "bleu"
	MetricSentenceBLEU = "sentence_bleu"
	MetricROUGE1       = "rouge1"
	MetricROUGE2       = "rouge2"
	MetricROUGEL       = "rougeL"
	MetricAnswer       = "answer" // errors only: answer generation failed
	MetricRetrieve     = "retrieve"
)

// ItemKind is the runs item kind of per-(question, K) rows; keys are
// ItemKey(queryID, K).
const ItemKind = "answer"

// ItemKey is "<query id>/K<k>".
func ItemKey(queryID string, k int) string { return fmt.Sprintf("%s/K%d", queryID, k) }

// MetricName is the run metric name of metric at depth k: "<metric>@<k>",
// e.g. "faithfulness@3"; error counts are "<metric>_errors@<k>".
func MetricName(metric string, k int) string { return fmt.Sprintf("%s@%d", metric, k) }

// Recorder stores per-item rows and metrics; *tracker.Run implements it.
type Recorder interface {
	PutItem(kind, key string, v any) error
	LogMetrics(values map[string]float64, step int) error
}

// Config configures Run.
type Config struct {
	// Ks are the context depths: the answer for K sees the first K
	// retrieved contexts. Default 1, 2, 3, 4, 5.
	Ks    []int        `json:"ks"`
	BLEU  BLEUOptions  `json:"bleu"`
	ROUGE ROUGEOptions `json:"rouge"`
}

// DefaultKs are the context depths of the issue: 1..5.
func DefaultKs() []int { return []int{1, 2, 3, 4, 5} }

// Item is the stored row of one question at one K. Metric pointers are nil
// when the metric was not computed (no judge) or failed; Errors then names
// the failure per metric.
type Item struct {
	QueryID   string   `json:"query_id"`
	K         int      `json:"k"`
	Question  string   `json:"question"`
	Reference string   `json:"reference"`
	Contexts  []string `json:"contexts"`
	Answer    string   `json:"answer"`

	SentenceBLEU    *float64 `json:"sentence_bleu,omitempty"`
	ROUGE1          *float64 `json:"rouge1,omitempty"`
	ROUGE2          *float64 `json:"rouge2,omitempty"`
	ROUGEL          *float64 `json:"rougeL,omitempty"`
	Faithfulness    *float64 `json:"faithfulness,omitempty"`
	AnswerRelevance *float64 `json:"answer_relevance,omitempty"`
	ContextRecall   *float64 `json:"context_recall,omitempty"`

	// Errors maps a metric name (or "answer", "retrieve") to its error.
	Errors map[string]string `json:"errors,omitempty"`
	// Judge holds every judge request of the item, in order.
	Judge []Call `json:"judge,omitempty"`
}

// KReport summarizes one depth K.
type KReport struct {
	K int `json:"k"`
	// BLEU is the corpus BLEU of the answered items (sacreBLEU corpus_bleu).
	BLEU BLEUScore `json:"bleu"`
	// Means maps each metric to its mean over the items where it succeeded
	// (never NaN: a metric with no success is absent).
	Means map[string]float64 `json:"means"`
	// Counts maps each metric to the number of items in its mean.
	Counts map[string]int `json:"counts"`
	// Errors maps a metric (or "answer", "retrieve") to its failure count.
	Errors map[string]int `json:"errors"`
	// ErrorKinds maps "<metric>/<kind>" (kind ErrRequest, ErrParse,
	// ErrEncode) to counts, for judged metrics.
	ErrorKinds map[string]int `json:"error_kinds"`
	// ErrorCauses maps each failure's cause (ErrorCause: "timeout",
	// "unreachable", "http_503", "malformed_json", "refusal",
	// "missing_field", ...) to its count, over all metrics.
	ErrorCauses map[string]int `json:"error_causes"`
}

// Report is Run's result: one KReport per K, in Config.Ks order.
type Report struct {
	Queries int       `json:"queries"`
	PerK    []KReport `json:"per_k"`
}

// RetrieveFunc returns the retrieved contexts for a query, best first; Run
// calls it once per query and uses the first K for depth K (fewer when
// fewer are returned).
type RetrieveFunc func(ctx context.Context, q data.Query) ([]string, error)

// Run answers every query at each depth K and scores the answers: sentence
// BLEU and ROUGE-1/2/L against q.Answer for every item, corpus BLEU per K,
// and, when judge is not nil, faithfulness, answer relevance (when
// judge.Embedder is set) and context recall (when q.Answer is not empty).
// Every item is stored through rec (ItemKind, ItemKey) as soon as it is
// scored, and the per-K means and error counts are logged as metrics
// (MetricName) at step 0 at the end. progress, when set, is told
// (done, total) items after each one.
//
// Failures of retrieval, answering or judging are per-item errors: counted
// in the report, recorded in the item, left out of means; the run goes on.
// Errors returned: an invalid K, a Recorder failure, the context's
// cancellation.
func Run(ctx context.Context, cfg Config, queries []data.Query, retrieve RetrieveFunc, answerer Answerer, judge *Judge, rec Recorder, progress func(done, total int)) (*Report, error) {
	ks := cfg.Ks
	if len(ks) == 0 {
		ks = DefaultKs()
	}
	for _, k := range ks {
		if k <= 0 {
			return nil, fmt.Errorf("answers: config: field %q: K must be > 0, got %d", "Ks", k)
		}
	}
	if _, err := BLEU(nil, nil, cfg.BLEU); err != nil {
		return nil, fmt.Errorf("answers: config: %w", err)
	}
	rep := &Report{Queries: len(queries), PerK: make([]KReport, len(ks))}
	sums := make([]map[string]float64, len(ks))
	hyps := make([][]string, len(ks))
	refs := make([][]string, len(ks))
	for i, k := range ks {
		rep.PerK[i] = KReport{K: k, Means: map[string]float64{}, Counts: map[string]int{}, Errors: map[string]int{}, ErrorKinds: map[string]int{}, ErrorCauses: map[string]int{}}
		sums[i] = map[string]float64{}
	}
	total, done := len(queries)*len(ks), 0
	for _, q := range queries {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		contexts, rerr := retrieve(ctx, q)
		for i, k := range ks {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			kr := &rep.PerK[i]
			it := Item{QueryID: q.ID, K: k, Question: q.Text, Reference: q.Answer, Errors: map[string]string{}}
			if rerr != nil {
				it.Errors[MetricRetrieve] = rerr.Error()
				kr.Errors[MetricRetrieve]++
				kr.ErrorCauses[MetricRetrieve]++
			} else {
				it.Contexts = contexts[:min(k, len(contexts))]
				scoreItem(ctx, cfg, &it, answerer, judge, kr, sums[i])
				if _, failed := it.Errors[MetricAnswer]; !failed {
					hyps[i] = append(hyps[i], it.Answer)
					refs[i] = append(refs[i], q.Answer)
				}
			}
			if err := ctx.Err(); err != nil {
				return rep, err // a cancelled item is not stored as failed
			}
			if len(it.Errors) == 0 {
				it.Errors = nil
			}
			if err := rec.PutItem(ItemKind, ItemKey(q.ID, k), it); err != nil {
				return rep, fmt.Errorf("answers: store item %s: %w", ItemKey(q.ID, k), err)
			}
			done++
			if progress != nil {
				progress(done, total)
			}
		}
	}
	metrics := map[string]float64{}
	for i := range ks {
		kr := &rep.PerK[i]
		for m, s := range sums[i] {
			kr.Means[m] = s / float64(kr.Counts[m])
		}
		if len(hyps[i]) > 0 {
			b, err := BLEU(hyps[i], refs[i], cfg.BLEU)
			if err != nil {
				return rep, err
			}
			kr.BLEU = b
			kr.Means[MetricBLEU] = b.Score
			kr.Counts[MetricBLEU] = len(hyps[i])
		}
		for m, v := range kr.Means {
			metrics[MetricName(m, kr.K)] = v
		}
		for m, n := range kr.Errors {
			metrics[MetricName(m+"_errors", kr.K)] = float64(n)
		}
	}
	if err := rec.LogMetrics(metrics, 0); err != nil {
		return rep, fmt.Errorf("answers: log metrics: %w", err)
	}
	return rep, nil
}

// scoreItem answers and scores one item, updating the K report.
func scoreItem(ctx context.Context, cfg Config, it *Item, answerer Answerer, judge *Judge, kr *KReport, sums map[string]float64) {
	add := func(metric string, v float64, dst **float64) {
		*dst = &v
		sums[metric] += v
		kr.Counts[metric]++
	}
	fail := func(metric string, err error) {
		it.Errors[metric] = err.Error()
		kr.Errors[metric]++
		kr.ErrorCauses[ErrorCause(err)]++
		var je *JudgeError
		if errors.As(err, &je) {
			kr.ErrorKinds[metric+"/"+je.Kind]++
		}
	}
	ans, err := answerer.Answer(ctx, it.Question, it.Contexts)
	if err != nil {
		fail(MetricAnswer, err)
		return
	}
	it.Answer = ans
	if sb, err := SentenceBLEU(ans, it.Reference, cfg.BLEU); err == nil {
		add(MetricSentenceBLEU, sb.Score, &it.SentenceBLEU)
	} else {
		fail(MetricSentenceBLEU, err)
	}
	r := ROUGEWith(ans, it.Reference, cfg.ROUGE)
	add(MetricROUGE1, r.R1, &it.ROUGE1)
	add(MetricROUGE2, r.R2, &it.ROUGE2)
	add(MetricROUGEL, r.RL, &it.ROUGEL)
	if judge == nil {
		return
	}
	v, c, err := judge.Faithfulness(ctx, it.Question, ans, it.Contexts)
	it.Judge = append(it.Judge, c)
	if err != nil {
		fail(Faithfulness, err)
	} else {
		add(Faithfulness, v, &it.Faithfulness)
	}
	if judge.Embedder != nil {
		v, c, err := judge.AnswerRelevance(ctx, it.Question, ans)
		it.Judge = append(it.Judge, c)
		if err != nil {
			fail(AnswerRelevance, err)
		} else {
			add(AnswerRelevance, v, &it.AnswerRelevance)
		}
	}
	if it.Reference != "" {
		v, c, err := judge.ContextRecall(ctx, it.Question, it.Reference, it.Contexts)
		it.Judge = append(it.Judge, c)
		if err != nil {
			fail(ContextRecall, err)
		} else {
			add(ContextRecall, v, &it.ContextRecall)
		}
	}
}

// SortedMetrics returns the metric names of a KReport's Means, sorted.
func (k KReport) SortedMetrics() []string {
	out := make([]string, 0, len(k.Means))
	for m := range k.Means {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
