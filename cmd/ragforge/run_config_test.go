package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Stored run configs use the JSON field names and the effective settings,
// not Go field names or "not set" sentinels.
func TestRunConfigShowsEffectiveSettings(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--k", "1", "--bm25-preset", "rank_bm25", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	var show struct {
		Config struct {
			Corpus struct {
				ChunkSize    *int `json:"chunk_size"`
				ChunkOverlap *int `json:"chunk_overlap"`
			} `json:"corpus"`
			Retriever struct {
				K1       float64 `json:"k1"`
				B        float64 `json:"b"`
				Analyzer string  `json:"analyzer"`
			} `json:"retriever"`
		} `json:"config"`
	}
	out := run(t, "runs", "show", res.RunID, "--db", db, "--json")
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatal(err)
	}
	c := show.Config
	if c.Corpus.ChunkSize == nil || *c.Corpus.ChunkSize != 512 || c.Corpus.ChunkOverlap == nil || *c.Corpus.ChunkOverlap != 128 {
		t.Errorf("chunking not stored under snake_case names:\n%s", out)
	}
	if c.Retriever.K1 != 1.5 || c.Retriever.B != 0.75 || c.Retriever.Analyzer != "biomed" {
		t.Errorf("retriever config %+v, want the effective rank_bm25 k1 1.5, b 0.75, analyzer biomed", c.Retriever)
	}
	for _, goName := range []string{`"Corpus"`, `"ChunkSize"`, `"QA"`, `"Retriever"`} {
		if strings.Contains(out, goName) {
			t.Errorf("run config shows Go field name %s:\n%s", goName, out)
		}
	}
}

// --bm25-meta-fields reaches the index and the stored run config; a field
// no chunk has is refused by name.
func TestEvalRetrievalBM25MetaFields(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	args := []string{"eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--k", "1", "--json"}
	var plain, titled evalRetrievalResult
	for _, r := range []struct {
		res   *evalRetrievalResult
		extra []string
	}{{&plain, nil}, {&titled, []string{"--bm25-meta-fields", "title"}}} {
		if err := json.Unmarshal([]byte(run(t, append(args, r.extra...)...)), r.res); err != nil {
			t.Fatal(err)
		}
	}
	// The sample's figures (docs/recipes.md): the title costs one question at rank 1.
	if plain.Metrics["P@1"] == titled.Metrics["P@1"] {
		t.Errorf("P@1 %v with and without the title: the title did not reach the index", plain.Metrics["P@1"])
	}
	var show struct {
		Config struct {
			Retriever struct {
				MetaFields []string `json:"meta_fields"`
			} `json:"retriever"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(run(t, "runs", "show", titled.RunID, "--db", db, "--json")), &show); err != nil {
		t.Fatal(err)
	}
	if got := show.Config.Retriever.MetaFields; len(got) != 1 || got[0] != "title" {
		t.Errorf("stored meta_fields = %v, want [title]", got)
	}
	code, stderr := runErr(append(args, "--bm25-meta-fields", "titel")...)
	if code == 0 || !strings.Contains(stderr, `meta field "titel": no chunk has it`) {
		t.Errorf("--bm25-meta-fields titel: exit %d, stderr %q; want an error naming the field", code, stderr)
	}
}
