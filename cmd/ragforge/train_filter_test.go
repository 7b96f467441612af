package main

import (
	"path/filepath"
	"strings"
	"testing"
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
