package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// double is a batch function recording its batch sizes.
type double struct {
	mu    sync.Mutex
	sizes []int
}

func (d *double) fn(items []int) ([]int, error) {
	d.mu.Lock()
	d.sizes = append(d.sizes, len(items))
	d.mu.Unlock()
	out := make([]int, len(items))
	for i, x := range items {
		if x < 0 {
			panic("negative item")
		}
		out[i] = 2 * x
	}
	return out, nil
}

// Three concurrent one-item calls with MaxBatch 3 and a long wait form
// exactly one batch of 3 (it closes when full, not on the timer); each
// caller gets its own result.
func TestBatcherFillsBatch(t *testing.T) {
	d := &double{}
	var observed []int
	var mu sync.Mutex
	b := NewBatcher(d.fn, 3, time.Hour, func(n int) { mu.Lock(); observed = append(observed, n); mu.Unlock() })
	defer b.Close()
	var wg sync.WaitGroup
	got := make([]int, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := b.Do(context.Background(), []int{i + 1})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = out[0]
		}()
	}
	wg.Wait()
	if !reflect.DeepEqual(got, []int{2, 4, 6}) {
		t.Errorf("results %v", got)
	}
	if !reflect.DeepEqual(d.sizes, []int{3}) || !reflect.DeepEqual(observed, []int{3}) {
		t.Errorf("batches %v observed %v, want one of 3", d.sizes, observed)
	}
}

func TestBatcherEdgeCases(t *testing.T) {
	d := &double{}
	// MaxBatch 2, no wait: a call of 5 items runs as micro-batches 2, 2, 1.
	b := NewBatcher(d.fn, 2, 0, nil)
	out, err := b.Do(context.Background(), []int{1, 2, 3, 4, 5})
	if err != nil || !reflect.DeepEqual(out, []int{2, 4, 6, 8, 10}) {
		t.Fatalf("big call: %v %v", out, err)
	}
	// A panic in the batch function is an error for the caller, and the
	// batcher keeps working.
	if _, err := b.Do(context.Background(), []int{-1}); err == nil || !strings.Contains(err.Error(), "negative item") {
		t.Errorf("panic: %v", err)
	}
	if out, err := b.Do(context.Background(), []int{7}); err != nil || out[0] != 14 {
		t.Errorf("after panic: %v %v", out, err)
	}
	// A cancelled context is refused before the batch runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, []int{1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if out, err := b.Do(context.Background(), nil); out != nil || err != nil {
		t.Errorf("empty call: %v %v", out, err)
	}
	b.Close()
	if _, err := b.Do(context.Background(), []int{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if !reflect.DeepEqual(d.sizes, []int{2, 2, 1, 1, 1}) {
		t.Errorf("batch sizes %v, want [2 2 1 1 1]", d.sizes)
	}
	// A wrong result count is an error.
	bad := NewBatcher(func(items []int) ([]int, error) { return nil, nil }, 4, 0, nil)
	defer bad.Close()
	if _, err := bad.Do(context.Background(), []int{1}); err == nil {
		t.Error("short result accepted")
	}
}

// The token budget cuts calls and merged batches: items are their own
// size, MaxTokens 10, MaxBatch 8.
func TestBatcherTokenLimit(t *testing.T) {
	cases := []struct {
		items []int
		want  []int // batch sizes
	}{
		{[]int{4, 4, 4}, []int{2, 1}},                   // 8, then 4
		{[]int{11, 1}, []int{1, 1}},                     // an item over the budget is alone
		{[]int{1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{8, 1}}, // MaxBatch still applies
		{[]int{5, 5, 5, 5}, []int{2, 2}},
	}
	for _, c := range cases {
		d := &double{}
		b := NewTokenBatcher(d.fn, 8, 10, func(x int) int { return x }, 0, nil)
		out, err := b.Do(context.Background(), c.items)
		b.Close()
		if err != nil || len(out) != len(c.items) {
			t.Fatalf("%v: %v %v", c.items, out, err)
		}
		for i, x := range c.items {
			if out[i] != 2*x {
				t.Errorf("%v: result %d = %d", c.items, i, out[i])
			}
		}
		if !reflect.DeepEqual(d.sizes, c.want) {
			t.Errorf("%v: batches %v, want %v", c.items, d.sizes, c.want)
		}
	}
}

// A call cancelled while its first micro-batch runs sends no further
// micro-batch: the model does no more work for it.
func TestBatcherStopsAtNextMicroBatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	fn := func(items []int) ([]int, error) {
		calls++
		cancel() // the client goes away during the first model call
		return items, nil
	}
	b := NewBatcher(fn, 2, 0, nil)
	defer b.Close()
	if _, err := b.Do(ctx, []int{1, 2, 3, 4, 5, 6}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("%d model calls after cancellation, want 1", calls)
	}
}

// Golden Prometheus output for hand-chosen observations (binary fractions,
// so the sum is exact): three latencies, a batch of 3 (bucket le 4).
func TestMetricsGolden(t *testing.T) {
	m := NewMetrics()
	m.ObserveRequest("POST /v1/retrieve", 200, 0.001953125)  // 2^-9: le 0.0025
	m.ObserveRequest("POST /v1/retrieve", 200, 0.125)        // le 0.25
	m.ObserveRequest("POST /v1/retrieve", 400, 0.0009765625) // 2^-10: le 0.001; sum 0.1279296875 exactly
	m.ObserveBatch("filter", 3)
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	// Drop the process/runtime gauges, whose values vary.
	if i := strings.Index(got, "# HELP process_resident_memory_bytes"); i >= 0 {
		got = got[:i]
	}
	want, err := os.ReadFile(filepath.Join("testdata", "metrics.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
	if n := m.RequestCount("POST /v1/retrieve", 200); n != 2 {
		t.Errorf("RequestCount = %d", n)
	}
}

func TestParseStatm(t *testing.T) {
	cases := []struct {
		in   string
		page int
		want int64
		ok   bool
	}{
		{"2000 25 10 1 0 300 0\n", 4096, 25 * 4096, true},
		{"1 3", 65536, 3 * 65536, true},
		{"17", 4096, 0, false},
		{"1 x 2", 4096, 0, false},
	}
	for _, c := range cases {
		got, err := parseStatm([]byte(c.in), c.page)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStatm(%q) = %d, %v", c.in, got, err)
		}
	}
	if rss, err := ResidentMemory(); err == nil && rss <= 0 {
		t.Errorf("ResidentMemory = %d", rss)
	} else if err != nil {
		t.Logf("no /proc/self/statm: %v", err)
	}
}
