package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/demo"
)

// ExampleRun runs the demo on the embedded sample corpus as a Go program
// would, without the CLI, and lists its stages.
func ExampleRun() {
	o := demo.DefaultOptions()
	o.Work = "ragforge-demo"
	res, err := demo.Run(context.Background(), o, os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range res.Stages {
		fmt.Printf("%s: %v (rerun: %s)\n", s.Name, s.Metrics, s.Command)
	}
}

// TestRunQuick runs every stage of the demo as library calls on the
// embedded sample (no ../shared), in a quick configuration: one filter
// epoch, a self-learning round on 8 chunks with 2 pseudo-queries each. It
// checks the summary lines, that every run is recorded in the demo's store,
// and the served pipeline's answer.
func TestRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole demo: several minutes on two cores")
	}
	o := demo.DefaultOptions()
	o.Work, o.Quick = t.TempDir(), true
	o.Samples, o.QueriesPerChunk, o.ICTMaxChunks = 8, 2, 20
	var log bytes.Buffer
	res, err := demo.Run(context.Background(), o, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var names []string
	for _, s := range res.Stages {
		names = append(names, s.Name)
	}
	want := []string{"retrieval: BM25", "tokenizers", "models init", "retrieval: hybrid (base)", "labels: evidence", "labels: ICT (corpus only)",
		"filter: train", "filter: eval", "selflearn: 1 round (ICT)", "export", "serve + /v1/pipeline"}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("no stage %q among %v", w, names)
		}
	}
	// The tuned hybrid follows the self-learning round in its lane; it is
	// named for BM25 when selflearn gave the dense model weight 0.
	if i := slices.Index(names, "selflearn: 1 round (ICT)"); len(names) != len(want)+1 || i < 0 || i+1 == len(names) || !strings.HasPrefix(names[i+1], "retrieval: ") {
		t.Errorf("stages %v: want %d, the tuned hybrid after the self-learning round", names, len(want)+1)
	}
	byName := map[string]demo.Stage{}
	for _, s := range res.Stages {
		t.Logf("%s (%.1f s, run %s): %v", s.Name, s.Seconds, s.RunID, s.Metrics)
		byName[s.Name] = s
		if s.Command == "" && s.Name != "" {
			t.Errorf("stage %q names no command to rerun it", s.Name)
		}
	}
	for stage, keys := range map[string][]string{
		"retrieval: BM25":      {"P@1", "Recall@4", "nDCG@10", "MRR@10"},
		"labels: evidence":     {"helpful", "not_helpful"},
		"filter: train":        {"final_loss", "steps"},
		"filter: eval":         {"accuracy", "F1", "majority_baseline"},
		"export":               {"shipped_step", "shipped_accuracy"},
		"serve + /v1/pipeline": {"pipeline_seconds", "retrieved", "kept"},
	} {
		for _, k := range keys {
			if _, ok := byName[stage].Metrics[k]; !ok {
				t.Errorf("stage %q: no metric %q in %v", stage, k, byName[stage].Metrics)
			}
		}
	}
	if n := byName["serve + /v1/pipeline"].Metrics["retrieved"]; n != 4 {
		t.Errorf("/v1/pipeline retrieved %v snippets, want k = 4", n)
	}
	if r := byName["export"].Metrics["shipped_accuracy"]; r != byName["filter: eval"].Metrics["accuracy"] {
		t.Errorf("shipped accuracy %v, evaluated %v", r, byName["filter: eval"].Metrics["accuracy"])
	}
	checkStore(t, res)
	checkFilterTraining(t, o.Work, log.String(), byName["filter: train"].RunID)
	b, err := os.ReadFile(filepath.Join(o.Work, "pipeline-response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Retrieved []json.RawMessage `json:"retrieved"`
	}
	if err := json.Unmarshal(b, &pr); err != nil || len(pr.Retrieved) != 4 {
		t.Errorf("pipeline response %s: %v", b, err)
	}
}

// checkFilterTraining fails unless the filter's training wrote what
// `train filter` writes: run.json naming its run in the output directory
// (for --resume), HF Trainer's log lines on the log.
func checkFilterTraining(t *testing.T, work, log, runID string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(work, "filter*", tracker.DirRunFile))
	found := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		found = found || err == nil && strings.Contains(string(b), `"run_id":"`+runID+`"`)
	}
	if !found {
		t.Errorf("no %s naming run %q among %v", tracker.DirRunFile, runID, files)
	}
	if !strings.Contains(log, "{'eval_") && !strings.Contains(log, "{'loss': ") {
		t.Errorf("no HF-style training log line in the demo's log")
	}
}

// checkStore fails unless every stage's run is done in the demo's store.
func checkStore(t *testing.T, res *demo.Result) {
	t.Helper()
	st, err := tracker.Open(res.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, s := range res.Stages {
		if s.RunID == "" {
			continue
		}
		d, err := st.Get(s.RunID)
		if err != nil {
			t.Errorf("stage %q: run %s: %v", s.Name, s.RunID, err)
			continue
		}
		if d.Status != tracker.StatusDone {
			t.Errorf("stage %q: run %s is %s", s.Name, s.RunID, d.Status)
		}
	}
}
