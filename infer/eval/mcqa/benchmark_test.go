package mcqa

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// TestMIRAGEBenchmark: the shared benchmark.json's counts, and --limit 20
// taking the first ids in string order.
func TestMIRAGEBenchmark(t *testing.T) {
	path := testutil.SharedPath(t, "data/mirage/benchmark.json")
	ds, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		n     int
		first string
		last  string // the 20th id
	}{
		{"mmlu", 1089, "anatomy-000", "anatomy-019"},
		{"medqa", 1273, "0000", "0019"},
		{"medmcqa", 4183, "0009b2fd-7e72-4ed0-b486-92ccb24e43f3", ""},
		{"pubmedqa", 500, "10135926", ""},
	}
	if len(ds) != len(want) {
		t.Fatalf("%d datasets, want %d", len(ds), len(want))
	}
	for i, w := range want {
		if ds[i].Name != w.name || len(ds[i].Questions) != w.n {
			t.Errorf("dataset %d: %s with %d questions, want %s with %d", i, ds[i].Name, len(ds[i].Questions), w.name, w.n)
		}
	}
	lim, err := Load(path, LoadOptions{Limit: 20, Datasets: []string{"pubmedqa", "medqa", "mmlu", "medmcqa"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		qs := lim[i].Questions
		if len(qs) != 20 || qs[0].ID != w.first || (w.last != "" && qs[19].ID != w.last) {
			t.Errorf("%s --limit 20: %d questions, %s…%s", w.name, len(qs), qs[0].ID, qs[len(qs)-1].ID)
		}
		for j := 1; j < len(qs); j++ {
			if qs[j-1].ID >= qs[j].ID {
				t.Errorf("%s: ids out of order: %s before %s", w.name, qs[j-1].ID, qs[j].ID)
			}
		}
		// The 20 are the smallest ids of the whole dataset.
		if full := ds[i].Questions; full[19].ID != qs[19].ID {
			t.Errorf("%s: 20th id %s, full list's %s", w.name, qs[19].ID, full[19].ID)
		}
	}
	if _, err := Load(path, LoadOptions{Datasets: []string{"bioasq"}}); err == nil || !strings.Contains(err.Error(), `no dataset "bioasq"`) {
		t.Errorf("missing dataset: %v", err)
	}
}

// TestBadBenchmark: bad files are refused naming the file, id and field.
func TestBadBenchmark(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"missing_options.json", `{"medqa": {"0001": {"question": "Q?", "answer": "A"}}}`, `id "0001": field "options"`},
		{"answer_not_option.json", `{"medqa": {"0001": {"question": "Q?", "options": {"A": "x", "B": "y"}, "answer": "C"}}}`, `id "0001": field "answer": "C" is not among the options A,B`},
		{"duplicate.json", `{"medqa": {"0001": {"question": "Q?", "options": {"A": "x", "B": "y"}, "answer": "A"}, "0001": {"question": "R?", "options": {"A": "x", "B": "y"}, "answer": "B"}}}`, `id "0001": field "id": duplicate id`},
		{"duplicate.jsonl", "{\"id\": \"7\", \"question\": \"Q?\", \"options\": {\"A\": \"x\", \"B\": \"y\"}, \"answer\": \"A\"}\n{\"id\": \"7\", \"question\": \"R?\", \"options\": {\"A\": \"x\", \"B\": \"y\"}, \"answer\": \"B\"}\n", `line 2: dataset "duplicate", id "7": field "id": duplicate id (first at line 1)`},
		{"empty_option.jsonl", `{"id": "8", "question": "Q?", "options": {"A": "x", "B": " "}, "answer": "A"}`, `id "8": field "options": option B is empty`},
		{"bad_letter.jsonl", `{"id": "9", "question": "Q?", "options": {"A": "x", "b": "y"}, "answer": "A"}`, `id "9": field "options": key "b"`},
		{"rag2_label.jsonl", `{"id": "10", "question": "Which? A) x B) y", "answer": "[HELPFUL]"}`, `id "10": field "answer": "[HELPFUL]" is not among the options A,B`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want the file and %q", c.name, err, c.want)
		}
	}
}

// TestRAG2Format: options written inside the question text, RAG²'s way.
func TestRAG2Format(t *testing.T) {
	p := filepath.Join(t.TempDir(), "medqa.jsonl")
	body := `{"id": "q1", "question": "A 5-year-old boy (see A) above) presents with conjunctivitis. Which is the cause? A) Metapneumovirus B) Influenza virus C) Rhinovirus D) Adenovirus", "answer": "D"}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := ds[0].Questions[0]
	if ds[0].Name != "medqa" || q.Question != "A 5-year-old boy (see A) above) presents with conjunctivitis. Which is the cause?" || len(q.Options) != 4 || q.Options[3] != (Option{"D", "Adenovirus"}) || q.Options[0] != (Option{"A", "Metapneumovirus"}) {
		t.Errorf("parsed %+v", q)
	}
}

// TestOutputsMIRAGETree: a prediction tree in MIRAGE's layout, re-scored
// in mirage mode, gives what MIRAGE's src/evaluate.py gives on it: per
// dataset, the mean over questions of locate_answer(first output's text
// after `"answer_choice": "`, stripped) == answer.
func TestOutputsMIRAGETree(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write := func(rel string, outs ...string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, _ := jsonMarshal(outs)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// medqa (answers A B C D B): evaluate.py reads A, A (fallback), C, B, A → 2/5.
	write("medqa/cot/llm/test_0001.json", `{"answer_choice": "A"}`, `{"answer_choice": "B"}`)
	write("medqa/cot/llm/test_0002.json", `I think B`)
	write("medqa/cot/llm/test_0003.json", `"answer_choice": "C"`)
	write("medqa/cot/llm/test_0004.json", `{"answer_choice": "B, maybe D"}`)
	write("medqa/cot/llm/test_0005.json", `{"answer_choice": "E"}`)
	write("medqa/cot/llm/test_9999.json", `ignored: not in the benchmark`)
	// pubmedqa (answers A B C): A (fallback on "yes"), B, C → 3/3.
	write("pubmedqa/cot/llm/test_10001.json", `yes`)
	write("pubmedqa/cot/llm/test_10002.json", `Option B`)
	write("pubmedqa/cot/llm/test_10003.json", `the answer: C`)
	outs, err := ReadOutputs(root, ds)
	if err != nil {
		t.Fatal(err)
	}
	rec := newMemRecorder()
	rep, err := Rescore(Config{Parse: ParseMIRAGE}, ds, outs, rec)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Conditions[0]
	if c.Condition != "cot/llm" || c.Datasets[0].Correct != 2 || c.Datasets[1].Correct != 3 || !near(c.Average, (0.4+1)/2) {
		t.Errorf("rescored %+v", c)
	}
	// MIRAGE's "proportion std" √(acc(1−acc)/n).
	if !near(c.Datasets[0].Std, 0.21908902300206645) {
		t.Errorf("std %v", c.Datasets[0].Std)
	}
	os.Remove(filepath.Join(root, "medqa/cot/llm/test_0003.json"))
	if _, err := ReadOutputs(root, ds); err == nil || !strings.Contains(err.Error(), `id "0003"`) {
		t.Errorf("missing prediction file: %v", err)
	}
}

// TestOutputsJSONL: {id, raw} lines without dataset resolve unique ids.
func TestOutputsJSONL(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "outs.jsonl")
	os.WriteFile(p, []byte(`{"id": "0001", "raw": "{\"answer_choice\": \"A\"}"}
{"id": "10002", "raw": "no"}
{"id": "0002", "raw": "maybe C", "condition": "other"}
`), 0o644)
	outs, err := ReadOutputs(p, ds)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Rescore(Config{}, ds, outs, newMemRecorder())
	if err != nil {
		t.Fatal(err)
	}
	// conditions sorted: other, outputs.
	o := rep.Conditions[1]
	if o.Condition != OutputsCondition || o.Datasets[0].Correct != 1 || o.Datasets[1].Correct != 1 || o.Missing != 6 {
		t.Errorf("outputs %+v", o)
	}
	if oth := rep.Conditions[0]; oth.Datasets[0].N != 1 || oth.ParseFailures != 1 {
		t.Errorf("other %+v", oth)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
