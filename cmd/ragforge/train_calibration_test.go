package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// train calibration writes a calibrated checkpoint that eval filter reads,
// records a finished run, and refuses an --idf-from file it cannot read,
// naming the file, record and field, before writing anything.
func TestTrainCalibrationCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: scores the RAG² examples with a tiny T5")
	}
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	model := filepath.Join(dir, "t5")
	run(t, "--db", db, "models", "init", "--arch", "t5", "--size", "tiny", "--tokenizer", spm, "--out", model)

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"b1","question":"no instruction here","answer":"[HELPFUL]"}`+"\n"), 0o644)
	out := filepath.Join(dir, "calibrated")
	base := []string{"--db", db, "train", "calibration", "--model", model, "--data", rag2, "--max-seq-length", "128", "--doc-stride", "32", "--out", out}
	code, stderr := runErr(append(base, "--idf-from", bad)...)
	if code == 0 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, `record 1 (line 1): field "question"`) {
		t.Fatalf("bad --idf-from: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused calibration wrote its --out")
	}

	var res struct {
		RunID  string `json:"run_id"`
		Report struct {
			N, Helpful int
			Features   []string
			Weights    []float64
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(run(t, append(base, "--json")...)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Report.N != 5 || res.Report.Helpful != 2 || len(res.Report.Weights) != 4 {
		t.Fatalf("report %+v", res.Report)
	}
	if r := runOf(t, db, "train-calibration"); r == nil {
		t.Fatal("no train-calibration run stored")
	} else if r.ID != res.RunID || r.Status != "done" {
		t.Fatalf("run %s %s, want %s done", r.ID, r.Status, res.RunID)
	}
	cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || !strings.Contains(string(cfg), `"ragforge_filter_calibration"`) {
		t.Fatalf("calibrated config.json (%v) lacks the calibration:\n%s", err, cfg)
	}
	var ev struct {
		Report struct{ N int } `json:"report"`
	}
	if err := json.Unmarshal([]byte(run(t, "--db", db, "--json", "eval", "filter", "--model", out, "--data", rag2, "--max-seq-length", "128", "--doc-stride", "32", "--out", filepath.Join(dir, "eval"))), &ev); err != nil || ev.Report.N != 5 {
		t.Fatalf("eval filter of the calibrated checkpoint: %v, %+v", err, ev)
	}
	code, stderr = runErr(base...)
	if code == 0 || !strings.Contains(stderr, "already exists") {
		t.Errorf("second calibration into the same --out: exit %d, stderr %q", code, stderr)
	}
}
