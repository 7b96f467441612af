package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/train/memory"
)

// The memory check runs before any data is read: over a forced limit, train
// filter and selflearn stop with the estimate and the limit, not with the
// missing data file; under it, they go on and fail on the data.
func TestMemoryLimitStopsBeforeData(t *testing.T) {
	dir := t.TempDir()
	t5dir := sharedDir(t, "fixtures/t5-flan-tiny")
	xdir := filepath.Join(dir, "xlmr")
	run(t, "--db", filepath.Join(dir, "runs.db"), "models", "init", "--arch", "xlm-roberta", "--size", "tiny",
		"--tokenizer", sharedDir(t, "fixtures/tokenizer/spiece.model"), "--out", xdir)
	missing := filepath.Join(dir, "missing.jsonl")
	for _, tc := range []struct {
		name, limit string
		args        []string
		want        []string
	}{
		{"filter over", "200KiB", []string{"train", "filter", "--model", t5dir, "--train", missing, "--out", filepath.Join(dir, "f1"), "--batch-size", "16"},
			[]string{"train filter: memory estimate for t5 filter (batch 16", "exceeds the 0.2 MiB", "$" + memory.LimitEnv}},
		{"filter suggests", "120MiB", []string{"train", "filter", "--model", t5dir, "--train", missing, "--out", filepath.Join(dir, "f2"), "--batch-size", "16"},
			[]string{"exceeds", "--grad-accum", "fits"}},
		{"filter suggests checkpointing", "700MiB", []string{"train", "filter", "--model", t5dir, "--train", missing, "--out", filepath.Join(dir, "f4"), "--batch-size", "16"},
			[]string{"exceeds", "--gradient-checkpointing fits", "--grad-accum"}},
		{"filter checkpointed over", "200KiB", []string{"train", "filter", "--model", t5dir, "--train", missing, "--out", filepath.Join(dir, "f5"), "--batch-size", "16", "--gradient-checkpointing"},
			[]string{"t5 filter (batch 16 × 512 encoder + 2 decoder tokens), gradient checkpointing", "exceeds"}},
		{"bench train over", "1GiB", []string{"bench", "train", "--shape", "bge-m3"},
			[]string{"bench train bge-m3: memory estimate for xlm-roberta retriever (8 rows × 512 tokens", "exceeds the 1.00 GiB"}},
		// Refused (30.95 GiB expected): never runs the real-size step.
		{"bench train suggests checkpointing", "20GiB", []string{"bench", "train", "--shape", "bge-large"},
			[]string{"exceeds the 20.00 GiB", "--gradient-checkpointing fits (about 10.27 GiB"}},
		{"filter under", "8GiB", []string{"train", "filter", "--model", t5dir, "--train", missing, "--out", filepath.Join(dir, "f3")},
			[]string{"memory estimate for t5 filter", "missing.jsonl"}},
		{"selflearn over", "1MiB", []string{"selflearn", "--retriever", xdir, "--corpus", missing, "--eval-qa", missing, "--generator", "ict"},
			[]string{"retriever training: memory estimate for xlm-roberta retriever", "exceeds", "alone need"}},
		{"bench bge-m3 over", "1GiB", []string{"bench", "models", "--only", "bge-m3"},
			[]string{"bench bge-m3: memory estimate for xlm-roberta retriever (8 rows × 512 tokens", "exceeds the 1.00 GiB"}},
		{"bench flan-t5-large over", "1GiB", []string{"bench", "models", "--only", "flan-t5-large"},
			[]string{"bench flan-t5-large: memory estimate for t5 filter (batch 4 × 512", "783.2M parameters", "exceeds"}},
		{"selflearn suggests", "20MiB", []string{"selflearn", "--retriever", xdir, "--corpus", missing, "--eval-qa", missing, "--generator", "ict"},
			[]string{"exceeds", "--sub-batch-tokens", "fits"}},
		{"selflearn under", "8GiB", []string{"selflearn", "--retriever", xdir, "--corpus", missing, "--eval-qa", missing, "--generator", "ict"},
			[]string{"memory estimate for xlm-roberta retriever", "missing.jsonl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(memory.LimitEnv, tc.limit)
			code, stderr := runErr(append([]string{"--db", filepath.Join(dir, "runs.db")}, tc.args...)...)
			if code == 0 {
				t.Fatalf("exit 0; stderr %q", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(tc.name, "over") && strings.Contains(stderr, "no such file") {
				t.Errorf("data was opened before the memory check:\n%s", stderr)
			}
		})
	}
}
