package eval

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
)

// Relevance rules a QA set (no qrels of its own) is judged by: a chunk is
// relevant when it contains the answer's evidence (RelevanceContains) or
// overlaps the evidence's span in its document (RelevanceSpan, SpanRule).
const (
	RelevanceContains = "contains"
	RelevanceSpan     = "span"
	// RelevanceQrels names judgments that came with the queries (BEIR
	// qrels, document level).
	RelevanceQrels = "qrels"
)

// Judgments are the qrels of an evaluation, the rule that made them and
// their check against the evaluation's ids.
type Judgments struct {
	Qrels     data.Qrels
	Relevance string // RelevanceQrels, RelevanceContains or RelevanceSpan
	Check     QrelsCheck
}

// Judge returns the judgments of queries over a chunked corpus: qrels as
// they are when the query set has them (BEIR, document ids), else
// chunk-level qrels built by relevance (BuildQrels with the contains rule,
// or SpanRule(docs) for span). The check compares them with allQueryIDs
// (every query of the set, before any limit) and the ids they judge:
// documents for qrels, chunks otherwise. Errors: an unknown relevance rule,
// BuildQrels's.
func Judge(queries []data.Query, allQueryIDs []string, qrels data.Qrels, docs []data.Document, chunks []data.Chunk, relevance string) (Judgments, error) {
	j := Judgments{Qrels: qrels, Relevance: RelevanceQrels}
	if qrels == nil {
		rule := Rule{}
		switch relevance {
		case RelevanceContains:
		case RelevanceSpan:
			rule = SpanRule(docs)
		default:
			return j, fmt.Errorf("relevance %q: want %s or %s", relevance, RelevanceContains, RelevanceSpan)
		}
		var err error
		if j.Qrels, err = BuildQrels(queries, chunks, rule); err != nil {
			return j, err
		}
		j.Relevance = relevance
	}
	j.Check = CheckQrels(j.Qrels, allQueryIDs, JudgedIDs(j.Relevance == RelevanceQrels, docs, chunks))
	return j, nil
}

// JudgedIDs returns the ids judgments name: the documents' for
// document-level qrels, else the chunks'.
func JudgedIDs(documentLevel bool, docs []data.Document, chunks []data.Chunk) []string {
	if documentLevel {
		ids := make([]string, len(docs))
		for i, d := range docs {
			ids[i] = d.ID
		}
		return ids
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	return ids
}
