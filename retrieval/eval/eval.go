// Package eval scores ranked retrieval runs against relevance judgments:
// Precision@k, Recall@k and F1@k (the AP paper's top-k protocol, Pires et al.
// 2025), Success@k (hit rate, the figure the AP paper's table reports as
// recall), nDCG@k, MRR@k, MAP, R-Precision, Recall@100 and Recall@1000 with
// pytrec_eval / trec_eval semantics, plus the chunk relevance rules that
// turn reference contexts into qrels, and TREC run / qrels / JSONL / table
// writers.
package eval

import (
	"context"
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
	// Queries, when non-nil, is the query set that was run: only qrels
	// queries in it are evaluated (a judged query of the set that the run
	// lacks still scores 0). Nil evaluates every judged query of qrels, as
	// trec_eval -c does. CheckQrels reports qrels ids outside the set.
	Queries []string
}

// Fixed metric names reported besides the per-k ones.
const (
	MRR10      = "MRR@10"
	MAP        = "MAP"
	RPrec      = "R-Prec"
	Recall100  = "Recall@100"
	Recall1000 = "Recall@1000"
)

// Report holds per-query and mean metric values.
type Report struct {
	// Metrics lists the metric names in display order: for each k ascending
	// P@k, Recall@k, Success@k, F1@k, nDCG@k, MRR@k; then MAP, R-Prec,
	// Recall@100, Recall@1000.
	Metrics []string `json:"metrics"`
	// Ks are the cutoffs evaluated, ascending (the requested ks plus 10).
	Ks []int `json:"ks"`
	// Mean is the arithmetic mean of each metric over all Queries: a
	// question without any judgment (Unjudged) is a miss scoring 0, as the
	// AP paper's protocol divides by every question.
	Mean map[string]float64 `json:"mean"`
	// MeanJudged is the mean over Judged only: what trec_eval -c prints for
	// the run and qrels.tsv (a query absent from qrels does not exist for
	// trec_eval). Mean = MeanJudged × len(Judged) / len(Queries).
	MeanJudged map[string]float64 `json:"mean_judged"`
	// PerQuery maps every query id of Queries to its metric values (all 0
	// for an unjudged one).
	PerQuery map[string]map[string]float64 `json:"per_query"`
	// Queries are all the questions given, sorted: Options.Queries, or
	// (when nil) every query of qrels and of the run.
	Queries []string `json:"queries"`
	// Judged are the queries with at least one judgment; Unjudged those
	// with none (no relevant chunk found, judgments {}), both sorted.
	Judged   []string `json:"judged"`
	Unjudged []string `json:"unjudged"`
	// Fill, when the caller sets it (NewFill), records how many hits each
	// query got; Table and WritePerQueryJSONL then report the shortfall.
	Fill *Fill `json:"fill,omitempty"`
}

// PName, RecallName, SuccessName, F1Name, NDCGName and MRRName give the
// metric names for cutoff k.
func PName(k int) string       { return fmt.Sprintf("P@%d", k) }
func RecallName(k int) string  { return fmt.Sprintf("Recall@%d", k) }
func SuccessName(k int) string { return fmt.Sprintf("Success@%d", k) }
func F1Name(k int) string      { return fmt.Sprintf("F1@%d", k) }
func NDCGName(k int) string    { return fmt.Sprintf("nDCG@%d", k) }
func MRRName(k int) string     { return fmt.Sprintf("MRR@%d", k) }

// Evaluate is EvaluateOptions with default Options.
func Evaluate(run Run, qrels data.Qrels, ks []int) (*Report, error) {
	return EvaluateOptions(run, qrels, ks, Options{})
}

// EvaluateOptions scores run against qrels at the cutoffs ks (10 is always
// added; duplicates are merged).
//
// Conventions (trec_eval 9.x/10.0 and pytrec_eval unless stated):
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
//   - Recall@k = relevant in top k / all judged relevant; Success@k = 1 when
//     a relevant document is in the top k, else 0 (trec_eval success.k, the
//     hit rate); F1@k = 2PR/(P+R), 0 when P+R = 0; MRR@k = 1/rank of the
//     first relevant hit when it is in the top k, else 0 (MS MARCO / BEIR;
//     trec_eval's recip_rank has no cutoff); MAP = Σ over relevant retrieved
//     of precision at its rank / all judged relevant (trec_eval map, over
//     every hit given); R-Prec = relevant in top R / R with R = number of
//     judged relevant.
//   - A query is judged when qrels holds at least one judgment for it. A
//     judged query with no judgment > 0 scores 0 on every metric and counts
//     in the means (trec_eval, pytrec_eval: 0/0 is 0). A judged query absent
//     from the run also scores 0 (trec_eval -c), so an incomplete run cannot
//     raise the means. A question without judgments (no relevant chunk was
//     found, or its judgments are {}) scores 0 too and counts in Mean; it
//     is left out of MeanJudged only, the figure trec_eval -c gives.
//   - With Options.Queries, only queries of that set are evaluated.
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
	r := &Report{PerQuery: map[string]map[string]float64{}}
	for k := range cut {
		r.Ks = append(r.Ks, k)
	}
	sort.Ints(r.Ks)
	for _, k := range r.Ks {
		r.Metrics = append(r.Metrics, PName(k), RecallName(k), SuccessName(k), F1Name(k), NDCGName(k), MRRName(k))
	}
	r.Metrics = append(r.Metrics, MAP, RPrec, Recall100, Recall1000)

	for qid, hits := range run {
		for i, h := range hits {
			if h.ID == "" {
				return nil, fmt.Errorf("evaluate: query %q: hit %d: field %q: empty", qid, i, "ID")
			}
			if math.IsNaN(h.Score) {
				return nil, fmt.Errorf("evaluate: query %q: hit %d (%s): field %q: NaN", qid, i, h.ID, "Score")
			}
		}
	}
	given := map[string]bool{}
	if opt.Queries != nil {
		for _, q := range opt.Queries {
			given[q] = true
		}
	} else {
		for q := range qrels {
			given[q] = true
		}
		for q := range run {
			given[q] = true
		}
	}
	for q := range given {
		r.Queries = append(r.Queries, q)
		if len(qrels[q]) == 0 {
			r.Unjudged = append(r.Unjudged, q)
			zero := make(map[string]float64, len(r.Metrics))
			for _, m := range r.Metrics {
				zero[m] = 0
			}
			r.PerQuery[q] = zero
			continue
		}
		r.Judged = append(r.Judged, q)
		r.PerQuery[q] = scoreQuery(Rank(run[q], opt.KeepOrder), qrels[q], r.Ks)
	}
	sort.Strings(r.Queries)
	sort.Strings(r.Judged)
	sort.Strings(r.Unjudged)
	r.Mean, r.MeanJudged = r.mean(r.Queries), r.mean(r.Judged)
	return r, nil
}

// mean is the arithmetic mean of each metric over qs (0 for none).
func (r *Report) mean(qs []string) map[string]float64 {
	out := make(map[string]float64, len(r.Metrics))
	for _, m := range r.Metrics {
		sum := 0.0
		for _, q := range qs {
			sum += r.PerQuery[q][m]
		}
		out[m] = 0
		if len(qs) > 0 {
			out[m] = sum / float64(len(qs))
		}
	}
	return out
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
	sumPrec := 0.0 // Σ precision at the rank of each relevant hit (MAP)
	for i, h := range ranked {
		g := judged[h.ID]
		relAt[i+1] = relAt[i]
		dcgAt[i+1] = dcgAt[i]
		if g > 0 {
			relAt[i+1]++
			dcgAt[i+1] += float64(g) / math.Log2(float64(i+2))
			sumPrec += float64(relAt[i+1]) / float64(i+1)
			if firstRel == 0 {
				firstRel = i + 1
			}
		}
	}
	at := func(k int) int { return min(k, len(ranked)) }
	// ratio is a/b, 0 when b is 0: a judged query without relevant
	// documents scores 0, as in trec_eval.
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	recall := func(k int) float64 { return ratio(float64(relAt[at(k)]), float64(nRel)) }

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
		success, rr := 0.0, 0.0
		if firstRel > 0 && firstRel <= k {
			success, rr = 1, 1/float64(firstRel)
		}
		m[PName(k)] = p
		m[RecallName(k)] = rc
		m[SuccessName(k)] = success
		m[F1Name(k)] = f1
		m[NDCGName(k)] = ratio(dcgAt[at(k)], idcg)
		m[MRRName(k)] = rr
	}
	m[MAP] = ratio(sumPrec, float64(nRel))
	m[RPrec] = ratio(float64(relAt[at(nRel)]), float64(nRel))
	m[Recall100] = recall(100)
	m[Recall1000] = recall(1000)
	return m
}

// RunQueries searches every query (top k) with r, one query at a time, and
// returns the run keyed by query id. progress receives (queries done,
// total). Errors: ctx's, and r's naming the query id.
func RunQueries(ctx context.Context, r retrieval.Retriever, queries []data.Query, k int, progress func(done, total int)) (Run, error) {
	run := make(Run, len(queries))
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hits, err := r.Search(q.Text, k)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q.ID, err)
		}
		run[q.ID] = hits
		if progress != nil {
			progress(i+1, len(queries))
		}
	}
	return run, nil
}

// DocRun maps a chunk-level run to document ids (a document's score is its
// best chunk's; ids of no chunk are kept), for document-level qrels such as
// BEIR's when the corpus was chunked.
func DocRun(run Run, chunks []data.Chunk) Run {
	docOf := make(map[string]string, len(chunks))
	for _, c := range chunks {
		docOf[c.ID] = c.DocID
	}
	out := make(Run, len(run))
	for qid, hits := range run {
		seen := map[string]bool{}
		var docs []retrieval.Hit
		for _, h := range hits { // hits are best first
			d, ok := docOf[h.ID]
			if !ok {
				d = h.ID
			}
			if !seen[d] {
				seen[d] = true
				docs = append(docs, retrieval.Hit{ID: d, Score: h.Score})
			}
		}
		out[qid] = docs
	}
	return out
}
