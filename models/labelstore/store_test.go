package labelstore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/models/filter"
)

func openTestStore(t *testing.T, target string) *Store {
	t.Helper()
	s, err := OpenStore(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mk(run, q, chunk, lab, method string, pw, ps float64) Label {
	return Label{RunID: run, Key: Key(q, chunk, "text of "+chunk), ExampleID: q + "#" + chunk, Question: q,
		Snippet: "text of " + chunk, ChunkID: chunk, Label: lab, Method: method, PPLWithout: pw, PPLWith: ps, DatasetName: "toy"}
}

func counts(t *testing.T, s *Store, run string) map[string]int {
	t.Helper()
	c, err := s.Counts(run)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStoreReviewUndo(t *testing.T) { storedbtest.Each(t, testStoreReviewUndo) }

func testStoreReviewUndo(t *testing.T, target string) {
	s := openTestStore(t, target)
	labels := []Label{mk("a", "q1", "c1", filter.Helpful, MethodPerplexity, 3, 2), mk("a", "q1", "c2", filter.NotHelpful, MethodPerplexity, 3, 4)}
	if err := s.Put(labels); err != nil {
		t.Fatal(err)
	}
	if labels[0].ID == 0 || labels[1].ID == 0 || labels[0].Created.IsZero() {
		t.Fatalf("ids/created not set: %+v", labels)
	}
	id := labels[0].ID
	steps := []struct {
		name       string
		do         func() (Record, error)
		effective  string
		provenance string
		reviews    int
		counts     map[string]int
	}{
		{"flip", func() (Record, error) { return s.Review(id, ReviewFlip, "ana") }, filter.NotHelpful, ProvenanceHuman, 1, map[string]int{filter.Helpful: 0, filter.NotHelpful: 2}},
		{"confirm", func() (Record, error) { return s.Review(id, ReviewConfirm, "bo") }, filter.NotHelpful, ProvenanceHuman, 2, map[string]int{filter.Helpful: 0, filter.NotHelpful: 2}},
		{"set helpful", func() (Record, error) { return s.Review(id, filter.Helpful, "cy") }, filter.Helpful, ProvenanceHuman, 3, map[string]int{filter.Helpful: 1, filter.NotHelpful: 1}},
		{"undo", func() (Record, error) { return s.Undo(id) }, filter.NotHelpful, ProvenanceHuman, 2, map[string]int{filter.Helpful: 0, filter.NotHelpful: 2}},
		{"undo", func() (Record, error) { return s.Undo(id) }, filter.NotHelpful, ProvenanceHuman, 1, nil},
		{"undo to machine", func() (Record, error) { return s.Undo(id) }, filter.Helpful, ProvenanceMachine, 0, map[string]int{filter.Helpful: 1, filter.NotHelpful: 1}},
	}
	for i, st := range steps {
		r, err := st.do()
		if err != nil {
			t.Fatalf("step %d %s: %v", i, st.name, err)
		}
		if r.Effective != st.effective || r.Provenance != st.provenance || r.Reviews != st.reviews || r.Label.Label != filter.Helpful {
			t.Fatalf("step %d %s: effective %s provenance %s reviews %d machine %s; want %s %s %d %s",
				i, st.name, r.Effective, r.Provenance, r.Reviews, r.Label.Label, st.effective, st.provenance, st.reviews, filter.Helpful)
		}
		if st.counts != nil && !reflect.DeepEqual(counts(t, s, "a"), st.counts) {
			t.Fatalf("step %d %s: counts %v, want %v", i, st.name, counts(t, s, "a"), st.counts)
		}
	}
	r, _ := s.Review(id, filter.Helpful, "dee")
	if r.Reviewer != "dee" || r.Reviewed.IsZero() {
		t.Errorf("reviewer %q at %v", r.Reviewer, r.Reviewed)
	}
	if _, err := s.Undo(labels[1].ID); err == nil || !strings.Contains(err.Error(), "has no review") {
		t.Errorf("undo without review: %v", err)
	}
	if _, err := s.Review(id, "yes", "x"); err == nil || !strings.Contains(err.Error(), `action "yes"`) {
		t.Errorf("bad action: %v", err)
	}
	if _, err := s.Review(999, filter.Helpful, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	// A machine relabel of the same key keeps the id and the human review.
	again := []Label{mk("a", "q1", "c1", filter.NotHelpful, MethodPerplexity, 3, 3.5)}
	if err := s.Put(again); err != nil {
		t.Fatal(err)
	}
	r, _ = s.Get(id)
	if again[0].ID != id || r.Label.Label != filter.NotHelpful || r.Effective != filter.Helpful || r.Reviews != 1 || r.PPLWith != 3.5 {
		t.Errorf("after relabel: id %d (want %d) %+v", again[0].ID, id, r)
	}
}

func TestStorePutValidates(t *testing.T) { storedbtest.Each(t, testStorePutValidates) }

func testStorePutValidates(t *testing.T, target string) {
	s := openTestStore(t, target)
	bad := []Label{mk("a", "q", "c1", filter.Helpful, MethodEvidence, 0, 0), mk("a", "q", "c2", "HELPFUL", MethodEvidence, 0, 0)}
	err := s.Put(bad)
	if err == nil || !strings.Contains(err.Error(), `label 2`) || !strings.Contains(err.Error(), `field "label"`) {
		t.Fatalf("error %v", err)
	}
	if c := counts(t, s, "a"); c[filter.Helpful]+c[filter.NotHelpful] != 0 {
		t.Fatalf("a rejected batch stored labels: %v", c)
	}
}

func TestStoreDiff(t *testing.T) { storedbtest.Each(t, testStoreDiff) }

func testStoreDiff(t *testing.T, target string) {
	s := openTestStore(t, target)
	must(t, s.Put([]Label{
		mk("a", "q1", "same", filter.Helpful, MethodPerplexity, 2, 1),
		mk("a", "q1", "changed", filter.Helpful, MethodPerplexity, 2, 1),
		mk("a", "q1", "onlyA", filter.NotHelpful, MethodPerplexity, 2, 3),
		mk("b", "q1", "same", filter.Helpful, MethodPerplexity, 2, 1.5),
		mk("b", "q1", "changed", filter.NotHelpful, MethodPerplexity, 2, 2.5),
		mk("b", "q1", "onlyB", filter.Helpful, MethodPerplexity, 2, 1),
	}))
	d, err := s.Diff("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if d.Same != 1 || len(d.Changed) != 1 || len(d.OnlyA) != 1 || len(d.OnlyB) != 1 ||
		d.Changed[0].A.ChunkID != "changed" || d.Changed[0].A.Effective != filter.Helpful || d.Changed[0].B.Effective != filter.NotHelpful ||
		d.OnlyA[0].ChunkID != "onlyA" || d.OnlyB[0].ChunkID != "onlyB" {
		t.Fatalf("diff %+v", d)
	}
	// A review that agrees with run a removes the change: diffs use effective labels.
	if _, err := s.Review(d.Changed[0].B.ID, ReviewFlip, "ana"); err != nil {
		t.Fatal(err)
	}
	d, _ = s.Diff("a", "b")
	if d.Same != 2 || len(d.Changed) != 0 {
		t.Fatalf("after review: %+v", d)
	}
}

func TestStoreListFilters(t *testing.T) { storedbtest.Each(t, testStoreListFilters) }

func testStoreListFilters(t *testing.T, target string) {
	s := openTestStore(t, target)
	must(t, s.Put([]Label{
		mk("p", "q1", "c1", filter.Helpful, MethodPerplexity, 2, 1.95), // |Δ| 0.05, evidence disagrees
		mk("p", "q1", "c2", filter.NotHelpful, MethodPerplexity, 2, 5), // |Δ| 3, evidence agrees
		mk("p", "q1", "c3", filter.Helpful, MethodPerplexity, 2, 1.92), // |Δ| 0.08, no evidence label
		mk("e", "q1", "c1", filter.NotHelpful, MethodEvidence, 0, 0),
		mk("e", "q1", "c2", filter.NotHelpful, MethodEvidence, 0, 0),
	}))
	ids := func(recs []Record, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.RunID+"/"+r.ChunkID)
		}
		return out
	}
	yes := true
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"run", Filter{RunID: "p"}, []string{"p/c1", "p/c2", "p/c3"}},
		{"class", Filter{Class: filter.Helpful}, []string{"p/c1", "p/c3"}},
		{"method", Filter{Method: MethodEvidence}, []string{"e/c1", "e/c2"}},
		{"disagreement", Filter{Disagreement: true}, []string{"p/c1", "e/c1"}},
		{"low confidence", Filter{LowConfidence: 0.1}, []string{"p/c1", "p/c3"}},
		{"low confidence, tighter", Filter{LowConfidence: 0.06}, []string{"p/c1"}},
		{"limit", Filter{RunID: "p", Limit: 2}, []string{"p/c1", "p/c2"}},
		{"reviewed", Filter{Reviewed: &yes}, nil},
	} {
		if got := ids(s.List(tc.f)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A review resolving the disagreement removes both from the list.
	recs, _ := s.List(Filter{RunID: "e", Class: filter.NotHelpful, Limit: 1})
	if _, err := s.Review(recs[0].ID, filter.Helpful, "ana"); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.List(Filter{Disagreement: true})); got != nil {
		t.Errorf("disagreement after review: %v", got)
	}
	if got := ids(s.List(Filter{Reviewed: &yes})); !reflect.DeepEqual(got, []string{"e/c1"}) {
		t.Errorf("reviewed: %v", got)
	}
	if _, err := s.List(Filter{Class: "maybe"}); err == nil {
		t.Error("bad class accepted")
	}
}

func TestStoreExportImport(t *testing.T) { storedbtest.Each(t, testStoreExportImport) }

func testStoreExportImport(t *testing.T, target string) {
	s := openTestStore(t, target)
	dir := t.TempDir()
	// Importing the golden file and exporting it again gives the same bytes.
	for _, golden := range []string{"examples.json", "examples.jsonl"} {
		run := "import-" + golden
		if _, err := s.Import(run, filepath.Join(goldenDir, golden)); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, golden)
		n, err := s.Export(run, out, "")
		if err != nil || n != 2 {
			t.Fatalf("export %s: %d, %v", golden, n, err)
		}
		got, _ := os.ReadFile(out)
		want, _ := os.ReadFile(filepath.Join(goldenDir, golden))
		if string(got) != string(want) {
			t.Errorf("%s: export differs from import\n got %s\nwant %s", golden, got, want)
		}
	}
	// Export writes effective labels.
	recs, _ := s.List(Filter{RunID: "import-examples.json", Class: filter.Helpful})
	if _, err := s.Review(recs[0].ID, ReviewFlip, "ana"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "flipped.jsonl")
	if _, err := s.Export("import-examples.json", out, filter.FormatJSONL); err != nil {
		t.Fatal(err)
	}
	exs, err := filter.ReadExamples(out)
	if err != nil {
		t.Fatal(err)
	}
	if exs[0].Answer != filter.NotHelpful || exs[1].Answer != filter.NotHelpful {
		t.Errorf("exported %+v", exs)
	}
	if _, err := s.Export("nope", out, ""); err == nil || !strings.Contains(err.Error(), `run "nope"`) {
		t.Errorf("export of unknown run: %v", err)
	}
	// A bad file stores nothing and loses nothing.
	before := counts(t, s, "import-examples.json")
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"x","question":`+quote(filter.Instruction("e", "q"))+`,"answer":"[HELPFUL]"}`+"\n"+
		`{"id":"y","question":`+quote(filter.Instruction("e2", "q"))+`,"answer":"maybe"}`+"\n"), 0o644)
	_, err = s.Import("import-examples.json", bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `record 2 (line 2): field "answer"`) {
		t.Fatalf("import of bad file: %v", err)
	}
	if after := counts(t, s, "import-examples.json"); !reflect.DeepEqual(before, after) {
		t.Fatalf("counts %v → %v after a failed import", before, after)
	}
	r, _ := s.Get(recs[0].ID)
	if r.Effective != filter.NotHelpful || r.Reviews != 1 {
		t.Fatalf("review lost after failed import: %+v", r)
	}
}

func TestStoreReopen(t *testing.T) { storedbtest.Each(t, testStoreReopen) }

func testStoreReopen(t *testing.T, target string) {
	path := target
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	l := []Label{mk("a", "q", "c", filter.Helpful, MethodEvidence, 0, 0)}
	must(t, s.Put(l))
	if _, err := s.Review(l[0].ID, ReviewFlip, "ana"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Get(l[0].ID)
	if err != nil || r.Effective != filter.NotHelpful || r.Label.Label != filter.Helpful || r.DatasetName != "toy" {
		t.Fatalf("reopened: %+v, %v", r, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Concurrent labelers store in completion order; identical runs must still
// export identical files.
func TestExportOrderIndependentOfStorageOrder(t *testing.T) {
	storedbtest.Each(t, testExportOrderIndependentOfStorageOrder)
}

func testExportOrderIndependentOfStorageOrder(t *testing.T, target string) {
	s := openTestStore(t, target)
	dir := t.TempDir()
	base := []Label{mk("", "q2", "c1", filter.Helpful, MethodPerplexity, 3, 2), mk("", "q1", "c2", filter.NotHelpful, MethodPerplexity, 3, 4),
		mk("", "q1", "c1", filter.Helpful, MethodPerplexity, 3, 1)}
	var files []string
	for run, order := range [][]int{{0, 1, 2}, {2, 0, 1}} {
		id := string(rune('a' + run))
		for _, i := range order {
			l := base[i]
			l.RunID, l.QueryID = id, l.Question
			if err := s.Put([]Label{l}); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(dir, id+".jsonl")
		if _, err := s.Export(id, out, ""); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		files = append(files, string(b))
	}
	if files[0] != files[1] {
		t.Errorf("exports differ:\n%s\n---\n%s", files[0], files[1])
	}
	if i, j := strings.Index(files[0], "q1#c1"), strings.Index(files[0], "q2#c1"); i < 0 || j < i {
		t.Errorf("not in question order:\n%s", files[0])
	}
}

// goldenDir holds the RAG² example files, beside their schema in models/filter.
var goldenDir = filepath.Join("..", "filter", "testdata")

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The score cache answers a stored triple and a second Put replaces it (an
// upsert on both engines).
func TestScoreCache(t *testing.T) { storedbtest.Each(t, testScoreCache) }

func testScoreCache(t *testing.T, target string) {
	s := openTestStore(t, target)
	ctx := t.Context()
	if _, ok, err := s.CachedLogProbs(ctx, "m", "p", "t"); err != nil || ok {
		t.Fatalf("empty cache: ok %v, err %v", ok, err)
	}
	must(t, s.PutLogProbs(ctx, "m", "p", "t", []float64{-1.5, -0.25}))
	must(t, s.PutLogProbs(ctx, "m", "p", "t", []float64{-2, -0.125}))
	must(t, s.PutLogProbs(ctx, "other", "p", "t", []float64{-9}))
	lp, ok, err := s.CachedLogProbs(ctx, "m", "p", "t")
	if err != nil || !ok || !reflect.DeepEqual(lp, []float64{-2, -0.125}) {
		t.Errorf("cached = %v %v %v, want [-2 -0.125]", lp, ok, err)
	}
}
