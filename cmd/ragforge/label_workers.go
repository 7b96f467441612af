package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
)

// labelPerplexityWorkers labels tasks with queue workers: --workers N in
// this process, on a run of its own or, with --job, on the shared run every
// worker process of the job joins.
func labelPerplexityWorkers(ctx context.Context, g *globals, o labelPerplexityOptions, scorers []lm.Scorer, tasks []label.Task) (err error) {
	payloads, err := label.BatchPayloads(tasks, o.Work.BatchSize)
	if err != nil {
		return err
	}
	// A job's config leaves out the scorers: each worker may have its own server.
	cfg := map[string]any{"flags": o.Candidates, "margin": o.Margin, "relative": o.Relative, "batch_size": o.Work.BatchSize}
	if o.Work.Job == "" {
		names := make([]string, len(scorers))
		for i, sc := range scorers {
			names[i] = sc.Name()
		}
		cfg["scorers"] = names
	}
	st, run, finish, err := o.Work.start(g, "label-perplexity", cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finish(&err)
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	q, err := workqueue.Open(st.DB())
	if err != nil {
		return err
	}
	if _, err := q.Enqueue(ctx, run.ID, payloads); err != nil {
		return err
	}
	pool := o.Work.pool(g, q, run.ID)
	batches, err := pool.Run(ctx, func(k int) workqueue.Do {
		return label.LabelBatches(&label.PerplexityLabeler{Scorer: scorers[k%len(scorers)], Margin: o.Margin, Relative: o.Relative,
			DatasetName: datasetName(o.DatasetName, o.Candidates.Corpus.Path), Concurrency: o.Concurrency, Store: ls, RunID: run.ID}, tasks)
	})
	if err != nil {
		return err
	}
	if o.Work.Job != "" {
		// Every batch is done: the first worker to get here finishes the run.
		if err := run.Finish(nil); errors.Is(err, tracker.ErrNotRunning) {
			fmt.Fprintf(g.Err, "job %s: this process labeled %d of %d batches; another worker finished the run\n", run.ID, batches, len(payloads))
			return nil
		} else if err != nil {
			return err
		}
	}
	fmt.Fprintf(g.Err, "%s: this process labeled %d of %d batches\n", run.ID, batches, len(payloads))
	return printLabelRun(g, run, ls, o.Candidates.Out, label.CountPairs(tasks))
}
