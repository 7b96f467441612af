package workqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/storedb"
	"github.com/ragforge/ragforge/data/storedb/storedbtest"
)

func openQueue(t *testing.T, target string) *Queue {
	t.Helper()
	db, err := storedb.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	q, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`["q%d"]`, i)
	}
	return out
}

func TestEnqueueIdempotent(t *testing.T) { storedbtest.Each(t, testEnqueueIdempotent) }

func testEnqueueIdempotent(t *testing.T, target string) {
	q := openQueue(t, target)
	ctx := context.Background()
	if added, err := q.Enqueue(ctx, "j", payloads(3)); err != nil || !added {
		t.Fatalf("first Enqueue = %v, %v", added, err)
	}
	if added, err := q.Enqueue(ctx, "j", payloads(3)); err != nil || added {
		t.Fatalf("second Enqueue = %v, %v; want false, nil", added, err)
	}
	if _, err := q.Enqueue(ctx, "j", payloads(4)); err == nil {
		t.Error("Enqueue with another batch count: no error")
	}
	if _, err := q.Enqueue(ctx, "j", []string{"a", "b", "c"}); err == nil {
		t.Error("Enqueue with other payloads: no error")
	}
	if c, err := q.Counts(ctx, "j"); err != nil || c["pending"] != 3 {
		t.Errorf("Counts = %v, %v", c, err)
	}
}

// Claimers on two connections (on PostgreSQL, several pooled connections
// per queue) take every batch exactly once.
func TestClaimExclusive(t *testing.T) { storedbtest.Each(t, testClaimExclusive) }

func testClaimExclusive(t *testing.T, target string) {
	qs := []*Queue{openQueue(t, target), openQueue(t, target)}
	ctx := context.Background()
	const n = 60
	if _, err := qs[0].Enqueue(ctx, "j", payloads(n)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		q := qs[w%2]
		wg.Go(func() {
			for {
				b, _, err := q.Claim(ctx, "j", fmt.Sprintf("w%d", w), time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if b == nil {
					return
				}
				if err := q.Complete(ctx, b); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done[b.N]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range n {
		if done[i] != 1 {
			t.Errorf("batch %d done %d times", i, done[i])
		}
	}
	if c, _ := qs[1].Counts(ctx, "j"); c["done"] != n {
		t.Errorf("Counts = %v", c)
	}
}

// An expired lease returns the batch: the next claimer gets it, and the
// first owner can neither renew nor complete it.
func TestLeaseExpiry(t *testing.T) { storedbtest.Each(t, testLeaseExpiry) }

func testLeaseExpiry(t *testing.T, target string) {
	q := openQueue(t, target)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return t0 }
	if _, err := q.Enqueue(ctx, "j", payloads(2)); err != nil {
		t.Fatal(err)
	}
	a, _, err := q.Claim(ctx, "j", "killed", 30*time.Second)
	if err != nil || a == nil || a.N != 0 || a.Payload != `["q0"]` || a.Attempts != 1 {
		t.Fatalf("claim = %+v, %v", a, err)
	}
	b, _, err := q.Claim(ctx, "j", "b", 30*time.Second)
	if err != nil || b == nil || b.N != 1 {
		t.Fatalf("second claim = %+v, %v", b, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(q.Complete(ctx, b))
	// Batch 0 is leased: nothing to claim, but the job is not finished.
	if c, pending, err := q.Claim(ctx, "j", "c", 30*time.Second); err != nil || c != nil || !pending {
		t.Fatalf("claim under a live lease = %+v, %v, %v; want nil, true", c, pending, err)
	}
	// Renewing keeps it; past the renewed lease it returns to the queue.
	q.now = func() time.Time { return t0.Add(20 * time.Second) }
	must(q.Renew(ctx, a, 30*time.Second))
	q.now = func() time.Time { return t0.Add(40 * time.Second) }
	if c, _, _ := q.Claim(ctx, "j", "c", 30*time.Second); c != nil {
		t.Fatalf("claimed a renewed lease: %+v", c)
	}
	q.now = func() time.Time { return t0.Add(51 * time.Second) }
	c, _, err := q.Claim(ctx, "j", "c", 30*time.Second)
	if err != nil || c == nil || c.N != 0 || c.Attempts != 2 {
		t.Fatalf("claim after expiry = %+v, %v", c, err)
	}
	if err := q.Complete(ctx, a); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Complete by the lost owner err = %v, want ErrLeaseLost", err)
	}
	if err := q.Renew(ctx, a, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Renew by the lost owner err = %v, want ErrLeaseLost", err)
	}
	must(q.Complete(ctx, c))
	if d, pending, err := q.Claim(ctx, "j", "c", time.Minute); err != nil || d != nil || pending {
		t.Errorf("claim when all done = %+v, %v, %v; want nil, false", d, pending, err)
	}
	// Release hands a batch back at once.
	must2 := func(b *Batch, _ bool, err error) *Batch { must(err); return b }
	if _, err := q.Enqueue(ctx, "k", payloads(1)); err != nil {
		t.Fatal(err)
	}
	r := must2(q.Claim(ctx, "k", "r", time.Hour))
	must(q.Release(ctx, r))
	if r2 := must2(q.Claim(ctx, "k", "s", time.Hour)); r2 == nil || r2.N != 0 {
		t.Errorf("claim after release = %+v", r2)
	}
}

func TestParseShardAndShard(t *testing.T) {
	for _, bad := range []string{"", "1", "4/4", "-1/2", "a/b", "0/0"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q): no error", bad)
		}
	}
	i, n, err := ParseShard("1/3")
	if err != nil || i != 1 || n != 3 {
		t.Fatalf("ParseShard(1/3) = %d, %d, %v", i, n, err)
	}
	if got := fmt.Sprint(Shard([]string{"q0", "q1", "q2", "q3", "q4", "q5", "q6"}, i, n)); got != "[q1 q4]" {
		t.Errorf("shard 1/3 = %v", got)
	}
}

// A pool of three workers beside a claimer that dies holding batch 0: every
// batch is done exactly once, batch 0 after the dead claim's lease expires.
func TestPoolTakesOverDeadLease(t *testing.T) { storedbtest.Each(t, testPoolTakesOverDeadLease) }

func testPoolTakesOverDeadLease(t *testing.T, target string) {
	q := openQueue(t, target)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, "j", payloads(9)); err != nil {
		t.Fatal(err)
	}
	if b, _, err := q.Claim(ctx, "j", "dead", 200*time.Millisecond); err != nil || b.N != 0 {
		t.Fatalf("dead claim %+v, %v", b, err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var attempts0 int
	n, err := Pool{Queue: q, Job: "j", Workers: 3, Lease: time.Second}.Run(ctx, func(k int) Do {
		return func(ctx context.Context, b *Batch) error {
			mu.Lock()
			defer mu.Unlock()
			seen[b.Payload]++
			if b.N == 0 {
				attempts0 = b.Attempts
			}
			return nil
		}
	})
	if err != nil || n != 9 {
		t.Fatalf("Pool.Run = %d, %v; want 9 batches", n, err)
	}
	for _, p := range payloads(9) {
		if seen[p] != 1 {
			t.Errorf("batch %s done %d times", p, seen[p])
		}
	}
	if attempts0 != 2 {
		t.Errorf("batch 0 done at attempt %d, want 2 (after the dead claim)", attempts0)
	}
}

// A worker whose do fails releases its batch, so another worker does it.
func TestWorkerReleasesOnError(t *testing.T) { storedbtest.Each(t, testWorkerReleasesOnError) }

func testWorkerReleasesOnError(t *testing.T, target string) {
	q := openQueue(t, target)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, "j", payloads(2)); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Queue: q, Job: "j", Owner: "bad"}
	if _, err := w.Run(ctx, func(context.Context, *Batch) error { return errors.New("boom") }); err == nil || !strings.Contains(err.Error(), "job j batch 0: boom") {
		t.Fatalf("Run = %v, want job j batch 0: boom", err)
	}
	w = &Worker{Queue: q, Job: "j", Owner: "good"}
	if n, err := w.Run(ctx, func(context.Context, *Batch) error { return nil }); n != 2 || err != nil {
		t.Fatalf("Run after release = %d, %v; want 2 batches", n, err)
	}
}
