package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Table writes the mean metrics as a fixed-width text table: one row per
// cutoff in ks (P@k, Recall@k, F1@k, nDCG@k, 4 decimals), then one line with
// MRR@10, R-Prec, Recall@100 and the evaluated / skipped query counts.
//
// Errors: a k the report was not evaluated at, or a write error.
func (r *Report) Table(w io.Writer, ks []int) error {
	evaluated := map[int]bool{}
	for _, k := range r.Ks {
		evaluated[k] = true
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%6s %8s %8s %8s %8s\n", "k", "P", "Recall", "F1", "nDCG")
	for _, k := range ks {
		if !evaluated[k] {
			return fmt.Errorf("table: cutoff %d: not evaluated (have %v)", k, r.Ks)
		}
		fmt.Fprintf(bw, "%6d %8.4f %8.4f %8.4f %8.4f\n", k,
			r.Mean[PName(k)], r.Mean[RecallName(k)], r.Mean[F1Name(k)], r.Mean[NDCGName(k)])
	}
	fmt.Fprintf(bw, "%s %.4f  %s %.4f  %s %.4f  queries %d  skipped %d\n",
		MRR10, r.Mean[MRR10], RPrec, r.Mean[RPrec], Recall100, r.Mean[Recall100],
		len(r.Queries), len(r.Skipped))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// queryLine is one line of WritePerQueryJSONL.
type queryLine struct {
	Query   string             `json:"query"`
	Metrics map[string]float64 `json:"metrics"`
}

// WritePerQueryJSONL writes one JSON object per evaluated query, in query id
// order: {"query": id, "metrics": {name: value, ...}} (keys sorted).
// Skipped queries are not written.
func (r *Report) WritePerQueryJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, q := range r.Queries {
		if err := enc.Encode(queryLine{Query: q, Metrics: r.PerQuery[q]}); err != nil {
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

func hasSpace(s string) bool { return strings.IndexFunc(s, unicode.IsSpace) >= 0 }
