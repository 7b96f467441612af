package label

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/data/workqueue"
)

// BatchPayloads splits tasks, in order, into batches of size questions; a
// batch's payload is the JSON list of its tasks' query ids, so workers that
// built the same tasks agree on the batches (workqueue.Enqueue compares them).
// Errors: size < 1, a task without QueryID, a QueryID used twice.
func BatchPayloads(tasks []Task, size int) ([]string, error) {
	if size < 1 {
		return nil, fmt.Errorf("batch size %d: want ≥ 1", size)
	}
	seen := make(map[string]bool, len(tasks))
	var out []string
	for i := 0; i < len(tasks); i += size {
		var ids []string
		for _, t := range tasks[i:min(i+size, len(tasks))] {
			switch {
			case t.QueryID == "":
				return nil, fmt.Errorf("batches: a task without query id (question %q)", t.Question)
			case seen[t.QueryID]:
				return nil, fmt.Errorf("batches: query id %q appears twice", t.QueryID)
			}
			seen[t.QueryID] = true
			ids = append(ids, t.QueryID)
		}
		b, _ := json.Marshal(ids)
		out = append(out, string(b))
	}
	return out, nil
}

// Shard returns the tasks of shard i of n (0-based): every n-th task from
// the i-th, for a static split over processes that share no queue.
func Shard(tasks []Task, i, n int) []Task {
	var out []Task
	for j := i; j < len(tasks); j += n {
		out = append(out, tasks[j])
	}
	return out
}

// ParseShard parses "i/N" (0 ≤ i < N).
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q: want i/N with 0 ≤ i < N, e.g. 0/4", s)
	}
	return i, n, nil
}

// QueueWorker labels the batches of a work queue job: it claims a batch,
// labels its tasks with Labeler (which stores each label under its RunID as
// soon as the pair is done, so a batch redone after a lost lease upserts the
// same rows) and completes it, until no batch is left.
type QueueWorker struct {
	Queue   *workqueue.Queue
	Job     string
	Owner   string // unique per worker, e.g. host:pid:k
	Lease   time.Duration
	Labeler *PerplexityLabeler
	// Log, when set, is told of each claimed and completed batch.
	Log func(format string, args ...any)
}

// DefaultLease is the lease of a claimed batch when QueueWorker.Lease is 0;
// a worker renews it every third of it while the batch is labeled.
const DefaultLease = 2 * time.Minute

// Run labels batches until the job has none left and returns how many this
// worker completed. While every remaining batch is leased by another worker
// it waits (polling every tenth of the lease) and takes over the batch of a
// worker that died once its lease expires. A batch whose lease this worker
// loses is abandoned (the new owner does it). Errors: a labeling error (the
// batch is released to the queue first), a queue error, ctx's.
func (w *QueueWorker) Run(ctx context.Context, tasks []Task) (int, error) {
	lease := w.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	byID := make(map[string]Task, len(tasks))
	for _, t := range tasks {
		byID[t.QueryID] = t
	}
	poll := max(lease/10, 50*time.Millisecond)
	done := 0
	for {
		b, pending, err := w.Queue.Claim(ctx, w.Job, w.Owner, lease)
		if err != nil {
			return done, err
		}
		if b == nil {
			if !pending {
				return done, nil
			}
			select {
			case <-time.After(poll):
				continue
			case <-ctx.Done():
				return done, context.Cause(ctx)
			}
		}
		w.logf("batch %d claimed (attempt %d)", b.N, b.Attempts)
		var ids []string
		if err := json.Unmarshal([]byte(b.Payload), &ids); err != nil {
			w.Queue.Release(context.WithoutCancel(ctx), b)
			return done, fmt.Errorf("job %s batch %d: payload: %w", w.Job, b.N, err)
		}
		batch := make([]Task, len(ids))
		for i, id := range ids {
			t, ok := byID[id]
			if !ok {
				w.Queue.Release(context.WithoutCancel(ctx), b)
				return done, fmt.Errorf("job %s batch %d: query %q is not among this worker's questions (other flags or inputs?)", w.Job, b.N, id)
			}
			batch[i] = t
		}
		lost, err := w.label(ctx, b, batch, lease)
		switch {
		case lost:
			w.logf("batch %d: lease lost, left to its new owner", b.N)
			continue
		case err != nil:
			w.Queue.Release(context.WithoutCancel(ctx), b)
			return done, fmt.Errorf("job %s batch %d: %w", w.Job, b.N, err)
		}
		if err := w.Queue.Complete(ctx, b); errors.Is(err, workqueue.ErrLeaseLost) {
			w.logf("batch %d: lease lost before completion, left to its new owner", b.N)
			continue
		} else if err != nil {
			return done, err
		}
		done++
		w.logf("batch %d done", b.N)
	}
}

// label labels one batch while renewing its lease; lost reports a lease
// taken over by another worker (the labeling is then cancelled).
func (w *QueueWorker) label(ctx context.Context, b *workqueue.Batch, batch []Task, lease time.Duration) (lost bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	renewed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				renewed <- nil
				return
			case <-tick.C:
				if err := w.Queue.Renew(ctx, b, lease); err != nil {
					cancel(err)
					renewed <- err
					return
				}
			}
		}
	}()
	_, err = w.Labeler.Label(ctx, batch)
	close(stop)
	if rerr := <-renewed; rerr != nil {
		if errors.Is(rerr, workqueue.ErrLeaseLost) {
			return true, nil
		}
		if err == nil {
			err = rerr
		}
	}
	return false, err
}

func (w *QueueWorker) logf(format string, args ...any) {
	if w.Log != nil {
		w.Log("worker %s: "+format, append([]any{w.Owner}, args...)...)
	}
}
