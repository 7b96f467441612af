package tracker

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/storedb/storedbtest"
)

var t0 = time.Date(2026, 11, 29, 16, 30, 0, 0, time.UTC)

func openAt(t *testing.T, path string, now time.Time) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now }
	return s
}

func TestLifecycleAndReopen(t *testing.T) { storedbtest.Each(t, testLifecycleAndReopen) }

func testLifecycleAndReopen(t *testing.T, target string) {
	dir := t.TempDir()
	path := target
	s := openAt(t, path, t0)

	type cfg struct {
		K     int     `json:"k"`
		Alpha float64 `json:"alpha"`
	}
	ok, err := s.Start("BM25 eval", cfg{K: 8, Alpha: 0.7}, "v0.1.0", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ok.ID, "20261129-163000-bm25-eval-") || len(ok.ID) != len("20261129-163000-bm25-eval-")+4 {
		t.Errorf("id = %q", ok.ID)
	}
	if err := ok.LogMetrics(map[string]float64{"P@1": 0.45, "Recall@1": 0.59}, 0); err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "run.trec")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ok.Artifact("trec-run", art); err != nil {
		t.Fatal(err)
	}
	if err := ok.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if err := ok.Finish(nil); err == nil || !strings.Contains(err.Error(), "not a running run") {
		t.Errorf("second Finish err = %v", err)
	}

	s.now = func() time.Time { return t0.Add(time.Minute) }
	bad, err := s.Start("train", map[string]any{"lr": 1e-4}, "v0.1.0", "simplego")
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Metric("loss", 1, 2.5); err != nil {
		t.Fatal(err)
	}
	if err := bad.Finish(fmt.Errorf("step 2: %w", errors.New("loss is NaN"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, t0)
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := s.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("schema_version = %d (%v), want %d", v, err, SchemaVersion)
	}
	got, err := s.Get(ok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusDone || got.Error != "" || got.Kind != "BM25 eval" || got.Version != "v0.1.0" || got.Backend != "cpu" ||
		string(got.Config) != `{"k":8,"alpha":0.7}` || !got.StartedAt.Equal(t0) || got.FinishedAt == nil || !got.FinishedAt.Equal(t0) {
		t.Errorf("run = %+v", got.RunInfo)
	}
	if len(got.Metrics) != 2 || got.Metrics[0] != (MetricPoint{"P@1", 0, 0.45, t0}) || got.Metrics[1] != (MetricPoint{"Recall@1", 0, 0.59, t0}) {
		t.Errorf("metrics = %+v", got.Metrics)
	}
	// sha256 of "hello\n", 6 bytes.
	wantArt := ArtifactInfo{"trec-run", art, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", 6, t0}
	if len(got.Artifacts) != 1 || got.Artifacts[0] != wantArt {
		t.Errorf("artifacts = %+v, want %+v", got.Artifacts, wantArt)
	}
	failed, err := s.Get(bad.ID)
	if err != nil {
		t.Fatal(err)
	}
	if failed.Status != StatusFailed || failed.Error != "step 2: loss is NaN" || failed.FinishedAt == nil {
		t.Errorf("failed run = %+v", failed.RunInfo)
	}
}

func TestErrors(t *testing.T) { storedbtest.Each(t, testErrors) }

func testErrors(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	r, err := s.Start("x", nil, "v", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	ghost := &Run{ID: "no-such-run", s: s}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nan metric", r.Metric("loss", 3, math.NaN()), `metric "loss" step 3: value NaN is not finite`},
		{"empty metric name", r.Metric("", 3, 1), "empty name"},
		{"metric of unknown run", ghost.Metric("loss", 0, 1), "foreign key"},
		{"item of unknown run", ghost.PutItem("k", "a", 1), "foreign key"},
		{"finish unknown run", ghost.Finish(nil), "not a running run"},
		{"missing artifact", r.Artifact("model", "/no/such/file"), "artifact /no/such/file"},
		{"bad config", func() error { _, err := s.Start("x", func() {}, "v", "cpu"); return err }(), `field "config"`},
		{"empty kind", func() error { _, err := s.Start("", nil, "v", "cpu"); return err }(), `field "kind": empty`},
	}
	for _, tt := range tests {
		// SQLite says "FOREIGN KEY constraint failed", PostgreSQL "violates foreign key constraint".
		if tt.err == nil || !strings.Contains(strings.ToLower(tt.err.Error()), strings.ToLower(tt.want)) {
			t.Errorf("%s: err = %v, want containing %q", tt.name, tt.err, tt.want)
		}
	}
	if _, err := s.Get("zzz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(zzz) err = %v, want ErrNotFound", err)
	}
}

func TestNewerSchemaRejected(t *testing.T) { storedbtest.Each(t, testNewerSchemaRejected) }

func testNewerSchemaRejected(t *testing.T, target string) {
	path := target
	s := openAt(t, path, t0)
	if _, err := s.db.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Errorf("Open err = %v", err)
	}
}

func TestListGetPrefixCompare(t *testing.T) { storedbtest.Each(t, testListGetPrefixCompare) }

func testListGetPrefixCompare(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	a, _ := s.Start("eval", nil, "v", "cpu")
	b, _ := s.Start("eval", nil, "v", "cpu")
	s.now = func() time.Time { return t0.Add(time.Hour) }
	c, err := s.Start("train", nil, "v", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}

	ids := func(rs []RunInfo, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		var x []string
		for _, r := range rs {
			x = append(x, r.ID)
		}
		return strings.Join(x, ",")
	}
	newestEval := max(a.ID, b.ID) // same second: id descending
	oldestEval := min(a.ID, b.ID)
	tests := []struct {
		name string
		opt  ListOptions
		want string
	}{
		{"all newest first", ListOptions{}, c.ID + "," + newestEval + "," + oldestEval},
		{"by kind", ListOptions{Kind: "train"}, c.ID},
		{"by status", ListOptions{Status: StatusDone}, b.ID},
		{"limit", ListOptions{Limit: 1}, c.ID},
	}
	for _, tt := range tests {
		if got := ids(s.List(tt.opt)); got != tt.want {
			t.Errorf("%s: List = %s, want %s", tt.name, got, tt.want)
		}
	}

	// "20261129-163000-eval-" is shared by a and b; "20261129-17" only by c.
	if _, err := s.Get("20261129-163000-eval-"); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("ambiguous prefix err = %v", err)
	}
	if got, err := s.Get("20261129-17"); err != nil || got.ID != c.ID {
		t.Errorf("prefix Get = %v, %v; want %s", got, err, c.ID)
	}
	if _, err := s.Get("20261129_"); !errors.Is(err, ErrNotFound) { // _ is literal, not a LIKE wildcard
		t.Errorf("Get with _ err = %v, want ErrNotFound", err)
	}

	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Metric("acc", 1, 0.5))
	must(a.Metric("acc", 2, 0.7))
	must(a.Metric("loss", 1, 1.0))
	must(c.Metric("acc", 1, 0.9))
	must(c.Metric("f1", 1, 0.3))
	diffs, err := s.Compare(a.ID, "20261129-17")
	if err != nil {
		t.Fatal(err)
	}
	accA, accB := 0.7, 0.9 // variables: float64 arithmetic, not exact constant folding
	want := []MetricDiff{
		{Name: "acc", A: accA, B: accB, HasA: true, HasB: true, Diff: accB - accA}, // last step of a is 2
		{Name: "f1", B: 0.3, HasB: true},
		{Name: "loss", A: 1.0, HasA: true},
	}
	if fmt.Sprint(diffs) != fmt.Sprint(want) {
		t.Errorf("Compare = %+v, want %+v", diffs, want)
	}
}

func TestItems(t *testing.T) { storedbtest.Each(t, testItems) }

func testItems(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	r, _ := s.Start("label", nil, "v", "cpu")
	type label struct {
		Helpful bool    `json:"helpful"`
		PPL     float64 `json:"ppl"`
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.PutItem("filter", "q2", label{true, 3.5}))
	must(r.PutItem("filter", "q1", label{false, 9}))
	must(r.PutItem("filter", "q1", label{true, 1.25})) // replaces
	must(r.PutItem("other", "q1", 7))

	var l label
	if found, err := r.GetItem("filter", "q1", &l); err != nil || !found || l != (label{true, 1.25}) {
		t.Errorf("GetItem q1 = %v %v %+v", found, err, l)
	}
	if found, err := r.GetItem("filter", "q9", &l); err != nil || found {
		t.Errorf("GetItem q9 = %v %v", found, err)
	}
	items, err := r.Items("filter")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Key+"="+string(it.JSON))
	}
	if want := `q1={"helpful":true,"ppl":1.25} q2={"helpful":true,"ppl":3.5}`; strings.Join(got, " ") != want {
		t.Errorf("Items = %s, want %s", strings.Join(got, " "), want)
	}
	// A later run resumes from the stored items of the first one.
	again, err := s.Attach(r.ID[:len(r.ID)-2])
	if err != nil || again.ID != r.ID {
		t.Fatalf("Attach = %v, %v", again, err)
	}
	if items, _ := again.Items("other"); len(items) != 1 || string(items[0].JSON) != "7" {
		t.Errorf("Items(other) = %v", items)
	}
}

// TestConcurrent writes from 8 goroutines through one Store and, at the same
// time, from a second Store on the same file (as a second process would).
func TestConcurrent(t *testing.T) { storedbtest.Each(t, testConcurrent) }

func testConcurrent(t *testing.T, target string) {
	path := target
	s1 := openAt(t, path, t0)
	defer s1.Close()
	s2 := openAt(t, path, t0)
	defer s2.Close()
	r, err := s1.Start("train", nil, "v", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	r2 := &Run{ID: r.ID, s: s2}
	const workers, steps = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, 4*workers*steps)
	for w := range workers {
		run := r
		if w%2 == 1 {
			run = r2
		}
		wg.Go(func() {
			for i := range steps {
				errs <- run.Metric(fmt.Sprintf("m%d", w), i, float64(i))
				errs <- run.PutItem("k", fmt.Sprintf("%d-%d", w, i), i)
				_, err := run.s.Start("side", nil, "v", "cpu")
				errs <- err
				_, err = run.s.List(ListOptions{})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := s1.Get(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	items, _ := s2.Items(r.ID, "k")
	side, _ := s1.List(ListOptions{Kind: "side"})
	if len(d.Metrics) != workers*steps || len(items) != workers*steps || len(side) != workers*steps {
		t.Errorf("metrics %d, items %d, side runs %d; want %d each", len(d.Metrics), len(items), len(side), workers*steps)
	}
	if err := s1.Check(); err != nil {
		t.Fatal(err)
	}
}
