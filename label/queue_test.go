package label

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

func queueTasks() []Task {
	var tasks []Task
	for i := range 7 {
		tasks = append(tasks, Task{QueryID: fmt.Sprint("q", i), Question: fmt.Sprintf("What does drug %d block?", i),
			Target: fmt.Sprintf("enzyme %d", i), Candidates: []data.Chunk{
				{ID: fmt.Sprintf("a%d", i), Text: fmt.Sprintf("Drug %d blocks enzyme %d.", i, i)},
				{ID: fmt.Sprintf("b%d", i), Text: "Paracetamol relieves fever."},
			}})
	}
	return tasks
}

// Three workers on two servers, plus a worker that claims a batch and dies:
// every pair is labeled once, as one labeler over all tasks labels it.
func TestQueueWorkers(t *testing.T) { storedbtest.Each(t, testQueueWorkers) }

func testQueueWorkers(t *testing.T, target string) {
	var n1, n2 atomic.Int64
	srv1, srv2 := echoLM(t, &n1), echoLM(t, &n2)
	defer srv1.Close()
	defer srv2.Close()
	tasks := queueTasks()
	ctx := context.Background()
	single, err := (&PerplexityLabeler{Scorer: lm.NewHTTPScorer(openai.New(srv1.URL, openai.Options{Model: "toy"}))}).Label(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}

	// Each request now takes 40 ms, so a batch takes longer than the three
	// workers take to start: each claims a batch of its own, and both
	// servers are asked (without it, on a fast machine, one worker could
	// label every free batch before another starts).
	for _, srv := range []*httptest.Server{srv1, srv2} {
		h := srv.Config.Handler
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(40 * time.Millisecond)
			h.ServeHTTP(w, r)
		})
	}
	n1.Store(0)

	rs, err := tracker.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ls, err := labelstore.NewStore(rs.DB())
	if err != nil {
		t.Fatal(err)
	}
	q, err := workqueue.Open(rs.DB())
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := BatchPayloads(tasks, 2)
	if err != nil || len(payloads) != 4 || payloads[3] != `["q6"]` {
		t.Fatalf("payloads %v, %v", payloads, err)
	}
	if _, err := q.Enqueue(ctx, "job", payloads); err != nil {
		t.Fatal(err)
	}
	// The dead worker holds batch 0 for 300 ms and never finishes it.
	if b, _, err := q.Claim(ctx, "job", "dead", 300*time.Millisecond); err != nil || b.N != 0 {
		t.Fatalf("dead claim %+v, %v", b, err)
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make(chan error, 3)
	for k := range 3 {
		srv := []string{srv1.URL, srv2.URL}[k%2]
		w := &workqueue.Worker{Queue: q, Job: "job", Owner: fmt.Sprint("w", k), Lease: time.Second}
		do := LabelBatches(&PerplexityLabeler{Scorer: lm.NewHTTPScorer(openai.New(srv, openai.Options{Model: "toy"})), Store: ls, RunID: "job"}, tasks)
		wg.Go(func() {
			n, err := w.Run(ctx, do)
			total.Add(int64(n))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if total.Load() != 4 || n1.Load() == 0 || n2.Load() == 0 {
		t.Errorf("workers completed %d batches (want 4); server requests %d and %d (want both > 0)", total.Load(), n1.Load(), n2.Load())
	}
	got, err := ls.List(labelstore.Filter{RunID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(single) {
		t.Fatalf("%d labels stored, want %d", len(got), len(single))
	}
	sort.Slice(got, func(i, j int) bool { return got[i].ExampleID < got[j].ExampleID })
	sort.Slice(single, func(i, j int) bool { return single[i].ExampleID < single[j].ExampleID })
	for i := range single {
		g, w := got[i], single[i]
		if g.ExampleID != w.ExampleID || g.Label.Label != w.Label || g.PPLWith != w.PPLWith || g.PPLWithout != w.PPLWithout {
			t.Errorf("pair %s: %s %v/%v, single process %s %s %v/%v", g.ExampleID, g.Label.Label, g.PPLWithout, g.PPLWith, w.ExampleID, w.Label, w.PPLWithout, w.PPLWith)
		}
	}
}
