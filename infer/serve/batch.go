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

// Batcher groups the items of concurrent Do calls into micro-batches of
// bounded size for one function call: a call's items are cut into pieces of
// at most MaxBatch items and MaxTokens tokens (by the size function; a
// single item over MaxTokens is a piece of its own), the first waiting piece
// opens a batch, pieces arriving within MaxWait join it while it stays
// within both limits, then fn runs once on the concatenated items (in
// arrival order) and each piece gets its own slice of the results. So the
// memory of one model call is bounded whatever a request holds. Batches run
// one at a time on the Batcher's goroutine (the models are CPU-bound, so
// running two at once gains nothing). A call whose context ends stops at its
// next piece: pieces already queued are dropped from their batch, later
// pieces are never sent, and Do returns ctx.Err().
type Batcher[In, Out any] struct {
	fn        func(items []In) ([]Out, error)
	maxBatch  int
	maxTokens int          // ≤ 0: no token limit
	size      func(In) int // tokens of an item; nil: 1
	maxWait   time.Duration
	observe   func(n int)

	reqs      chan *batchReq[In, Out]
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.RWMutex
	closed    bool
}

type batchReq[In, Out any] struct {
	ctx    context.Context
	items  []In
	tokens int
	out    []Out
	err    error
	done   chan struct{}
}

// NewBatcher starts a Batcher without a token limit. maxBatch < 1 means 1
// (no batching), maxWait ≤ 0 runs a batch as soon as the calls already
// queued are collected. observe, when set, is told the number of items of
// every batch run (for the batch-size histogram). fn must return one result
// per item.
func NewBatcher[In, Out any](fn func(items []In) ([]Out, error), maxBatch int, maxWait time.Duration, observe func(n int)) *Batcher[In, Out] {
	return NewTokenBatcher(fn, maxBatch, 0, nil, maxWait, observe)
}

// NewTokenBatcher is NewBatcher with a token budget per batch: size returns
// an item's tokens, and a batch holds at most maxTokens of them (≤ 0: no
// limit) besides at most maxBatch items.
func NewTokenBatcher[In, Out any](fn func(items []In) ([]Out, error), maxBatch, maxTokens int, size func(In) int, maxWait time.Duration, observe func(n int)) *Batcher[In, Out] {
	b := &Batcher[In, Out]{
		fn: fn, maxBatch: max(maxBatch, 1), maxTokens: maxTokens, size: size, maxWait: maxWait, observe: observe,
		reqs: make(chan *batchReq[In, Out]), done: make(chan struct{}),
	}
	go b.loop()
	return b
}

// Do runs items through the batch function, piece by piece, and returns
// their results in order. Errors: ctx's error, ErrClosed, or the batch
// function's error (shared by every call of that batch).
func (b *Batcher[In, Out]) Do(ctx context.Context, items []In) ([]Out, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Out, 0, len(items))
	for lo := 0; lo < len(items); {
		hi, tokens := lo, 0
		for hi < len(items) && hi-lo < b.maxBatch {
			t := b.tokens(items[hi])
			if hi > lo && b.maxTokens > 0 && tokens+t > b.maxTokens {
				break
			}
			tokens += t
			hi++
		}
		part, err := b.do(ctx, items[lo:hi:hi], tokens)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
		lo = hi
	}
	return out, nil
}

func (b *Batcher[In, Out]) tokens(x In) int {
	if b.size == nil {
		return 1
	}
	return b.size(x)
}

// do sends one piece and waits for its batch.
func (b *Batcher[In, Out]) do(ctx context.Context, items []In, tokens int) ([]Out, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &batchReq[In, Out]{ctx: ctx, items: items, tokens: tokens, done: make(chan struct{})}
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
		n, tokens := len(first.items), first.tokens
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
			if n+len(r.items) > b.maxBatch || (b.maxTokens > 0 && tokens+r.tokens > b.maxTokens) {
				next = r
				break
			}
			batch = append(batch, r)
			n += len(r.items)
			tokens += r.tokens
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
