package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by Batcher.Do after Close.
var ErrClosed = errors.New("batcher closed")

// Batcher groups the items of concurrent Do calls into batches for one
// function call (micro-batching): the first waiting call opens a batch,
// calls arriving within MaxWait join it until it holds MaxBatch items, then
// fn runs once on the concatenated items (in arrival order) and each caller
// gets its own slice of the results. A call with more than MaxBatch items
// forms a batch of its own; a batch never splits a call. Batches run one at
// a time on the Batcher's goroutine (the models are CPU-bound, so running
// two at once gains nothing). Callers whose context ends before their batch
// runs are dropped from it and get ctx.Err().
type Batcher[In, Out any] struct {
	fn       func(items []In) ([]Out, error)
	maxBatch int
	maxWait  time.Duration
	observe  func(n int)

	reqs      chan *batchReq[In, Out]
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.RWMutex
	closed    bool
}

type batchReq[In, Out any] struct {
	ctx   context.Context
	items []In
	out   []Out
	err   error
	done  chan struct{}
}

// NewBatcher starts a Batcher. maxBatch < 1 means 1 (no batching), maxWait
// ≤ 0 runs a batch as soon as the calls already queued are collected.
// observe, when set, is told the number of items of every batch run (for
// the batch-size histogram). fn must return one result per item.
func NewBatcher[In, Out any](fn func(items []In) ([]Out, error), maxBatch int, maxWait time.Duration, observe func(n int)) *Batcher[In, Out] {
	b := &Batcher[In, Out]{
		fn: fn, maxBatch: max(maxBatch, 1), maxWait: maxWait, observe: observe,
		reqs: make(chan *batchReq[In, Out]), done: make(chan struct{}),
	}
	go b.loop()
	return b
}

// Do runs items through the batch function and returns their results in
// order. Errors: ctx's error, ErrClosed, or the batch function's error
// (shared by every call of that batch).
func (b *Batcher[In, Out]) Do(ctx context.Context, items []In) ([]Out, error) {
	if len(items) == 0 {
		return nil, nil
	}
	r := &batchReq[In, Out]{ctx: ctx, items: items, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case b.reqs <- r:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		return nil, ctx.Err()
	}
	<-r.done // the loop always answers a request it has taken
	return r.out, r.err
}

// Close stops the Batcher after the batch in progress; later Do calls get
// ErrClosed. It waits for the loop to finish.
func (b *Batcher[In, Out]) Close() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		close(b.reqs)
		b.mu.Unlock()
	})
	<-b.done
}

func (b *Batcher[In, Out]) loop() {
	defer close(b.done)
	for first := range b.reqs {
		batch := []*batchReq[In, Out]{first}
		n := len(first.items)
		var timer <-chan time.Time
		var t *time.Timer
		if b.maxWait > 0 {
			t = time.NewTimer(b.maxWait)
			timer = t.C
		}
		var next *batchReq[In, Out] // a request that would overflow the batch
	collect:
		for n < b.maxBatch {
			var r *batchReq[In, Out]
			var ok bool
			if timer == nil {
				select {
				case r, ok = <-b.reqs:
				default:
					break collect
				}
			} else {
				select {
				case r, ok = <-b.reqs:
				case <-timer:
					break collect
				}
			}
			if !ok {
				break
			}
			if n+len(r.items) > b.maxBatch {
				next = r
				break
			}
			batch = append(batch, r)
			n += len(r.items)
		}
		if t != nil {
			t.Stop()
		}
		b.run(batch)
		for next != nil {
			// The overflowing request opens the next batch; it is run
			// alone rather than waiting, so no caller waits twice.
			r := next
			next = nil
			b.run([]*batchReq[In, Out]{r})
		}
	}
}

// run executes one batch and answers its requests.
func (b *Batcher[In, Out]) run(batch []*batchReq[In, Out]) {
	live := batch[:0:0]
	var items []In
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
		items = append(items, r.items...)
	}
	if len(live) == 0 {
		return
	}
	if b.observe != nil {
		b.observe(len(items))
	}
	out, err := b.call(items)
	if err == nil && len(out) != len(items) {
		err = fmt.Errorf("batch function returned %d results for %d items", len(out), len(items))
	}
	off := 0
	for _, r := range live {
		if err != nil {
			r.err = err
		} else {
			r.out = out[off : off+len(r.items) : off+len(r.items)]
		}
		off += len(r.items)
		close(r.done)
	}
}

// call runs fn, turning a panic (GoMLX graph errors) into an error.
func (b *Batcher[In, Out]) call(items []In) (out []Out, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("batch of %d: panic: %v", len(items), p)
		}
	}()
	return b.fn(items)
}
