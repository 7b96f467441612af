package label

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

// PerplexityTasks pairs each question with its BM25 top-n chunks and
// refuses a question without a reference answer, naming the file and field.
func TestPerplexityTasks(t *testing.T) {
	chunks := []data.Chunk{
		{ID: "a#0", DocID: "a", Text: "formalin fixation of tissue samples"},
		{ID: "b#0", DocID: "b", Text: "staining with hematoxylin and eosin"},
		{ID: "c#0", DocID: "c", Text: "tissue samples are embedded in paraffin"},
	}
	idx, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	for _, c := range []struct {
		name    string
		queries []data.Query
		n       int
		pairs   []int
		err     string
	}{
		{"top 2", []data.Query{{ID: "q1", Text: "tissue samples", Answer: "formalin"}}, 2, []int{2}, ""},
		{"two questions", []data.Query{{ID: "q1", Text: "tissue", Answer: "x"}, {ID: "q2", Text: "hematoxylin staining", Answer: "y"}}, 1, []int{1, 1}, ""},
		{"no answer", []data.Query{{ID: "q9", Text: "tissue", Answer: " "}}, 1, nil, `qa.csv: question q9: field "Ground_Truth": empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tasks, err := PerplexityTasks(c.queries, idx, c.n, "qa.csv")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for i, task := range tasks {
				if len(task.Candidates) != c.pairs[i] || task.Target != c.queries[i].Answer || task.QueryID != c.queries[i].ID {
					t.Errorf("task %d: %+v, want %d candidates of %s", i, task, c.pairs[i], c.queries[i].ID)
				}
				total += c.pairs[i]
			}
			if CountPairs(tasks) != total {
				t.Errorf("CountPairs = %d, want %d", CountPairs(tasks), total)
			}
		})
	}
	if tasks, _ := PerplexityTasks([]data.Query{{ID: "q1", Text: "tissue samples", Answer: "a"}}, idx, 3, "qa.csv"); tasks[0].Candidates[0].ID == "b#0" {
		t.Errorf("best candidate %s, want a tissue chunk first", tasks[0].Candidates[0].ID)
	}
}

// RunICT checks its options and output file before anything is drawn,
// and without a Starter writes the examples and records nothing.
func TestRunICT(t *testing.T) {
	chunks := []data.Chunk{
		{ID: "a#0", DocID: "a", Text: "Tissue is fixed in formalin for one day. The sample is then washed in water twice."},
		{ID: "b#0", DocID: "b", Text: "Slides are stained with hematoxylin for five minutes. Excess stain is removed with acid alcohol."},
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		job  ICTJob
		err  string
	}{
		{"jsonl", ICTJob{ICT: ICTOptions{PerChunk: 1, NumNegatives: 1, Seed: 1}, Out: filepath.Join(dir, "ict.jsonl")}, ""},
		{"random negatives", ICTJob{ICT: ICTOptions{PerChunk: 2, NumNegatives: 1, Seed: 1}, RandomNegatives: true, Out: filepath.Join(dir, "ict.json")}, ""},
		{"no output", ICTJob{ICT: ICTOptions{PerChunk: 1, NumNegatives: 1}}, "label ict: no output file"},
		{"bad options", ICTJob{ICT: ICTOptions{PerChunk: -1}, Out: filepath.Join(dir, "x.jsonl")}, "label ict: ict options: field \"PerChunk\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := RunICT(context.Background(), chunks, c.job, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ex, err := filter.ReadExamples(c.job.Out)
			if err != nil {
				t.Fatal(err)
			}
			if res.RunID != "" || res.Labels != len(ex) || res.Counts[filter.Helpful]+res.Counts[filter.NotHelpful] != len(ex) || len(ex) == 0 {
				t.Errorf("result %+v for %d examples written", res, len(ex))
			}
		})
	}
}

// RunEvidence stores the labels under a run of the store it is given,
// records the counts, exports them, and needs a store and an index.
func TestRunEvidence(t *testing.T) {
	chunks := []data.Chunk{
		{ID: "a#0", DocID: "a", Text: "Tissue is fixed in 10% neutral buffered formalin for 24 hours."},
		{ID: "b#0", DocID: "b", Text: "Fixed tissue slides are stained with hematoxylin for five minutes."},
		{ID: "c#0", DocID: "c", Text: "Tissue sections are cut at 4 microns on a microtome."},
	}
	idx, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	queries := []data.Query{{ID: "q1", Text: "How long is tissue fixed in formalin?", Context: "fixed in 10% neutral buffered formalin for 24 hours", Answer: "24 hours"}}
	dir := t.TempDir()
	st, err := tracker.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := filepath.Join(dir, "ev.jsonl")
	job := EvidenceJob{Queries: queries, Index: idx, Labeler: EvidenceLabeler{TopN: 3, DatasetName: "ap"}, Out: out, Flags: map[string]string{"qa": "test"}}
	var res Result
	if err := st.Record("v", "simplego", func(start tracker.Starter) error {
		res, err = RunEvidence(context.Background(), job, start)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if res.RunID == "" || res.Counts[filter.Helpful] != 1 || res.Counts[filter.NotHelpful] != 2 || res.Labels != 3 || res.Out != out {
		t.Errorf("result %+v, want 1 helpful and 2 not helpful labels of a run", res)
	}
	if ex, err := filter.ReadExamples(out); err != nil || len(ex) != 3 {
		t.Errorf("exported %d examples (%v), want 3", len(ex), err)
	}
	d, err := st.Get(res.RunID)
	if err != nil || d.Status != tracker.StatusDone || d.Kind != "label-evidence" {
		t.Errorf("run %+v (%v), want a done label-evidence run", d, err)
	}
	for _, c := range []struct {
		name  string
		job   EvidenceJob
		start tracker.Starter
		err   string
	}{
		{"no store", job, nil, "a run store is required"},
		{"no index", EvidenceJob{Queries: queries}, func(string, any) (*tracker.Run, error) { return nil, nil }, "no BM25 index"},
	} {
		if _, err := RunEvidence(context.Background(), c.job, c.start); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		}
	}
}
