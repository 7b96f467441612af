package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/infer/pipeline"
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
	// The windows it was calibrated at are recorded, and eval filter,
	// export and pipeline build read them with no flags.
	var ev struct {
		Windows filterWindows `json:"windows"`
		Report  struct {
			N        int
			Accuracy float64 `json:"accuracy"`
		} `json:"report"`
	}
	evOut, evErr := runOutErr(t, "--db", db, "--json", "eval", "filter", "--model", out, "--data", rag2, "--out", filepath.Join(dir, "eval"))
	if err := json.Unmarshal([]byte(evOut), &ev); err != nil || ev.Report.N != 5 {
		t.Fatalf("eval filter of the calibrated checkpoint: %v, %+v", err, ev)
	}
	if w := ev.Windows; w.MaxSeqLength != 128 || w.DocStride != 32 || w.Sources.MaxSeqLength != "model" || w.Sources.DocStride != "model" || strings.Contains(evErr, "overrides") {
		t.Errorf("eval filter with no window flags: windows %+v, stderr %q; want 128/32 from the model", w, evErr)
	}
	_, loud := runOutErr(t, "--db", db, "--json", "eval", "filter", "--model", out, "--data", rag2, "--max-seq-length", "64", "--out", filepath.Join(dir, "eval64"))
	if !strings.Contains(loud, "--max-seq-length 64 overrides the model value 128") {
		t.Errorf("eval filter --max-seq-length 64: stderr %q, want the override said", loud)
	}
	exp := filepath.Join(dir, "export")
	run(t, "--db", db, "export", "--from", out, "--out", exp)
	var evx struct {
		Windows filterWindows `json:"windows"`
		Report  struct {
			Accuracy float64 `json:"accuracy"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(run(t, "--db", db, "--json", "eval", "filter", "--model", exp, "--data", rag2, "--out", filepath.Join(dir, "eval-export"))), &evx); err != nil ||
		evx.Windows.MaxSeqLength != 128 || evx.Windows.DocStride != 32 || evx.Report.Accuracy != ev.Report.Accuracy {
		t.Errorf("export of the calibrated checkpoint: windows %+v accuracy %v (%v), want 128/32 and %v", evx.Windows, evx.Report.Accuracy, err, ev.Report.Accuracy)
	}
	// The demo's uncalibrated path: a checkpoint exported with the windows
	// it was evaluated at scores, with no window flags, as it did with them.
	exp96 := filepath.Join(dir, "export96")
	_, note := runOutErr(t, "--db", db, "export", "--from", model, "--out", exp96, "--max-seq-length", "96", "--doc-stride", "16")
	if !strings.Contains(note, "--max-seq-length 96 overrides the default value 512") {
		t.Errorf("export --max-seq-length 96 of a checkpoint without windows: stderr %q", note)
	}
	report := func(args ...string) string {
		var r struct {
			Report map[string]any `json:"report"`
		}
		if err := json.Unmarshal([]byte(run(t, append([]string{"--db", db, "--json", "eval", "filter", "--data", rag2}, args...)...)), &r); err != nil {
			t.Fatal(err)
		}
		delete(r.Report, "model") // the directory evaluated
		b, _ := json.Marshal(r.Report)
		return string(b)
	}
	if a, b := report("--model", model, "--max-seq-length", "96", "--doc-stride", "16", "--out", filepath.Join(dir, "e1")), report("--model", exp96, "--out", filepath.Join(dir, "e2")); a != b {
		t.Errorf("eval filter of the checkpoint at 96/16:\n%s\nof its export at the recorded windows:\n%s", a, b)
	}
	_, corpus, _ := sampleFiles(t)
	pipe := filepath.Join(dir, "pipe")
	run(t, "--db", db, "pipeline", "build", "--corpus", corpus, "--filter", exp, "--out", pipe)
	m, err := pipeline.ReadManifest(filepath.Join(pipe, pipeline.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Filter; f.MaxSeqLength != 128 || f.DocStride != 32 || f.WindowsFrom != "model" {
		t.Errorf("pipeline.json filter %+v, want the export's 128/32 from the model", f)
	}
	code, stderr = runErr(base...)
	if code == 0 || !strings.Contains(stderr, "already exists") {
		t.Errorf("second calibration into the same --out: exit %d, stderr %q", code, stderr)
	}
}
