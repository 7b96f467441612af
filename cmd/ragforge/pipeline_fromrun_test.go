package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/eval"
)

// Issue 30, acceptance 6: a pipeline built --from-run an evaluated hybrid
// records the run and serves, for every question of the evaluation, the
// top k the evaluation scored (same weights, fusion depth, BM25 and
// chunking); built from the flags' defaults (0.3/0.7, depth 100) it would
// not. A flag disagreeing with the run is refused.
func TestPipelineServesEvaluatedTopK(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	var res evalRetrievalResult
	out := run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--chunk-size", "300", "--chunk-overlap", "50",
		"--retriever", "hybrid", "--encoder", bert, "--dense-weight", "0.6", "--bm25-weight", "0.4", "--k", "1,2,4,8", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pl := filepath.Join(dir, "pipeline")
	run(t, "pipeline", "build", "--db", db, "--from-run", res.RunID, "--corpus", corpus, "--k", "4", "--out", pl)
	m, err := pipeline.ReadManifest(filepath.Join(pl, pipeline.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	r := m.Retrieval
	if m.FromRun != res.RunID || r.Mode != "hybrid" || r.DenseWeight != 0.6 || r.BM25Weight != 0.4 || r.K != 4 || r.Depth != 1000 || m.Chunk.Size != 300 || m.Chunk.Overlap != 50 {
		t.Fatalf("pipeline.json: from_run %q, retrieval %+v, chunk %+v; want run %s, hybrid 0.6/0.4, k 4, depth 1000, chunks 300/50", m.FromRun, r, m.Chunk, res.RunID)
	}

	evaluated := readTRECRun(t, res.Files["trec"])
	questions, err := data.LoadAPQA(qa)
	if err != nil {
		t.Fatal(err)
	}
	c, err := serve.Load(serve.Config{PipelineDir: pl})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Options{}, c)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer func() { ts.Close(); srv.Close(); c.Pipeline.Close() }()
	same := 0
	for _, q := range questions {
		body, _ := json.Marshal(serve.RetrieveRequest{Query: q.Text, K: 4})
		resp, err := http.Post(ts.URL+"/v1/retrieve", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var rr serve.RetrieveResponse
		err = json.NewDecoder(resp.Body).Decode(&rr)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("question %s: %d %v", q.ID, resp.StatusCode, err)
		}
		var served []retrieval.Hit
		for _, h := range rr.Hits {
			served = append(served, retrieval.Hit{ID: h.ID, Score: h.Score})
		}
		want := ids(eval.Rank(evaluated[q.ID], false)[:min(4, len(evaluated[q.ID]))])
		if got := ids(eval.Rank(served, false)); strings.Join(got, " ") == strings.Join(want, " ") {
			same++
		} else {
			t.Errorf("question %s: served top 4 %v, evaluated %v", q.ID, got, want)
		}
	}
	t.Logf("served top 4 equals the evaluated top 4 on %d of %d questions", same, len(questions))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "bm25"}, "--mode bm25: run " + res.RunID + " evaluated hybrid"},
		{[]string{"--chunk-size", "512"}, "--chunk-size 512: run " + res.RunID + " evaluated 300"},
		{[]string{"--k", "5"}, "--k 5: run " + res.RunID + " evaluated k [1 2 4 8]"},
	} {
		args := append([]string{"pipeline", "build", "--db", db, "--from-run", res.RunID, "--corpus", corpus, "--out", filepath.Join(dir, "p2")}, tc.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}

func ids(hits []retrieval.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// readTRECRun reads a TREC run file (qid Q0 docid rank score tag).
func readTRECRun(t *testing.T, path string) map[string][]retrieval.Hit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run := map[string][]retrieval.Hit{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		score, err := strconv.ParseFloat(fs[4], 64)
		if err != nil {
			t.Fatal(err)
		}
		run[fs[0]] = append(run[fs[0]], retrieval.Hit{ID: fs[2], Score: score})
	}
	return run
}

func TestRetrievalLabel(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		dense, bm25 float64
		want        string
	}{
		{"hybrid", 0, 1, "BM25 (dense weight 0)"},
		{"hybrid", 0.3, 0.7, "hybrid (dense 0.3, bm25 0.7)"},
		{"bm25", 0, 0, "bm25"},
	} {
		if got := retrievalLabel(tc.mode, tc.dense, tc.bm25); got != tc.want {
			t.Errorf("retrievalLabel(%s, %v, %v) = %q, want %q", tc.mode, tc.dense, tc.bm25, got, tc.want)
		}
	}
}
