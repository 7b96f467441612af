package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
)

// workFlags split a labeling command over workers: in this process
// (--workers), over processes sharing a queue in the run store (--job), or
// statically (--shard).
type workFlags struct {
	Workers   int
	Job       string
	BatchSize int
	Lease     time.Duration
	Shard     string
	Verbose   bool
}

func (w *workFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&w.Workers, "workers", 1, "workers in this process, claiming batches from the run store's queue")
	f.StringVar(&w.Job, "job", "", "join (or create) the shared run NAME: processes started with the same flags on several machines label it together through the run store (use --db postgres://…)")
	f.IntVar(&w.BatchSize, "batch-size", 8, "questions per queued batch (--workers, --job)")
	f.DurationVar(&w.Lease, "lease", label.DefaultLease, "a claimed batch returns to the queue when its worker has not renewed it for this long")
	f.StringVar(&w.Shard, "shard", "", "label only shard i/N of the questions (every N-th from the i-th), in its own run")
	f.BoolVar(&w.Verbose, "log-batches", false, "print each claimed and completed batch on stderr")
	minInt(f, 1, "workers", "batch-size")
}

func (w *workFlags) queued() bool { return w.Workers > 1 || w.Job != "" }

func (w *workFlags) check(resume string) error {
	switch {
	case w.Shard != "" && w.queued():
		return fmt.Errorf("--shard splits statically; it cannot be combined with --workers or --job (which share a queue)")
	case w.queued() && resume != "":
		return fmt.Errorf("--resume continues a one-process run; a --workers or --job run resumes by starting its workers again (with --job NAME)")
	case w.Lease < time.Second:
		return fmt.Errorf("--lease %s: want at least 1s", w.Lease)
	}
	if w.Shard != "" {
		if _, _, err := label.ParseShard(w.Shard); err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
	}
	return nil
}

// shard keeps this process's shard of tasks (all without --shard).
func (w *workFlags) shard(tasks []label.Task) ([]label.Task, error) {
	if w.Shard == "" {
		return tasks, nil
	}
	i, n, err := label.ParseShard(w.Shard)
	if err != nil {
		return nil, fmt.Errorf("--shard: %w", err)
	}
	return label.Shard(tasks, i, n), nil
}

// config adds the shard to a run's config.
func (w *workFlags) config(cfg map[string]any) map[string]any {
	if w.Shard != "" {
		cfg["shard"] = w.Shard
	}
	return cfg
}

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
	var st *tracker.Store
	var run *tracker.Run
	if o.Work.Job == "" {
		names := make([]string, len(scorers))
		for i, sc := range scorers {
			names[i] = sc.Name()
		}
		cfg["scorers"] = names
		if st, run, err = startRun(g, "label-perplexity", cfg); err != nil {
			return err
		}
		defer st.Close()
		defer finishRun(run, &err)
	} else {
		if st, err = openStore(g); err != nil {
			return err
		}
		defer st.Close()
		if run, _, err = st.StartShared(o.Work.Job, "label-perplexity", cfg, version.Version, backend.Name(g.Backend)); err != nil {
			return err
		}
	}
	ls, batches, err := labelQueued(ctx, g, o, st, run, scorers, tasks, payloads)
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
	res, err := label.Summarize(run, ls, o.Candidates.Out, label.CountPairs(tasks))
	if err != nil {
		return err
	}
	return printLabels(g, res)
}

// labelQueued queues payloads under run and labels them with --workers
// workers of this process (label.Pool), worker k scoring with scorers[k %
// len]; it returns the label store and the batches this process labeled.
func labelQueued(ctx context.Context, g *globals, o labelPerplexityOptions, st *tracker.Store, run *tracker.Run, scorers []lm.Scorer, tasks []label.Task, payloads []string) (*labelstore.Store, int, error) {
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return nil, 0, err
	}
	q, err := workqueue.Open(st.DB())
	if err != nil {
		return nil, 0, err
	}
	if _, err := q.Enqueue(ctx, run.ID, payloads); err != nil {
		return nil, 0, err
	}
	var logf func(string, ...any)
	if o.Work.Verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(g.Err, format+"\n", args...) }
	}
	pool := label.Pool{Queue: q, Job: run.ID, Workers: o.Work.Workers, Lease: o.Work.Lease, Log: logf, Labeler: func(k int) *label.PerplexityLabeler {
		return &label.PerplexityLabeler{Scorer: scorers[k%len(scorers)], Margin: o.Margin, Relative: o.Relative,
			DatasetName: datasetName(o.DatasetName, o.Candidates.Corpus.Path), Concurrency: o.Concurrency, Store: ls, RunID: run.ID}
	}}
	batches, err := pool.Run(ctx, tasks)
	return ls, batches, err
}
