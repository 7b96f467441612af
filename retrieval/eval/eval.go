// Package eval scores ranked retrieval runs against relevance judgments:
// Precision@k, Recall@k and F1@k (the AP paper's top-k protocol, Pires et al.
// 2025), nDCG@k, MRR@10, R-Precision and Recall@100 with pytrec_eval /
// trec_eval semantics, plus the chunk relevance rules that turn reference
// contexts into qrels, and TREC / JSONL / table writers.
package eval

import (
	"fmt"
	"math"
	"sort"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

// Run maps a query id to its ranked hits, best first.
type Run map[string][]retrieval.Hit

// Options changes how Evaluate reads a run.
type Options struct {
	// KeepOrder scores the hits in the order given. By default hits are
	// re-sorted as trec_eval does: score descending, then id descending
	// (byte-wise string comparison).
	KeepOrder bool
}

// Fixed metric names reported besides the per-k ones.
const (
	MRR10     = "MRR@10"
	RPrec     = "R-Prec"
	Recall100 = "Recall@100"
)

// Report holds per-query and mean metric values.
type Report struct {
	// Metrics lists the metric names in display order: for each k ascending
	// P@k, Recall@k, F1@k, nDCG@k; then MRR@10, R-Prec, Recall@100.
	Metrics []string `json:"metrics"`
	// Ks are the cutoffs evaluated, ascending (the requested ks plus 10).
	Ks []int `json:"ks"`
	// Mean is the arithmetic mean of each metric over Queries.
	Mean map[string]float64 `json:"mean"`
	// PerQuery maps an evaluated query id to its metric values.
	PerQuery map[string]map[string]float64 `json:"per_query"`
	// Queries are the evaluated query ids, sorted.
	Queries []string `json:"queries"`
	// Skipped are the query ids left out of every mean, sorted: run queries
	// absent from qrels and qrels queries with no judgment > 0.
	Skipped []string `json:"skipped"`
}

// PName, RecallName, F1Name and NDCGName give the metric names for cutoff k.
func PName(k int) string      { return fmt.Sprintf("P@%d", k) }
func RecallName(k int) string { return fmt.Sprintf("Recall@%d", k) }
func F1Name(k int) string     { return fmt.Sprintf("F1@%d", k) }
func NDCGName(k int) string   { return fmt.Sprintf("nDCG@%d", k) }

// Evaluate is EvaluateOptions with default Options.
func Evaluate(run Run, qrels data.Qrels, ks []int) (*Report, error) {
	return EvaluateOptions(run, qrels, ks, Options{})
}

// EvaluateOptions scores run against qrels at the cutoffs ks (10 is always
// added; duplicates are merged).
//
// Conventions (trec_eval 9.x / pytrec_eval unless stated):
//   - A document is relevant when its judgment is > 0; its nDCG gain is the
//     judgment itself (pytrec_eval ndcg_cut: gain rel, discount log2(rank+1),
//     rank from 1); ideal DCG@k ranks all judged relevant documents by
//     judgment descending and cuts at k.
//   - Duplicate ids in a query's hits count once: the first occurrence (in the
//     given order) is kept and later ones are dropped before any re-sorting
//     (trec_eval would reject the run).
//   - Hits are re-sorted by score descending, ties by id descending, unless
//     Options.KeepOrder.
//   - P@k divides by k even when fewer than k hits were returned.
//   - Recall@k = relevant in top k / all judged relevant; F1@k = 2PR/(P+R),
//     0 when P+R = 0; R-Prec = relevant in top R / R with R = number of
//     judged relevant; MRR@10 = 1/rank of the first relevant hit in the top
//     10, else 0 (MS MARCO / BEIR cutoff; trec_eval's recip_rank has none).
//   - Queries absent from qrels or with no judgment > 0 are skipped (excluded
//     from the means, listed in Report.Skipped), as pytrec_eval does. A query
//     with relevant judgments but absent from the run scores 0 on every metric
//     (trec_eval -c), so an incomplete run cannot raise the means.
//
// Errors: a cutoff k < 1, or a hit with an empty id or a NaN score.
func EvaluateOptions(run Run, qrels data.Qrels, ks []int, opt Options) (*Report, error) {
	cut := map[int]bool{10: true}
	for _, k := range ks {
		if k < 1 {
			return nil, fmt.Errorf("evaluate: cutoff %d: must be >= 1", k)
		}
		cut[k] = true
	}
	r := &Report{Mean: map[string]float64{}, PerQuery: map[string]map[string]float64{}}
	for k := range cut {
		r.Ks = append(r.Ks, k)
	}
	sort.Ints(r.Ks)
	for _, k := range r.Ks {
		r.Metrics = append(r.Metrics, PName(k), RecallName(k), F1Name(k), NDCGName(k))
	}
	r.Metrics = append(r.Metrics, MRR10, RPrec, Recall100)

	for qid, hits := range run {
		for i, h := range hits {
			if h.ID == "" {
				return nil, fmt.Errorf("evaluate: query %q: hit %d: field %q: empty", qid, i, "ID")
			}
			if math.IsNaN(h.Score) {
				return nil, fmt.Errorf("evaluate: query %q: hit %d (%s): field %q: NaN", qid, i, h.ID, "Score")
			}
		}
		if !hasRelevant(qrels[qid]) {
			r.Skipped = append(r.Skipped, qid)
		}
	}
	for qid, judged := range qrels {
		if !hasRelevant(judged) {
			if _, inRun := run[qid]; !inRun {
				r.Skipped = append(r.Skipped, qid)
			}
			continue
		}
		r.Queries = append(r.Queries, qid)
		r.PerQuery[qid] = scoreQuery(Rank(run[qid], opt.KeepOrder), judged, r.Ks)
	}
	sort.Strings(r.Queries)
	sort.Strings(r.Skipped)
	for _, m := range r.Metrics {
		sum := 0.0
		for _, q := range r.Queries {
			sum += r.PerQuery[q][m]
		}
		if n := len(r.Queries); n > 0 {
			r.Mean[m] = sum / float64(n)
		} else {
			r.Mean[m] = 0
		}
	}
	return r, nil
}

func hasRelevant(j map[string]int) bool {
	for _, v := range j {
		if v > 0 {
			return true
		}
	}
	return false
}

// Rank returns hits as Evaluate scores them: duplicate ids dropped (first
// occurrence kept), then, unless keepOrder, sorted by score descending and id
// descending (trec_eval's order). The input is not modified.
func Rank(hits []retrieval.Hit, keepOrder bool) []retrieval.Hit {
	seen := make(map[string]bool, len(hits))
	out := make([]retrieval.Hit, 0, len(hits))
	for _, h := range hits {
		if seen[h.ID] {
			continue
		}
		seen[h.ID] = true
		out = append(out, h)
	}
	if !keepOrder {
		sort.SliceStable(out, func(i, j int) bool {
			if out[i].Score != out[j].Score {
				return out[i].Score > out[j].Score
			}
			return out[i].ID > out[j].ID
		})
	}
	return out
}

func scoreQuery(ranked []retrieval.Hit, judged map[string]int, ks []int) map[string]float64 {
	var ideal []int
	for _, v := range judged {
		if v > 0 {
			ideal = append(ideal, v)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ideal)))
	nRel := len(ideal)

	// relAt[i] = number of relevant among the first i hits; dcgAt likewise.
	relAt := make([]int, len(ranked)+1)
	dcgAt := make([]float64, len(ranked)+1)
	firstRel := 0
	for i, h := range ranked {
		g := judged[h.ID]
		relAt[i+1] = relAt[i]
		dcgAt[i+1] = dcgAt[i]
		if g > 0 {
			relAt[i+1]++
			dcgAt[i+1] += float64(g) / math.Log2(float64(i+2))
			if firstRel == 0 {
				firstRel = i + 1
			}
		}
	}
	at := func(k int) int { return min(k, len(ranked)) }
	recall := func(k int) float64 { return float64(relAt[at(k)]) / float64(nRel) }

	m := map[string]float64{}
	for _, k := range ks {
		p := float64(relAt[at(k)]) / float64(k)
		rc := recall(k)
		f1 := 0.0
		if p+rc > 0 {
			f1 = 2 * p * rc / (p + rc)
		}
		idcg := 0.0
		for i := 0; i < min(k, nRel); i++ {
			idcg += float64(ideal[i]) / math.Log2(float64(i+2))
		}
		m[PName(k)] = p
		m[RecallName(k)] = rc
		m[F1Name(k)] = f1
		m[NDCGName(k)] = dcgAt[at(k)] / idcg
	}
	if firstRel > 0 && firstRel <= 10 {
		m[MRR10] = 1 / float64(firstRel)
	} else {
		m[MRR10] = 0
	}
	m[RPrec] = float64(relAt[at(nRel)]) / float64(nRel)
	m[Recall100] = recall(100)
	return m
}
