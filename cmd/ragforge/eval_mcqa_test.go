package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/eval/mcqa"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/testutil/tinyt5"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// mcqaServe builds a BM25 pipeline of two small corpora with a random tiny
// T5 filter and generator, and serves it (OpenAI chat endpoint included)
// in-process as `ragforge serve` would.
func mcqaServe(t *testing.T) (url, dir string) {
	t.Helper()
	spm := sharedDir(t, "fixtures/tokenizer")
	ftok, err := sentencepiece.LoadT5(spm)
	if err != nil {
		t.Fatal(err)
	}
	ftok.AddTokens([]string{filter.Helpful, filter.NotHelpful})
	gtok, _ := sentencepiece.LoadT5(spm)
	m := pipeline.DefaultManifest()
	m.Filter.MaxSeqLength, m.Filter.DocStride = 64, 16
	chunk := func(id, text string) data.Chunk { return data.Chunk{ID: id, DocID: id, Text: text, End: len(text)} }
	dir = filepath.Join(t.TempDir(), "pipeline")
	err = pipeline.Save(dir, pipeline.Parts{Manifest: m,
		Corpora: []pipeline.CorpusPart{
			{Name: "textbooks", Chunks: []data.Chunk{chunk("tb#0", "the facial nerve exits the skull at the stylomastoid foramen"), chunk("tb#1", "insulin is made by the beta cells of the pancreas")}},
			{Name: "pubmed", Chunks: []data.Chunk{chunk("pm#0", "conjunctivitis and pharyngitis in children suggest adenovirus"), chunk("pm#1", "the patient was treated with antibiotics"),
				// Words the random generator writes, so its rationales retrieve.
				chunk("pm#2", "macroscopia luvas luz actividade")}},
		},
		Filter: tinyt5.Save(t, ftok, "", 0), Generator: tinyt5.Save(t, gtok, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	comps, err := serve.Load(serve.Config{PipelineDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Options{OpenRead: true}, comps)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); comps.Pipeline.Close() })
	return ts.URL, dir
}

// TestEvalMCQAAgainstServe: cot, rag and rag2 on MIRAGE questions with
// ragforge serve as the answerer and the retrieval, then a resume that asks
// nothing again, and the in-process pipeline directory.
func TestEvalMCQAAgainstServe(t *testing.T) {
	bench := sharedDir(t, "data/mirage/benchmark.json")
	url, dir := mcqaServe(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	limit := "20"
	if testing.Short() {
		limit = "2"
	}
	args := []string{"--db", db, "--json", "eval", "mcqa", "--benchmark", bench, "--limit", limit,
		"--conditions", "cot,rag,rag2", "--answerer", "openai:" + url + "/v1", "--pipeline", url, "--k", "3", "--max-tokens", "8", "--concurrency", "4"}
	var res struct {
		RunID  string `json:"run_id"`
		Report struct {
			Questions  map[string]int `json:"questions"`
			Conditions []struct {
				Condition string `json:"condition"`
				Missing   int    `json:"missing"`
				Datasets  []struct {
					N int `json:"n"`
				} `json:"datasets"`
				Filter *struct {
					Questions     int     `json:"questions"`
					MeanRetrieved float64 `json:"mean_retrieved"`
				} `json:"filter"`
			} `json:"conditions"`
			Pairs []struct {
				N int `json:"n"`
			} `json:"mcnemar"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(run(t, args...)), &res); err != nil {
		t.Fatal(err)
	}
	n := 20
	if testing.Short() {
		n = 2
	}
	if len(res.Report.Questions) != 4 || len(res.Report.Conditions) != 3 || len(res.Report.Pairs) != 3 || res.Report.Pairs[0].N != 4*n {
		t.Fatalf("report %+v", res.Report)
	}
	for _, c := range res.Report.Conditions {
		for _, d := range c.Datasets {
			if d.N != n || c.Missing != 0 {
				t.Errorf("%s: %d questions answered, %d missing; want %d, 0", c.Condition, d.N, c.Missing, n)
			}
		}
		if (c.Condition == "rag2") != (c.Filter != nil) || (c.Filter != nil && (c.Filter.Questions != 4*n || c.Filter.MeanRetrieved == 0)) {
			t.Errorf("%s filter %+v", c.Condition, c.Filter)
		}
	}
	// Resuming the finished run finds every item stored.
	out := run(t, append(args[:len(args):len(args)], "--resume", res.RunID)...)
	if !strings.Contains(out, res.RunID) {
		t.Errorf("resume output %s", out)
	}
	// Resuming with a setup that changes answers is refused.
	bad := append(args[:len(args):len(args)], "--resume", res.RunID)
	bad[slices.Index(bad, "--k")+1] = "5"
	if code, stderr := runErr(bad...); code == 0 || !strings.Contains(stderr, "--k 5 differs from the run's 3") {
		t.Errorf("resume with another --k: exit %d, %s", code, stderr)
	}
	// The pipeline directory served in-process, with the text table.
	out = run(t, "--db", db, "eval", "mcqa", "--benchmark", bench, "--limit", "1", "--datasets", "pubmedqa",
		"--conditions", "rag,rag2-nofilter", "--answerer", "openai:"+url+"/v1", "--pipeline", dir, "--k", "2", "--max-tokens", "4")
	for _, want := range []string{"rag2-nofilter", "pubmedqa", "McNemar rag vs rag2-nofilter: 1 questions"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestEvalMCQARefusals: flags that make no sense are errors.
func TestEvalMCQARefusals(t *testing.T) {
	bench := sharedDir(t, "data/mirage/benchmark.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--parse", "loose"}, `parse mode "loose"`},
		{[]string{"--conditions", "rag", "--answerer", "openai:http://127.0.0.1:1/v1"}, `"rag" needs retrieval`},
		{[]string{"--conditions", "cot,cot"}, `"cot" repeated`},
		{[]string{"--datasets", "bioasq"}, `no dataset "bioasq"`},
		{[]string{"--outputs", "x.jsonl", "--answerer", "openai:http://127.0.0.1:1/v1"}, "do not apply"},
	} {
		args := append([]string{"--db", filepath.Join(t.TempDir(), "r.db"), "eval", "mcqa", "--benchmark", bench}, c.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// TestEvalMCQALocalT5: a local T5 answerer with option log-likelihood from
// the same T5, on one question.
func TestEvalMCQALocalT5(t *testing.T) {
	bench := sharedDir(t, "data/mirage/benchmark.json")
	spm := sharedDir(t, "fixtures/tokenizer")
	tok, err := sentencepiece.LoadT5(spm)
	if err != nil {
		t.Fatal(err)
	}
	gen := tinyt5.Save(t, tok, "", 0)
	out := run(t, "--db", filepath.Join(t.TempDir(), "r.db"), "--json", "eval", "mcqa", "--benchmark", bench, "--limit", "1",
		"--datasets", "medqa", "--answerer", "t5:"+gen, "--scorer", "t5:"+gen, "--max-tokens", "4")
	for _, want := range []string{`"loglik_acc"`, `"loglik_acc_norm"`, `"n": 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestEvalMCQAOutputs: --outputs re-scores a MIRAGE prediction tree in
// --parse mirage mode: medqa 0000 read as its answer, 0001 as A (MIRAGE's
// fallback).
func TestEvalMCQAOutputs(t *testing.T) {
	bench := sharedDir(t, "data/mirage/benchmark.json")
	ds, err := mcqa.Load(bench, mcqa.LoadOptions{Datasets: []string{"medqa"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	leaf := filepath.Join(root, "medqa", "cot", "llm")
	os.MkdirAll(leaf, 0o755)
	q0, q1 := ds[0].Questions[0], ds[0].Questions[1]
	os.WriteFile(filepath.Join(leaf, "test_"+q0.ID+".json"), []byte(`["{\"answer_choice\": \"`+q0.Answer+`\"}"]`), 0o644)
	os.WriteFile(filepath.Join(leaf, "test_"+q1.ID+".json"), []byte(`["no idea"]`), 0o644)
	out := run(t, "--db", filepath.Join(t.TempDir(), "r.db"), "--json", "eval", "mcqa", "--benchmark", bench, "--limit", "2",
		"--datasets", "medqa", "--outputs", root, "--parse", "mirage")
	var res struct {
		Report mcqa.Report `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := 1
	if q1.Answer == "A" {
		want = 2
	}
	c := res.Report.Conditions
	if len(c) != 1 || c[0].Condition != "cot/llm" || c[0].Datasets[0].Correct != want || c[0].Datasets[0].MIRAGEFallbacks != 1 || c[0].ParseFailures != 1 {
		t.Errorf("report %+v", c)
	}
}

// TestEvalMCQANoFilter: rag2 against a pipeline without a filter is refused
// before any question is answered; rag2-nofilter runs.
func TestEvalMCQANoFilter(t *testing.T) {
	bench := sharedDir(t, "data/mirage/benchmark.json")
	tok, err := sentencepiece.LoadT5(sharedDir(t, "fixtures/tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	gen := tinyt5.Save(t, tok, "", 0)
	dir := filepath.Join(t.TempDir(), "pipeline")
	text := "hematoxylin stains nuclei blue"
	if err := pipeline.Save(dir, pipeline.Parts{Manifest: pipeline.DefaultManifest(),
		Corpora: []pipeline.CorpusPart{{Name: "tb", Chunks: []data.Chunk{{ID: "tb#0", DocID: "tb", Text: text, End: len(text)}}}}}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "r.db")
	args := []string{"--db", db, "eval", "mcqa", "--benchmark", bench, "--limit", "1", "--datasets", "pubmedqa",
		"--answerer", "t5:" + gen, "--pipeline", dir, "--max-tokens", "2", "--conditions"}
	if code, stderr := runErr(append(args, "rag2")...); code == 0 || !strings.Contains(stderr, "the server ran no filter (no filter); rag2 needs one") {
		t.Errorf("rag2 without a filter: exit %d, %s", code, stderr)
	}
	if out := run(t, append(args, "rag2-nofilter")...); !strings.Contains(out, "rag2-nofilter") {
		t.Errorf("rag2-nofilter: %s", out)
	}
}
