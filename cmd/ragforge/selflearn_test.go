package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
)

// A self-learning round through the CLI with an OpenAI-compatible generator
// served on loopback: queries and hypothetical documents come over HTTP,
// one document's requests always fail with HTTP 500 and are counted, the round finishes.
func TestSelflearnOpenAIGeneratorRound(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a retriever; skipped with -short")
	}
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	// A small corpus: the first 8 sample passages, and the questions about them.
	all, err := sample.Bytes(sample.CorpusFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(all), "\n", 9)
	corpus := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpus, []byte(strings.Join(lines[:8], "")), 0o644)
	_, qaPath, err := sample.WriteTo(filepath.Join(dir, "sample"))
	if err != nil {
		t.Fatal(err)
	}
	var calls, fails atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		calls.Add(1)
		prompt := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(prompt, "ten times the volume") {
			// One document's requests always fail: after the client's
			// retries its item must be a counted error, not a stop.
			fails.Add(1)
			http.Error(w, `{"error":"overloaded"}`, 500)
			return
		}
		words := strings.Fields(prompt)
		text := strings.Join(words[max(0, len(words)-12):], " ")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	}))
	defer srv.Close()

	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	out := run(t, "selflearn", "--db", db, "--corpus", corpus, "--retriever", bert, "--generator", "openai:"+srv.URL+"/v1#fake",
		"--eval-qa", qaPath, "--eval-limit", "12", "--rounds", "1", "--candidates", "2", "--max-length", "96",
		"--retriever-batch", "4", "--recipe", "pretrained", "--work", filepath.Join(dir, "work"), "--json")
	var rep struct {
		RunID     string `json:"run_id"`
		Generator string `json:"generator"`
		Rounds    []struct {
			Round  int `json:"round"`
			Counts struct {
				Sampled         int `json:"sampled"`
				Queries         int `json:"queries"`
				QueryErrors     int `json:"query_errors"`
				Candidates      int `json:"candidates"`
				CandidateErrors int `json:"candidate_errors"`
				Triplets        int `json:"triplets"`
			} `json:"counts"`
			Variants []struct{ Name string } `json:"variants"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("selflearn --json: %v\n%s", err, out)
	}
	if len(rep.Rounds) < 2 {
		t.Fatalf("want round 0 and round 1, got %d rounds", len(rep.Rounds))
	}
	c := rep.Rounds[len(rep.Rounds)-1].Counts
	t.Logf("generator %s, %d HTTP calls (%d failed): %+v", rep.Generator, calls.Load(), fails.Load(), c)
	if calls.Load() < 8 || c.Queries == 0 || c.Triplets == 0 {
		t.Errorf("the round did not generate through the server: calls %d, counts %+v", calls.Load(), c)
	}
	if fails.Load() < 1 || c.QueryErrors+c.CandidateErrors < 1 {
		t.Errorf("the failed request should be counted per item: fails %d, counts %+v", fails.Load(), c)
	}
	if !strings.Contains(run(t, "runs", "list", "--db", db, "--kind", "selflearn"), "done") {
		t.Error("the selflearn run is not stored as done")
	}
}
