package eval

import (
	"sort"

	"github.com/ragforge/ragforge/data"
)

// Fill records how many hits each query of a run got, so that a retriever
// that returns fewer than asked (an IVF index searched with a small nprobe,
// an HNSW index with a small efSearch, a BM25 query matching few chunks) is
// reported rather than silently scored.
type Fill struct {
	// Hits maps each run query to its number of distinct hits.
	Hits map[string]int `json:"hits"`
	// Want is the number of hits a query asked for, capped at the index
	// size (min(k, index size)).
	Want int `json:"want"`
}

// NewFill counts the distinct hits of each query of run against want hits
// per query; indexSize > 0 caps want (no query can get more hits than the
// index holds).
func NewFill(run Run, want, indexSize int) *Fill {
	if indexSize > 0 {
		want = min(want, indexSize)
	}
	f := &Fill{Hits: make(map[string]int, len(run)), Want: want}
	for q, hits := range run {
		f.Hits[q] = len(Rank(hits, true))
	}
	return f
}

// Short returns the queries with fewer than Want hits, sorted by id.
func (f *Fill) Short() []string {
	var out []string
	for q, n := range f.Hits {
		if n < f.Want {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

// Range returns the fewest and the most hits any query got (0, 0 for an
// empty run).
func (f *Fill) Range() (lo, hi int) {
	first := true
	for _, n := range f.Hits {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return lo, hi
}

// QrelsCheck counts the judgments of a qrels that name ids the evaluation
// does not know. pytrec_eval and trec_eval ignore such ids silently; they
// usually mean a qrels file from another split or corpus version.
type QrelsCheck struct {
	// UnknownQueries are the judged query ids absent from the query set,
	// sorted; they are not evaluated.
	UnknownQueries []string `json:"unknown_queries,omitempty"`
	// UnknownDocs counts the judgments (query, doc) whose doc id is absent
	// from the corpus; they still count as relevant (recall denominators),
	// as in trec_eval. UnknownDocIDs are those doc ids, sorted, distinct.
	UnknownDocs   int      `json:"unknown_docs"`
	UnknownDocIDs []string `json:"unknown_doc_ids,omitempty"`
}

// CheckQrels compares qrels with the query ids and the corpus ids (chunk or
// document ids, as the qrels use) of an evaluation.
func CheckQrels(qrels data.Qrels, queryIDs, docIDs []string) QrelsCheck {
	qs := make(map[string]bool, len(queryIDs))
	for _, q := range queryIDs {
		qs[q] = true
	}
	ds := make(map[string]bool, len(docIDs))
	for _, d := range docIDs {
		ds[d] = true
	}
	var c QrelsCheck
	unknown := map[string]bool{}
	for q, judged := range qrels {
		if len(judged) > 0 && !qs[q] {
			c.UnknownQueries = append(c.UnknownQueries, q)
		}
		for d := range judged {
			if !ds[d] {
				c.UnknownDocs++
				unknown[d] = true
			}
		}
	}
	for d := range unknown {
		c.UnknownDocIDs = append(c.UnknownDocIDs, d)
	}
	sort.Strings(c.UnknownQueries)
	sort.Strings(c.UnknownDocIDs)
	return c
}

// OK reports whether every qrels id was known.
func (c QrelsCheck) OK() bool { return len(c.UnknownQueries) == 0 && c.UnknownDocs == 0 }
