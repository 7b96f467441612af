package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/backend"
)

// workFlags split a command's work over workers: in this process
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

// add declares the flags; unit names what a batch holds ("questions").
func (w *workFlags) add(cmd *cobra.Command) { w.addFor(cmd, "questions", 8) }

func (w *workFlags) addFor(cmd *cobra.Command, unit string, batch int) {
	f := cmd.Flags()
	f.IntVar(&w.Workers, "workers", 1, "workers in this process, claiming batches from the run store's queue")
	f.StringVar(&w.Job, "job", "", "join (or create) the shared run NAME: processes started with the same flags on several machines work on it together through the run store (use --db postgres://…)")
	f.IntVar(&w.BatchSize, "batch-size", batch, unit+" per queued batch (--workers, --job, --shard)")
	f.DurationVar(&w.Lease, "lease", workqueue.DefaultLease, "a claimed batch returns to the queue when its worker has not renewed it for this long")
	f.StringVar(&w.Shard, "shard", "", "do only shard i/N of the "+unit+" (every N-th batch from the i-th)")
	f.BoolVar(&w.Verbose, "log-batches", false, "print each claimed and completed batch on stderr")
	minInt(f, 1, "workers", "batch-size")
}

func (w *workFlags) queued() bool { return w.Workers > 1 || w.Job != "" }

func (w *workFlags) split() bool { return w.queued() || w.Shard != "" }

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
		if _, _, err := workqueue.ParseShard(w.Shard); err != nil {
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
	i, n, err := workqueue.ParseShard(w.Shard)
	if err != nil {
		return nil, fmt.Errorf("--shard: %w", err)
	}
	return workqueue.Shard(tasks, i, n), nil
}

// config adds the shard to a run's config.
func (w *workFlags) config(cfg map[string]any) map[string]any {
	if w.Shard != "" {
		cfg["shard"] = w.Shard
	}
	return cfg
}

// logf is the batch log on stderr with --log-batches, else nil.
func (w *workFlags) logf(g *globals) func(string, ...any) {
	if !w.Verbose {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(g.Err, format+"\n", args...) }
}

// pool is the in-process pool of job's workers.
func (w *workFlags) pool(g *globals, q *workqueue.Queue, job string) workqueue.Pool {
	return workqueue.Pool{Queue: q, Job: job, Workers: w.Workers, Lease: w.Lease, Log: w.logf(g)}
}

// start opens the run store and the run of a split command: a run of its
// own, or with --job the shared run every worker process joins (finish is
// then a no-op: the process that completes the job finishes the run).
func (w *workFlags) start(g *globals, kind string, cfg any) (st *tracker.Store, run *tracker.Run, finish func(*error), err error) {
	if w.Job == "" {
		if st, run, err = startRun(g, kind, cfg); err != nil {
			return nil, nil, nil, err
		}
		return st, run, func(err *error) { finishRun(run, err) }, nil
	}
	if st, err = openStore(g); err != nil {
		return nil, nil, nil, err
	}
	if run, _, err = st.StartShared(w.Job, kind, cfg, version.Version, backend.Name(g.Backend)); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, run, func(*error) {}, nil
}
