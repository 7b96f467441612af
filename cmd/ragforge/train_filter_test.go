package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/trainer"
)

// A trainer flag value that makes no sense is an error naming the flag,
// before anything is read or stored.
func TestTrainFilterBadTrainerFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--db", filepath.Join(dir, "runs.db"), "train", "filter", "--model", dir, "--train", filepath.Join(dir, "missing.json"), "--out", filepath.Join(dir, "out")}
	for _, tc := range []struct{ flag, value string }{
		{"--lr-scheduler", "cosine_with_restarts"},
		{"--lr-scheduler", ""},
		{"--logging-steps", "0"},
		{"--logging-steps", "-5"},
		{"--label-smoothing", "1"},
		{"--label-smoothing", "-0.1"},
	} {
		code, stderr := runErr(append(base, tc.flag, tc.value)...)
		if code == 0 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%s %q: exit %d, stderr %q; want an error naming %s", tc.flag, tc.value, code, stderr, tc.flag)
		}
	}
}

// --augment-only needs --augment and a held-out split of --train; any other
// combination is an error naming the flag.
func TestTrainFilterAugmentOnlyFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--db", filepath.Join(dir, "runs.db"), "train", "filter", "--model", dir, "--train", filepath.Join(dir, "missing.json"), "--out", filepath.Join(dir, "out"), "--augment-only"}
	for _, extra := range [][]string{
		{},
		{"--augment", filepath.Join(dir, "ict.jsonl"), "--valid-frac", "0"},
		{"--augment", filepath.Join(dir, "ict.jsonl"), "--valid", filepath.Join(dir, "valid.jsonl")},
	} {
		code, stderr := runErr(append(base, extra...)...)
		if code == 0 || !strings.Contains(stderr, "--augment-only") {
			t.Errorf("%v: exit %d, stderr %q; want an error naming --augment-only", extra, code, stderr)
		}
	}
}

// eval filter refuses an empty --model among its members, naming which.
func TestEvalFilterEmptyMember(t *testing.T) {
	dir := t.TempDir()
	code, stderr := runErr("--db", filepath.Join(dir, "runs.db"), "eval", "filter", "--model", dir, "--model", "", "--data", filepath.Join(dir, "x.jsonl"))
	if code == 0 || !strings.Contains(stderr, "--model 2 of 2: empty directory") {
		t.Errorf("exit %d, stderr %q; want an error naming the empty --model", code, stderr)
	}
}

// eval filter on the last checkpoint says when an earlier one of its run
// scored higher on validation, naming both; an export (no
// trainer_state.json) or the best checkpoint gets no note.
func TestEvalFilterEarlierBetterNote(t *testing.T) {
	out := t.TempDir()
	hist := []trainer.LogEntry{{Step: 10, Loss: 0.7, LearningRate: 1e-4}, {Step: 10, EvalAccuracy: 0.74}, {Step: 20, Loss: 0.5, LearningRate: 5e-5}, {Step: 20, EvalAccuracy: 0.7}}
	last, best, export := filepath.Join(out, "checkpoint-20"), filepath.Join(out, "checkpoint-10"), t.TempDir()
	for _, c := range []struct {
		dir string
		s   trainer.State
	}{
		{last, trainer.State{GlobalStep: 20, BestMetric: 0.74, BestModelCheckpoint: best, LogHistory: hist}},
		{best, trainer.State{GlobalStep: 10, BestMetric: 0.74, BestModelCheckpoint: best, LogHistory: hist[:2]}},
	} {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := trainer.WriteState(c.dir, c.s); err != nil {
			t.Fatal(err)
		}
	}
	notes := filtertrain.EarlierBetterNotes([]string{last, best, export})
	want := "note: " + last + " (step 20) scored validation accuracy 0.7000; an earlier checkpoint of its run, checkpoint-10, scored 0.7400 (evaluate " + best + " to see it)"
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q, want [%q]", notes, want)
	}
}
