package runarchive

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

func open(t *testing.T, target string) (*tracker.Store, *labelstore.Store) {
	t.Helper()
	rs, err := tracker.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	ls, err := labelstore.NewStore(rs.DB())
	if err != nil {
		t.Fatal(err)
	}
	return rs, ls
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seed stores two runs: a finished one with metrics (values that a lossy
// float or time conversion would change), an artifact, items, and labels
// with reviews; and one still running, without finished_at.
func seed(t *testing.T, rs *tracker.Store, ls *labelstore.Store) []string {
	art := filepath.Join(t.TempDir(), "report.json")
	must(t, os.WriteFile(art, []byte(`{"ndcg@10": 0.5}`), 0o644))
	a, err := rs.Start("label perplexity", map[string]any{"scorer": "qwen2-7b", "note": "ünïcode ✓"}, "v1", "simplego")
	must(t, err)
	must(t, a.LogMetrics(map[string]float64{"helpful_rate": 0.1 + 0.2, "tiny": 1e-300, "neg": -math.MaxFloat64}, 3))
	must(t, a.Metric("helpful_rate", 4, 1.0/3))
	must(t, a.Artifact("report", art))
	must(t, a.PutItem("pair", "q1|c1", map[string]any{"ppl": 2.5}))
	must(t, a.PutItem("pair", "q1|c2", []int{1, 2}))
	labels := []labelstore.Label{
		{RunID: a.ID, Key: labelstore.Key("q1", "c1", "s1"), ExampleID: "q1#c1", QueryID: "q1", Question: "q1?", Target: "t",
			Snippet: "s1", ChunkID: "c1", DatasetName: "toy", Label: filter.Helpful, Method: labelstore.MethodPerplexity,
			Scorer: "qwen2", PPLWithout: 3.25, PPLWith: 1.0 / 7, Score: 0.1 + 0.7},
		{RunID: a.ID, Key: labelstore.Key("q1", "c2", "s2"), ExampleID: "q1#c2", QueryID: "q1", Question: "q1?", Snippet: "s2",
			Label: filter.NotHelpful, Method: labelstore.MethodPerplexity, Scorer: "qwen2", PPLWithout: 3.25, PPLWith: 4},
	}
	must(t, ls.Put(labels))
	_, err = ls.Review(labels[1].ID, labelstore.ReviewFlip, "ana")
	must(t, err)
	_, err = ls.Review(labels[1].ID, labelstore.ReviewConfirm, "bo")
	must(t, err)
	must(t, a.Finish(nil))
	b, err := rs.Start("encode", nil, "v1", "xla:cuda")
	must(t, err)
	must(t, b.PutItem("shard", "0", "done"))
	return []string{a.ID, b.ID}
}

func export(t *testing.T, rs *tracker.Store, ls *labelstore.Store, ids []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	must(t, Export(&buf, rs, ls, ids))
	return buf.Bytes()
}

// SQLite → middle (SQLite or PostgreSQL) → SQLite gives back the same file.
func TestRoundTrip(t *testing.T) { storedbtest.Each(t, testRoundTrip) }

func testRoundTrip(t *testing.T, middle string) {
	src, srcLabels := open(t, storedbtest.SQLite(t))
	ids := seed(t, src, srcLabels)
	a := export(t, src, srcLabels, ids)

	mid, midLabels := open(t, middle)
	got, err := Import(bytes.NewReader(a), "a.jsonl", mid, midLabels)
	must(t, err)
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("imported %v, want %v", got, ids)
	}
	b := export(t, mid, midLabels, ids)

	dst, dstLabels := open(t, storedbtest.SQLite(t))
	_, err = Import(bytes.NewReader(b), "b.jsonl", dst, dstLabels)
	must(t, err)
	c := export(t, dst, dstLabels, ids)
	if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
		t.Fatalf("round trip changed the runs:\nsource  %s\nmiddle  %s\nback    %s", a, b, c)
	}
	// What readers see is the same too: effective labels, counts, statuses.
	for _, st := range []struct {
		rs *tracker.Store
		ls *labelstore.Store
	}{{mid, midLabels}, {dst, dstLabels}} {
		d, err := st.rs.Get(ids[0])
		must(t, err)
		if d.Status != tracker.StatusDone || len(d.Metrics) != 4 || len(d.Artifacts) != 1 {
			t.Errorf("imported run: status %s, %d metrics, %d artifacts", d.Status, len(d.Metrics), len(d.Artifacts))
		}
		c, err := st.ls.Counts(ids[0])
		must(t, err)
		if c[filter.Helpful] != 2 || c[filter.NotHelpful] != 0 {
			t.Errorf("imported counts = %v, want 2 helpful (the flip)", c)
		}
	}

	// A second import of the same file is refused as a whole.
	if _, err := Import(bytes.NewReader(a), "a.jsonl", mid, midLabels); !errors.Is(err, tracker.ErrExists) {
		t.Errorf("second import err = %v, want ErrExists", err)
	}
	if rs, _ := mid.List(tracker.ListOptions{}); len(rs) != 2 {
		t.Errorf("after refused import: %d runs, want 2", len(rs))
	}
}

func TestImportErrors(t *testing.T) {
	rs, ls := open(t, storedbtest.SQLite(t))
	tests := []struct{ name, in, want string }{
		{"empty", ``, "line 1 (header)"},
		{"wrong header", `{"format":"x","version":1}`, "is not {format"},
		{"bad line", "{\"format\":\"ragforge-runs\",\"version\":1}\n{\"run\":{\"id\":1}}\n", "line 2"},
		{"unknown field", "{\"format\":\"ragforge-runs\",\"version\":1}\n{\"runs\":{}}\n", `unknown field "runs"`},
		{"label of another run", "{\"format\":\"ragforge-runs\",\"version\":1}\n" +
			`{"run":{"id":"r","kind":"k","config":"{}","status":"done","started_at":"2026-01-01T00:00:00Z"},"labels":[{"run_id":"x"}]}` + "\n",
			`field "run_id": "x" is not the run's id "r"`},
	}
	for _, tt := range tests {
		_, err := Import(strings.NewReader(tt.in), "f.jsonl", rs, ls)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want containing %q", tt.name, err, tt.want)
		}
	}
}
