package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/data/workqueue"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
)

// startServe runs `ragforge serve` on a free loopback port and returns its
// base URL once /healthz answers.
func startServe(t *testing.T, bin, db string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, append([]string{"--db", db, "serve", "--addr", addr, "--no-workbench", "--open-read"}, args...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
	}
	t.Fatalf("serve on %s did not come up: %s", addr, stderr.String())
	return ""
}

// Four `label perplexity --job` processes label one job through PostgreSQL
// against two `ragforge serve` instances; one of them, whose server answers
// slowly (a delaying proxy in front of the first), is killed with SIGKILL
// while it holds a batch. The batch returns to the queue when its lease
// expires, every pair ends labeled exactly once, and the labels equal a
// single-process run's (SQLite, the default store).
func TestLabelWorkersSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts 2 servers and 5 labeling processes")
	}
	pg := storedbtest.Postgres(t)
	qdir := tinyqwen.Dir(t)
	dir, corpus, qa := sampleFiles(t)
	bin := buildBinary(t, dir)
	sdb := filepath.Join(dir, "serve.db")
	pipe := filepath.Join(dir, "pipeline")
	run(t, "pipeline", "build", "--db", sdb, "--corpus", corpus, "--out", pipe)
	urls := []string{startServe(t, bin, sdb, "--pipeline", pipe, "--llm", "hf:"+qdir), startServe(t, bin, sdb, "--pipeline", pipe, "--llm", "hf:"+qdir)}
	target, _ := url.Parse(urls[0])
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Second)
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer slow.Close()

	common := []string{"label", "perplexity", "--corpus", corpus, "--qa", qa, "--chunk-size", "60", "--chunk-overlap", "0",
		"--top-n", "2", "--limit", "8", "--retries", "1"}
	// The single-process reference, on the default SQLite store.
	ref := filepath.Join(dir, "ref.db")
	out, err := exec.Command(bin, append([]string{"--db", ref, "--json"}, append(common, "--scorer", "openai:"+urls[1]+"/v1")...)...).Output()
	if err != nil {
		t.Fatalf("single-process run: %v", err)
	}
	var refRes labelResult
	if err := json.Unmarshal(out, &refRes); err != nil || refRes.Labels != 16 {
		t.Fatalf("single-process run: %+v (%v) from %s", refRes, err, out)
	}

	job := append([]string{"--db", pg}, append(common, "--job", "ap-ppl", "--batch-size", "1", "--lease", "2s", "--log-batches")...)
	servers := []string{slow.URL, urls[0], urls[1], urls[0]} // worker 0 is the victim
	var wg sync.WaitGroup
	outs := make([]string, 4)
	errs := make([]error, 4)
	claimed := make(chan struct{})
	// The victim starts first and is killed once it holds a batch; the
	// others start then.
	for k := range 4 {
		if k == 1 {
			select {
			case <-claimed:
			case <-time.After(60 * time.Second):
				t.Fatal("the victim claimed no batch within 60s")
			}
		}
		cmd := exec.Command(bin, append(job, "--scorer", "openai:"+servers[k]+"/v1")...)
		var stdout syncBuffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stderr)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if k == 0 && strings.Contains(sc.Text(), "claimed") {
					cmd.Process.Signal(syscall.SIGKILL) // mid-batch: its server takes a second per request
					close(claimed)
				}
			}
			io.Copy(io.Discard, stderr)
			errs[k] = cmd.Wait()
			outs[k] = stdout.String() + strings.Join(lines, "\n")
		})
	}
	wg.Wait()
	if ee, ok := errs[0].(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("victim: %v, want killed by SIGKILL", errs[0])
	}
	finishers := 0
	for k := 1; k < 4; k++ {
		if errs[k] != nil {
			t.Fatalf("worker %d: %v\n%s", k, errs[k], outs[k])
		}
		if strings.Contains(outs[k], "16 labels stored") {
			finishers++
		}
	}
	if finishers != 1 {
		t.Errorf("%d workers finished the run, want 1:\n%s", finishers, strings.Join(outs[1:], "\n---\n"))
	}

	st, err := tracker.Open(pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ri, err := st.Get("ap-ppl"); err != nil || ri.Status != tracker.StatusDone {
		t.Errorf("job run: %+v, %v", ri, err)
	}
	q, err := workqueue.Open(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := q.Counts(context.Background(), "ap-ppl"); err != nil || c["done"] != 8 || c["pending"]+c["claimed"] != 0 {
		t.Errorf("batches %v, %v; want 8 done", c, err)
	}
	var retaken int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM work_batches WHERE job = 'ap-ppl' AND attempts > 1`).Scan(&retaken); err != nil || retaken < 1 {
		t.Errorf("%d batches claimed twice (%v); want the victim's batch taken over", retaken, err)
	}

	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ls.List(labelstore.Filter{RunID: "ap-ppl"})
	if err != nil {
		t.Fatal(err)
	}
	rst, err := labelstore.OpenStore(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rst.Close()
	want, err := rst.List(labelstore.Filter{RunID: refRes.RunID})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]labelstore.Record{}
	for _, r := range got {
		if _, dup := byID[r.ExampleID]; dup {
			t.Errorf("pair %s labeled twice", r.ExampleID)
		}
		byID[r.ExampleID] = r
	}
	if len(got) != len(want) {
		t.Errorf("%d labels in the job, %d in the single-process run", len(got), len(want))
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }
	for _, w := range want {
		g, ok := byID[w.ExampleID]
		if !ok {
			t.Errorf("pair %s not labeled by the job", w.ExampleID)
			continue
		}
		if g.Label.Label != w.Label.Label || rel(g.PPLWith, w.PPLWith) > 1e-6 || rel(g.PPLWithout, w.PPLWithout) > 1e-6 {
			t.Errorf("pair %s: job %s %v/%v, single process %s %v/%v", w.ExampleID, g.Label.Label, g.PPLWithout, g.PPLWith,
				w.Label.Label, w.PPLWithout, w.PPLWith)
		}
	}
	t.Logf("%d pairs labeled once each by 3 surviving workers; %d batch(es) taken over after the SIGKILL", len(got), retaken)
}

// --workers N in one process (queue in the default SQLite store) and
// --shard i/N (static, a run per shard) label the same pairs as one worker.
func TestLabelWorkersInProcessAndShards(t *testing.T) {
	qdir := tinyqwen.Dir(t)
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	common := []string{"label", "perplexity", "--db", db, "--corpus", corpus, "--qa", qa, "--scorer", "hf:" + qdir,
		"--chunk-size", "60", "--chunk-overlap", "0", "--top-n", "2", "--limit", "4", "--json"}
	labels := func(args ...string) map[string]string {
		t.Helper()
		var res labelResult
		out := run(t, append(common, args...)...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		st, err := labelstore.OpenStore(db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		recs, err := st.List(labelstore.Filter{RunID: res.RunID})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range recs {
			m[r.ExampleID] = fmt.Sprintf("%s %.9g %.9g", r.Label.Label, r.PPLWithout, r.PPLWith)
		}
		return m
	}
	want := labels()
	if len(want) != 8 {
		t.Fatalf("single worker: %d labels, want 8", len(want))
	}
	if got := labels("--workers", "3", "--batch-size", "1"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("--workers 3:\n%v\nwant\n%v", got, want)
	}
	shards := labels("--shard", "0/2")
	for k, v := range labels("--shard", "1/2") {
		if _, dup := shards[k]; dup {
			t.Errorf("pair %s in both shards", k)
		}
		shards[k] = v
	}
	if fmt.Sprint(shards) != fmt.Sprint(want) {
		t.Errorf("shards 0/2 + 1/2:\n%v\nwant\n%v", shards, want)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "0/2", "--workers", "2"}, "cannot be combined"},
		{[]string{"--shard", "2/2"}, "0 ≤ i < N"},
		{[]string{"--scorer", "hf:" + qdir}, "several scorers need --workers or --job"},
		{[]string{"--workers", "2", "--resume", "x"}, "--resume continues a one-process run"},
		{[]string{"--workers", "2", "--lease", "10ms"}, "--lease"},
	} {
		if code, stderr := runErr(append(common, bad.args...)...); code == 0 || !strings.Contains(stderr, bad.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", bad.args, code, stderr, bad.want)
		}
	}
}
