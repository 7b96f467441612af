package workqueue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultLease is the lease of a claimed batch when Worker.Lease is 0; a
// worker renews it every third of it while it works on the batch.
const DefaultLease = 2 * time.Minute

// Do does one claimed batch. ctx is cancelled (its cause wrapping
// ErrLeaseLost) when the lease is lost to another worker; what Do writes
// must then be idempotent, since the new owner writes it again.
type Do func(ctx context.Context, b *Batch) error

// Worker does the batches of a job: it claims a batch, runs Do while
// renewing the lease, and completes it, until no batch is left.
type Worker struct {
	Queue *Queue
	Job   string
	Owner string        // unique per worker, e.g. host:pid:k (Owner)
	Lease time.Duration // DefaultLease when 0
	// Log, when set, is told of each claimed and completed batch.
	Log func(format string, args ...any)
}

// Owner is the owner name of worker k of this process: host:pid:k.
func Owner(k int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%d", host, os.Getpid(), k)
}

// Run does batches until the job has none left and returns how many this
// worker completed. While every remaining batch is leased by another worker
// it waits (polling every tenth of the lease) and takes over the batch of a
// worker that died once its lease expires. A batch whose lease this worker
// loses is abandoned (the new owner does it). Errors: do's (the batch is
// released to the queue first), a queue error, ctx's.
func (w *Worker) Run(ctx context.Context, do Do) (int, error) {
	lease := w.Lease
	if lease <= 0 {
		lease = DefaultLease
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
		lost, err := w.do(ctx, b, lease, do)
		switch {
		case lost:
			w.logf("batch %d: lease lost, left to its new owner", b.N)
			continue
		case err != nil:
			w.Queue.Release(context.WithoutCancel(ctx), b)
			return done, fmt.Errorf("job %s batch %d: %w", w.Job, b.N, err)
		}
		if err := w.Queue.Complete(ctx, b); errors.Is(err, ErrLeaseLost) {
			w.logf("batch %d: lease lost before completion, left to its new owner", b.N)
			continue
		} else if err != nil {
			return done, err
		}
		done++
		w.logf("batch %d done", b.N)
	}
}

// do runs one batch while renewing its lease; lost reports a lease taken
// over by another worker (do's ctx is then cancelled).
func (w *Worker) do(ctx context.Context, b *Batch, lease time.Duration, do Do) (lost bool, err error) {
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
	err = do(ctx, b)
	close(stop)
	if rerr := <-renewed; rerr != nil {
		if errors.Is(rerr, ErrLeaseLost) {
			return true, nil
		}
		if err == nil {
			err = rerr
		}
	}
	return false, err
}

func (w *Worker) logf(format string, args ...any) {
	if w.Log != nil {
		w.Log("worker %s: "+format, append([]any{w.Owner}, args...)...)
	}
}

// Pool runs Workers workers of one job in this process.
type Pool struct {
	Queue   *Queue
	Job     string
	Workers int           // at least 1
	Lease   time.Duration // DefaultLease when 0
	Log     func(format string, args ...any)
}

// Run runs p.Workers workers (owners Owner(k)) until the job has no batch
// left; worker k does its batches with do(k) (a worker's own server or
// model). It returns the batches this process completed and every worker's
// error joined.
func (p Pool) Run(ctx context.Context, do func(k int) Do) (int, error) {
	var log func(string, ...any)
	if p.Log != nil {
		var mu sync.Mutex
		log = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			p.Log(format, args...)
		}
	}
	n := max(p.Workers, 1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	done := make([]int, n)
	for k := range n {
		w := &Worker{Queue: p.Queue, Job: p.Job, Owner: Owner(k), Lease: p.Lease, Log: log}
		f := do(k)
		wg.Go(func() { done[k], errs[k] = w.Run(ctx, f) })
	}
	wg.Wait()
	total := 0
	for _, d := range done {
		total += d
	}
	return total, errors.Join(errs...)
}

// Shard returns the items of shard i of n (0-based): every n-th item from
// the i-th, for a static split over processes that share no queue.
func Shard[T any](items []T, i, n int) []T {
	var out []T
	for j := i; j < len(items); j += n {
		out = append(out, items[j])
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
