package label

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/eval"
)

// EvidenceLabeler labels retrieved candidates by reference evidence: for each
// query it takes the retriever's top TopN hits and marks a candidate [HELPFUL]
// when it holds the evidence. The rule, in order of precedence:
//
//   - Qrels set: the query's judgment of the chunk id, or of its DocID, is > 0
//     (BEIR qrels);
//   - Relevant set: Relevant(query, chunk), e.g. eval.Rule{Evidence: true,
//     Docs: docs}.Func() for evidence-span mapping;
//   - else Rule(query.Context, chunk.Text), default eval.ContainsEvidence (AP
//     paper: normalized substring or a shared 5-gram).
//
// Queries without any evidence (empty Context and no qrels) are skipped.
type EvidenceLabeler struct {
	Retriever retrieval.Retriever
	Lookup    func(id string) (data.Chunk, bool) // chunk of a hit id, e.g. (*bm25.Index).Doc
	TopN      int                                // candidates per query; default 10
	Rule      func(context, chunk string) bool
	Relevant  eval.RelevanceFunc
	Qrels     data.Qrels
	// NegativesPerQuestion caps the [NOT_HELPFUL] candidates kept per query
	// (0 = all). Balanced caps them at the query's number of [HELPFUL]
	// candidates (and at NegativesPerQuestion when that is also set). The kept
	// negatives are a uniform sample, reproducible from Seed and the query id,
	// listed in retrieval order.
	NegativesPerQuestion int
	Balanced             bool
	Seed                 uint64
	DatasetName          string
	Store                *labelstore.Store // when set, labels are stored under RunID
	RunID                string
	Progress             Progress // called after each query; may be nil
}

// Label retrieves, labels and samples candidates for queries and returns the
// labels (method "evidence", Score = retriever score), in query order then
// retrieval order; example ids are "<query id>#<chunk id>". Errors name the
// query: a retriever error, a hit id Lookup does not know, a store error
// (labels of earlier queries are then already stored), or ctx cancellation.
func (l *EvidenceLabeler) Label(ctx context.Context, queries []data.Query) ([]labelstore.Label, error) {
	if l.Retriever == nil || l.Lookup == nil {
		return nil, errors.New("evidence labeler: Retriever and Lookup are required")
	}
	if l.Store != nil && l.RunID == "" {
		return nil, errors.New("evidence labeler: a Store needs a RunID")
	}
	topN := l.TopN
	if topN <= 0 {
		topN = 10
	}
	rule := l.Rule
	if rule == nil {
		rule = eval.ContainsEvidence
	}
	var out []labelstore.Label
	for qi, q := range queries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("evidence labeler: %w", err)
		}
		var judged map[string]int
		if l.Qrels != nil {
			judged = l.Qrels[q.ID]
		}
		if (l.Qrels != nil && len(judged) == 0) || (l.Qrels == nil && l.Relevant == nil && q.Context == "") {
			if l.Progress != nil {
				l.Progress(qi+1, len(queries))
			}
			continue
		}
		hits, err := l.Retriever.Search(q.Text, topN)
		if err != nil {
			return nil, fmt.Errorf("evidence labeler: query %d (id %q): %w", qi+1, q.ID, err)
		}
		var labels []labelstore.Label
		var pos, neg []int
		for _, h := range hits {
			c, ok := l.Lookup(h.ID)
			if !ok {
				return nil, fmt.Errorf("evidence labeler: query %d (id %q): hit %q not found in the corpus", qi+1, q.ID, h.ID)
			}
			var rel bool
			switch {
			case l.Qrels != nil:
				rel = judged[c.ID] > 0 || (c.DocID != "" && judged[c.DocID] > 0)
			case l.Relevant != nil:
				rel = l.Relevant(q, c)
			default:
				rel = rule(q.Context, c.Text)
			}
			lab := filter.NotHelpful
			if rel {
				lab = filter.Helpful
				pos = append(pos, len(labels))
			} else {
				neg = append(neg, len(labels))
			}
			labels = append(labels, labelstore.Label{RunID: l.RunID, Key: labelstore.Key(q.Text, c.ID, c.Text), ExampleID: q.ID + "#" + c.ID,
				QueryID: q.ID, Question: q.Text, Target: q.Answer, Snippet: c.Text, ChunkID: c.ID,
				DatasetName: l.DatasetName, Label: lab, Method: labelstore.MethodEvidence, Score: h.Score})
		}
		keep := l.sampleNegatives(q.ID, len(pos), neg)
		var kept []labelstore.Label
		for i, lb := range labels {
			if lb.Label == filter.Helpful || keep[i] {
				kept = append(kept, lb)
			}
		}
		if l.Store != nil && len(kept) > 0 {
			if err := l.Store.Put(kept); err != nil {
				return nil, fmt.Errorf("evidence labeler: query %d (id %q): %w", qi+1, q.ID, err)
			}
		}
		out = append(out, kept...)
		if l.Progress != nil {
			l.Progress(qi+1, len(queries))
		}
	}
	return out, nil
}

// sampleNegatives returns the set of negative positions (indices into the
// query's candidates) to keep.
func (l *EvidenceLabeler) sampleNegatives(qid string, nPos int, neg []int) map[int]bool {
	n := len(neg)
	if l.NegativesPerQuestion > 0 {
		n = min(n, l.NegativesPerQuestion)
	}
	if l.Balanced {
		n = min(n, nPos)
	}
	keep := make(map[int]bool, n)
	if n == len(neg) {
		for _, i := range neg {
			keep[i] = true
		}
		return keep
	}
	h := fnv.New64a()
	h.Write([]byte(qid))
	rng := rand.New(rand.NewPCG(l.Seed, h.Sum64()))
	for _, p := range rng.Perm(len(neg))[:n] {
		keep[neg[p]] = true
	}
	return keep
}
