package label

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
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
