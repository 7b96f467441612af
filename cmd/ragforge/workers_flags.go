package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/selflearn"
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

	batchFlag string
	multiple  int
	finishJob bool // this process completed a --job: it finishes the shared run
}

// add declares the flags with --batch-size, of questions.
func (w *workFlags) add(cmd *cobra.Command) { w.addFor(cmd, "batch-size", "questions", 8, 1) }

// addFor declares the flags, the batch size as --<batchFlag> (a command
// whose --batch-size means something else names it otherwise); unit names
// what a batch holds, and a batch size must be a multiple of multiple.
func (w *workFlags) addFor(cmd *cobra.Command, batchFlag, unit string, batch, multiple int) {
	w.batchFlag, w.multiple = batchFlag, multiple
	f := cmd.Flags()
	f.IntVar(&w.Workers, "workers", 1, "workers in this process, claiming batches from the run store's queue")
	f.StringVar(&w.Job, "job", "", "join (or create) the shared run NAME: processes started with the same flags on several machines work on it together through the run store (use --db postgres://…)")
	f.IntVar(&w.BatchSize, batchFlag, batch, unit+" per queued batch (--workers, --job, --shard)")
	f.DurationVar(&w.Lease, "lease", workqueue.DefaultLease, "a claimed batch returns to the queue when its worker has not renewed it for this long")
	f.StringVar(&w.Shard, "shard", "", "do only shard i/N of the "+unit+" (every N-th batch from the i-th)")
	f.BoolVar(&w.Verbose, "log-batches", false, "print each claimed and completed batch on stderr")
	minInt(f, 1, "workers", batchFlag)
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
	case w.multiple > 1 && w.BatchSize%w.multiple != 0:
		return fmt.Errorf("--%s %d: want a multiple of %d", w.batchFlag, w.BatchSize, w.multiple)
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
// then a no-op unless this process completed the job).
// Errors: flags check refuses (before anything is opened).
func (w *workFlags) start(g *globals, kind string, cfg any) (st *tracker.Store, run *tracker.Run, finish func(*error), err error) {
	if err := w.check(""); err != nil {
		return nil, nil, nil, err
	}
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
	return st, run, func(err *error) {
		if *err == nil && w.finishJob {
			*err = run.Finish(nil)
		}
	}, nil
}

// encode encodes chunks with enc and hands the vectors [len(chunks), dim]
// to write: in this process, or split (--workers, --job, --shard) into
// block-aligned batches whose parts wait under out/.encode-parts/<name>
// until the one process that merges them calls write. written is false in
// a process that did not write (another one merges, or shards are missing);
// with --job the writer finishes the shared run.
func (w *workFlags) encode(ctx context.Context, g *globals, st *tracker.Store, run *tracker.Run, enc encode.Encoder, chunks []data.Chunk,
	out, name string, write func(vecs []float32, dim int) error) (written bool, err error) {
	if !w.split() {
		bar := progress.New(g.Err, len(chunks), "encode")
		vecs, dim, err := encode.EncodeCorpus(enc, chunks, bar.Func())
		bar.Finish()
		if err != nil {
			return false, err
		}
		return true, write(vecs, dim)
	}
	parts := filepath.Join(out, ".encode-parts")
	s := encode.Split{Dir: filepath.Join(parts, name), BatchRows: w.BatchSize}
	ws := encode.Workers{Job: run.ID, Workers: w.Workers, Lease: w.Lease, Log: w.logf(g)}
	if w.Shard != "" {
		ws.Shard, ws.Shards, _ = workqueue.ParseShard(w.Shard)
	} else if ws.Queue, err = workqueue.Open(st.DB()); err != nil {
		return false, err
	}
	bar := progress.New(g.Err, len(chunks), "encode (this process)")
	var mu sync.Mutex
	rows := 0
	batches, written, err := s.Run(ctx, enc, chunks, ws, func(n int) {
		mu.Lock()
		defer mu.Unlock()
		rows += n
		bar.Set(rows, len(chunks))
	}, write)
	bar.Finish()
	if err != nil {
		return false, err
	}
	os.Remove(parts) // once empty
	fmt.Fprintf(g.Err, "%s: this process encoded %d batches (%d chunks)", run.ID, batches, rows)
	switch {
	case written && w.Job != "":
		fmt.Fprintln(g.Err, "; it merged them all and finishes the job")
		w.finishJob = true
	case written:
		fmt.Fprintln(g.Err, "; it merged them all")
	case w.Shard != "":
		fmt.Fprintf(g.Err, "; parts are kept in %s until the last shard merges them\n", s.Dir)
	default:
		fmt.Fprintln(g.Err, "; another worker merged them")
	}
	return written, nil
}

// genServerFlags are selflearn's limits per generator server.
type genServerFlags struct{ Concurrency, Retries int }

func (s *genServerFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&s.Concurrency, "gen-concurrency", openai.DefaultOptions().Concurrency, "openai generator: requests in flight per server (each server of a --generator list has its own)")
	f.IntVar(&s.Retries, "gen-retries", openai.DefaultOptions().MaxRetries, "openai generator: retries of a failed request, with exponential backoff honouring Retry-After")
	minInt(f, 1, "gen-concurrency")
	minInt(f, 0, "gen-retries")
}

// apply sets cfg's server limits (--gen-retries 0: none).
func (s genServerFlags) apply(cfg *selflearn.Config) {
	cfg.GenConcurrency, cfg.GenRetries = s.Concurrency, s.Retries
	if s.Retries == 0 {
		cfg.GenRetries = -1
	}
}

// genList is selflearn's --generator: given more than once it lists the
// servers (joined with ',', as a list in one value is).
type genList struct {
	p   *string
	set bool
}

func (g *genList) String() string { return *g.p }

func (g *genList) Set(s string) error {
	if g.set {
		*g.p += "," + s
	} else {
		*g.p, g.set = s, true
	}
	return nil
}

func (g *genList) Type() string { return "string" }
