package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// tinyBERT writes the sample corpus and a random tiny BERT bi-encoder.
func tinyBERT(t *testing.T) (dir, corpus, qa, db, enc string) {
	t.Helper()
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir = t.TempDir()
	corpus, qa, err := sample.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(dir, "runs.db")
	enc = filepath.Join(dir, "bert-tiny")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", enc)
	return dir, corpus, qa, db, enc
}

// An IVF index searched with nprobe 1 under-fills and eval retrieval says
// so, in the summary and per query; visiting every list fills every query.
func TestEvalRetrievalIVFShortfall(t *testing.T) {
	dir, corpus, qa, db, enc := tinyBERT(t)
	evalIVF := func(nprobe string, asJSON bool) (evalRetrievalResult, string) {
		args := []string{"eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--retriever", "dense",
			"--encoder", enc, "--faiss", "IVF8,Flat", "--nprobe", nprobe, "--k", "1,8", "--out", filepath.Join(dir, "out-"+nprobe)}
		var res evalRetrievalResult
		if !asJSON {
			return res, run(t, args...)
		}
		out := run(t, append(args, "--json")...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("--json: %v\n%s", err, out)
		}
		return res, out
	}
	short, _ := evalIVF("1", true)
	if short.Shortfall == 0 {
		t.Errorf("nprobe 1 over 8 lists: no shortfall reported (%d chunks)", short.Chunks)
	}
	b, err := os.ReadFile(short.Files["per_query"])
	if err != nil || !bytes.Contains(b, []byte(`"shortfall":`)) || !bytes.Contains(b, []byte(`"hits":`)) {
		t.Errorf("per_query.jsonl lacks hits/shortfall (%v):\n%.400s", err, b)
	}
	full, _ := evalIVF("8", true)
	if full.Shortfall != 0 {
		t.Errorf("nprobe 8 of 8 lists: shortfall %d, want 0", full.Shortfall)
	}
	_, text := evalIVF("1", false)
	if !strings.Contains(text, "shortfall:") || !strings.Contains(text, "Success") {
		t.Errorf("summary lacks the shortfall line or Success column:\n%s", text)
	}
	// Settings that make no sense are errors, not silent defaults.
	for _, bad := range [][]string{
		{"--retriever", "bm25", "--nprobe", "4"},
		{"--retriever", "dense", "--encoder", enc, "--faiss", "Flat", "--nprobe", "4"},
		{"--retriever", "dense", "--encoder", enc, "--faiss", "IVF8,Flat", "--ef-search", "64"},
		{"--retriever", "dense", "--encoder", enc, "--nprobe", "-1"},
	} {
		args := append([]string{"eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa}, bad...)
		if code, _ := runErr(args...); code == 0 {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// pipeline build --faiss HNSW32 --ef-search 128 records both in
// pipeline.json; the served pipeline searches an HNSW index with efSearch
// 128, and serve's --ef-search overrides it.
func TestPipelineBuildHNSWServes(t *testing.T) {
	dir, corpus, _, db, enc := tinyBERT(t)
	out := filepath.Join(dir, "pipeline")
	run(t, "pipeline", "build", "--db", db, "--corpus", "lab="+corpus, "--retriever", enc, "--faiss", "HNSW32", "--ef-search", "128", "--out", out)
	b, err := os.ReadFile(filepath.Join(out, "pipeline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Factory string             `json:"faiss_factory"`
		Search  dense.SearchParams `json:"faiss_search"`
	}
	if err := json.Unmarshal(b, &man); err != nil || man.Factory != "HNSW32" || man.Search.EfSearch != 128 {
		t.Fatalf("pipeline.json: factory %q search %+v (%v)", man.Factory, man.Search, err)
	}
	for _, tc := range []struct {
		override dense.SearchParams
		want     int
	}{{dense.SearchParams{}, 128}, {dense.SearchParams{EfSearch: 40}, 40}} {
		comps, err := serve.Load(serve.Config{PipelineDir: out, Search: tc.override})
		if err != nil {
			t.Fatal(err)
		}
		fx := comps.Pipeline.Corpora[0].Dense.Faiss()
		if fx.EfSearch() != tc.want {
			t.Errorf("override %+v: efSearch %d, want %d", tc.override, fx.EfSearch(), tc.want)
		}
		s, err := serve.New(serve.Options{OpenRead: true}, comps)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		resp, err := http.Post(ts.URL+"/v1/retrieve", "application/json", strings.NewReader(`{"query":"hematoxylin staining","mode":"dense","k":3}`))
		if err != nil {
			t.Fatal(err)
		}
		var rr serve.RetrieveResponse
		if err := json.NewDecoder(resp.Body).Decode(&rr); err != nil || resp.StatusCode != 200 || len(rr.Hits) != 3 {
			t.Errorf("dense retrieve: HTTP %d, %d hits (%v)", resp.StatusCode, len(rr.Hits), err)
		}
		resp.Body.Close()
		ts.Close()
		s.Close()
		comps.Pipeline.Close()
	}
	// nprobe on an HNSW pipeline, and faiss settings without a retriever.
	if _, err := serve.Load(serve.Config{PipelineDir: out, Search: dense.SearchParams{Nprobe: 4}}); err == nil {
		t.Error("serve with --nprobe on an HNSW index: no error")
	}
	if code, _ := runErr("pipeline", "build", "--db", db, "--corpus", corpus, "--faiss", "HNSW32", "--out", filepath.Join(dir, "p2")); code == 0 {
		t.Error("pipeline build --faiss without --retriever: accepted")
	}
}
