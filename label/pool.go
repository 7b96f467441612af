package label

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

// Pool is a set of QueueWorkers in one process labeling one job's batches.
type Pool struct {
	Queue   *workqueue.Queue
	Job     string // the run id the batches are queued under
	Workers int
	Lease   time.Duration
	// Labeler returns worker k's labeler (e.g. its own scorer, round robin).
	Labeler func(k int) *PerplexityLabeler
	Log     func(format string, args ...any) // claimed and completed batches; may be nil
}

// Run runs the workers until the queue of the job is empty and returns the
// batches this process labeled. Owners are "<host>:<pid>:<k>". Errors: the
// workers', joined.
func (p Pool) Run(ctx context.Context, tasks []Task) (int, error) {
	host, _ := os.Hostname()
	var log func(string, ...any)
	if p.Log != nil {
		var mu sync.Mutex
		log = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			p.Log(format, args...)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, p.Workers)
	done := make([]int, p.Workers)
	for k := range p.Workers {
		w := &QueueWorker{Queue: p.Queue, Job: p.Job, Owner: fmt.Sprintf("%s:%d:%d", host, os.Getpid(), k), Lease: p.Lease, Log: log,
			Labeler: p.Labeler(k)}
		wg.Go(func() { done[k], errs[k] = w.Run(ctx, tasks) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	batches := 0
	for _, n := range done {
		batches += n
	}
	return batches, nil
}

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
