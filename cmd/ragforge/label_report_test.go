package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"
)

// label evidence reports what it stores: a question asked twice labels the
// same (question, snippet) pairs twice, and the second set replaces the
// first; the report says so. dataset_name defaults to the corpus's name.
func TestLabelEvidenceReportsStoredAndMerged(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	b, err := os.ReadFile(qa)
	if err != nil {
		t.Fatal(err)
	}
	// Header, first question, then the first question again (same text).
	rows := strings.SplitAfter(string(b), "\n")
	if !strings.HasPrefix(rows[1], "\"") && strings.Count(rows[1], ",") < 2 {
		t.Fatalf("unexpected QA layout: %q", rows[1])
	}
	dup := filepath.Join(dir, "dup.csv")
	os.WriteFile(dup, []byte(string(b)+rows[1]), 0o644)
	db := filepath.Join(dir, "runs.db")
	out := filepath.Join(dir, "labels.jsonl")
	var res labelResult
	if err := json.Unmarshal([]byte(run(t, "label", "evidence", "--db", db, "--corpus", corpus, "--qa", dup, "--top-n", "3", "--out", out, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	exs, err := filter.ReadExamples(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Labels != len(exs) || res.Merged != 3 || res.Counts[filter.Helpful]+res.Counts[filter.NotHelpful] != len(exs) {
		t.Errorf("report %+v, export holds %d labels; want labels = stored = exported and 3 merged", res, len(exs))
	}
	want := strings.TrimSuffix(filepath.Base(corpus), filepath.Ext(corpus))
	if exs[0].DatasetName != want {
		t.Errorf("dataset_name %q, want %q (from the corpus)", exs[0].DatasetName, want)
	}
	text := run(t, "label", "evidence", "--db", db, "--corpus", corpus, "--qa", dup, "--top-n", "3")
	if !strings.Contains(text, "labels stored") || !strings.Contains(text, "3 duplicate (question, snippet) pairs merged") {
		t.Errorf("text report: %s", text)
	}
}
