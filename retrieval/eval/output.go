package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/ragforge/ragforge/data"
)

// Table writes the mean metrics as a fixed-width text table: one row per
// cutoff in ks (P@k, Recall@k, Success@k, F1@k, nDCG@k, MRR@k, 4 decimals),
// then one line with MAP, R-Prec, Recall@100, Recall@1000, all over every
// question (Mean, its count and the unjudged count above it); when some
// questions had no judgment, the same block over the judged ones
// (MeanJudged, trec_eval -c's figure) follows. Then, when r.Fill is set,
// one line with the hits per query and how many queries got fewer than
// asked.
//
// Errors: a k the report was not evaluated at, or a write error.
func (r *Report) Table(w io.Writer, ks []int) error {
	evaluated := map[int]bool{}
	for _, k := range r.Ks {
		evaluated[k] = true
	}
	for _, k := range ks {
		if !evaluated[k] {
			return fmt.Errorf("table: cutoff %d: not evaluated (have %v)", k, r.Ks)
		}
	}
	bw := bufio.NewWriter(w)
	block := func(mean map[string]float64) {
		fmt.Fprintf(bw, "%6s %8s %8s %8s %8s %8s %8s\n", "k", "P", "Recall", "Success", "F1", "nDCG", "MRR")
		for _, k := range ks {
			fmt.Fprintf(bw, "%6d %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", k,
				mean[PName(k)], mean[RecallName(k)], mean[SuccessName(k)], mean[F1Name(k)], mean[NDCGName(k)], mean[MRRName(k)])
		}
		fmt.Fprintf(bw, "%s %.4f  %s %.4f  %s %.4f  %s %.4f\n",
			MAP, mean[MAP], RPrec, mean[RPrec], Recall100, mean[Recall100], Recall1000, mean[Recall1000])
	}
	fmt.Fprintf(bw, "over all %d questions (%d without relevant chunks score 0):\n", len(r.Queries), len(r.Unjudged))
	block(r.Mean)
	if len(r.Unjudged) > 0 {
		fmt.Fprintf(bw, "over the %d judged (trec_eval -c on qrels.tsv):\n", len(r.Judged))
		block(r.MeanJudged)
	}
	if f := r.Fill; f != nil {
		lo, hi := f.Range()
		fmt.Fprintf(bw, "hits per query %d..%d; shortfall: %d of %d queries got fewer than %d\n",
			lo, hi, len(f.Short()), len(f.Hits), f.Want)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// queryLine is one line of WritePerQueryJSONL.
type queryLine struct {
	Query     string             `json:"query"`
	Metrics   map[string]float64 `json:"metrics"`
	Hits      *int               `json:"hits,omitempty"`
	Shortfall int                `json:"shortfall,omitempty"`
	Unjudged  bool               `json:"unjudged,omitempty"`
}

// WritePerQueryJSONL writes one JSON object per evaluated query, in query id
// order: {"query": id, "metrics": {name: value, ...}} (keys sorted); with
// r.Fill set also "hits" (distinct hits returned) and, when that is below
// Fill.Want, "shortfall" (the hits missing); a question without judgments
// (scored 0) has "unjudged": true.
func (r *Report) WritePerQueryJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, q := range r.Queries {
		line := queryLine{Query: q, Metrics: r.PerQuery[q], Unjudged: len(r.Judged) < len(r.Queries) && slices.Contains(r.Unjudged, q)}
		if r.Fill != nil {
			n := r.Fill.Hits[q]
			line.Hits = &n
			line.Shortfall = max(0, r.Fill.Want-n)
		}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("per-query jsonl: query %q: %w", q, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("per-query jsonl: %w", err)
	}
	return nil
}

// WriteTREC writes run in the TREC run format read by trec_eval and
// pytrec_eval: one line "qid Q0 docid rank score tag" per hit, queries in id
// order, hits in the given order with duplicates dropped (first occurrence
// kept, as Evaluate does), rank from 1, score in shortest round-trip form.
// trec_eval re-sorts by score itself, so the scores, not the ranks, decide
// its order.
//
// Errors: an empty tag or any query id, hit id or tag containing white space
// (the format is space-separated), or a write error.
func WriteTREC(w io.Writer, run Run, tag string) error {
	if tag == "" || hasSpace(tag) {
		return fmt.Errorf("write trec: tag %q: must be non-empty without white space", tag)
	}
	qids := make([]string, 0, len(run))
	for q := range run {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	bw := bufio.NewWriter(w)
	for _, q := range qids {
		if q == "" || hasSpace(q) {
			return fmt.Errorf("write trec: query %q: id must be non-empty without white space", q)
		}
		for i, h := range Rank(run[q], true) {
			if h.ID == "" || hasSpace(h.ID) {
				return fmt.Errorf("write trec: query %q: hit %d: field %q: %q must be non-empty without white space", q, i, "ID", h.ID)
			}
			fmt.Fprintf(bw, "%s Q0 %s %d %s %s\n", q, h.ID, i+1,
				strconv.FormatFloat(h.Score, 'g', -1, 64), tag)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trec: %w", err)
	}
	return nil
}

// WriteQrels writes qrels in the TREC qrels format read by trec_eval and
// pytrec_eval: one line "qid 0 docid rel" per judgment, queries and then
// documents in id order. With the run written by WriteTREC,
// `trec_eval -c -m all_trec qrels run` scores the measures both compute as
// Evaluate does.
//
// Errors: a query or document id that is empty or contains white space, or a
// write error.
func WriteQrels(w io.Writer, qrels data.Qrels) error {
	qids := make([]string, 0, len(qrels))
	for q := range qrels {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	bw := bufio.NewWriter(w)
	for _, q := range qids {
		if q == "" || hasSpace(q) {
			return fmt.Errorf("write qrels: query %q: id must be non-empty without white space", q)
		}
		docs := make([]string, 0, len(qrels[q]))
		for d := range qrels[q] {
			docs = append(docs, d)
		}
		sort.Strings(docs)
		for _, d := range docs {
			if d == "" || hasSpace(d) {
				return fmt.Errorf("write qrels: query %q: doc %q: id must be non-empty without white space", q, d)
			}
			fmt.Fprintf(bw, "%s 0 %s %d\n", q, d, qrels[q][d])
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write qrels: %w", err)
	}
	return nil
}

func hasSpace(s string) bool { return strings.IndexFunc(s, unicode.IsSpace) >= 0 }
