package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Nonsense pretrain settings are refused before the corpus or model is read.
func TestPretrainRefusesNonsense(t *testing.T) {
	base := []string{"pretrain", "--model", "/nonexistent/t5", "--corpus", "/nonexistent/c.jsonl", "--out", "/nonexistent/out"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch-size", "0"}, "--batch-size 0: must be at least 1"},
		{[]string{"--max-steps", "-1"}, "--max-steps -1: must be at least 0"},
		{[]string{"--noise-density", "nan"}, "--noise-density NaN: not a finite number"},
		{[]string{"--noise-density", "1.5"}, `field "noise_density": 1.5`},
		{[]string{"--mean-noise-span-length", "0"}, `field "mean_noise_span_length": 0`},
		{[]string{"--lr", "0"}, `field "LearningRate": 0`},
		{[]string{"--lr-scheduler", "inverse_sqrt"}, `--lr-scheduler "inverse_sqrt": want one of linear, cosine, constant`},
		{[]string{"--max-time", "-1s"}, "--max-time -1s: want >= 0"},
		{[]string{"--out", "/nonexistent/t5"}, "a directory other than the starting checkpoint"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr := runErr(append(append(append([]string{}, base...), tc.args...), "--db", t.TempDir()+"/runs.db")...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
	}
}

// pretrain on the sample's chunks writes a checkpoint train filter takes,
// recording the run in config.json and in the run store.
func TestPretrainSample(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny T5 (seconds); skipped with -short")
	}
	dir, corpus, _ := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	model, out := filepath.Join(dir, "t5"), filepath.Join(dir, "t5-pt")
	if code, stderr := runErr("--db", db, "models", "init", "--arch", "t5", "--size", "tiny",
		"--tokenizer", sharedDir(t, "fixtures/tokenizer/spiece.model"), "--out", model); code != 0 {
		t.Fatalf("models init: exit %d: %s", code, stderr)
	}
	if code, stderr := runErr("--db", db, "--json", "pretrain", "--model", model, "--corpus", corpus, "--out", out,
		"--max-steps", "3", "--batch-size", "4", "--max-seq-length", "64"); code != 0 {
		t.Fatalf("pretrain: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	rec, _ := cfg["ragforge_pretrain"].(map[string]any)
	if cfg["ragforge_random_init"] != true || rec["objective"] != "t5_span_corruption" || rec["steps"] != 3.0 || rec["corpus"] != corpus {
		t.Fatalf("config.json: ragforge_random_init %v, ragforge_pretrain %v", cfg["ragforge_random_init"], rec)
	}
	if list := run(t, "--db", db, "runs", "list", "--kind", "pretrain"); !strings.Contains(list, "pretrain") || !strings.Contains(list, "done") {
		t.Errorf("runs list --kind pretrain:\n%s", list)
	}
	if code, stderr := runErr("--db", db, "pretrain", "--model", model, "--corpus", corpus, "--out", out, "--max-steps", "1"); code == 0 || !strings.Contains(stderr, "already holds a checkpoint") {
		t.Errorf("pretrain into an existing checkpoint: exit %d, %s", code, stderr)
	}
}
