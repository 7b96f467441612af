package label

import (
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

// PerplexityTasks pairs each query and its reference answer with its BM25
// top-n candidates from idx. source names the query file in errors: a
// query without a reference answer (field Ground_Truth).
func PerplexityTasks(queries []data.Query, idx *bm25.Index, n int, source string) ([]Task, error) {
	var tasks []Task
	for _, q := range queries {
		if strings.TrimSpace(q.Answer) == "" {
			return nil, fmt.Errorf("%s: question %s: field %q: empty (perplexity labels need a reference answer)", source, q.ID, "Ground_Truth")
		}
		hits, err := idx.Search(q.Text, n)
		if err != nil {
			return nil, err
		}
		t := Task{QueryID: q.ID, Question: q.Text, Target: q.Answer}
		for _, h := range hits {
			if ch, ok := idx.Doc(h.ID); ok {
				t.Candidates = append(t.Candidates, ch)
			}
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// CountPairs is the number of (question, candidate) pairs of tasks.
func CountPairs(tasks []Task) int {
	n := 0
	for _, t := range tasks {
		n += len(t.Candidates)
	}
	return n
}
