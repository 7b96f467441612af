package main

import (
	"strings"
	"testing"
)

// Nonsense flag values are refused before any work, naming the flag; the
// corpus and questions paths need not exist, since nothing is read.
func TestNonsenseFlagsAreRefused(t *testing.T) {
	corpus := []string{"--corpus", "/nonexistent/corpus.jsonl", "--qa", "/nonexistent/qa.csv"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "retrieval", "--chunk-size", "-5"}, "--chunk-size -5: must be at least 0"},
		{[]string{"eval", "retrieval", "--chunk-overlap", "-1"}, "--chunk-overlap -1: must be at least 0"},
		{[]string{"eval", "retrieval", "--limit", "-1"}, "--limit -1: must be at least 0"},
		{[]string{"eval", "answers", "--limit", "-1", "--answerer", "t5:x"}, "--limit -1: must be at least 0"},
		{[]string{"label", "evidence", "--top-n", "0"}, "--top-n 0: must be at least 1"},
		{[]string{"label", "evidence", "--top-n", "-1"}, "--top-n -1: must be at least 1"},
		{[]string{"label", "evidence", "--negatives", "-3"}, "--negatives -3: must be at least 0"},
		{[]string{"label", "perplexity", "--concurrency", "0", "--scorer", "t5:x"}, "--concurrency 0: must be at least 1"},
		{[]string{"label", "perplexity", "--margin", "nan", "--scorer", "t5:x"}, "--margin NaN: not a finite number"},
		{[]string{"eval", "retrieval", "--bm25-k1", "nan"}, "--bm25-k1 NaN: not a finite number"},
		{[]string{"eval", "retrieval", "--dense-weight", "NaN"}, "--dense-weight NaN: not a finite number"},
		{[]string{"eval", "retrieval", "--bm25-weight", "+Inf"}, "--bm25-weight +Inf: not a finite number"},
		{[]string{"train", "filter", "--weight-decay", "nan"}, "--weight-decay NaN: not a finite number"},
		{[]string{"train", "filter", "--model", "/nonexistent/m", "--train", "/nonexistent/t.jsonl", "--out", "/nonexistent/f", "--match-marks-rare", "0.05"}, "--match-marks-rare needs --match-marks"},
		{[]string{"train", "filter", "--model", "/nonexistent/m", "--train", "/nonexistent/t.jsonl", "--out", "/nonexistent/f", "--match-marks", "--match-marks-rare", "0.05,1"}, "--match-marks-rare: [0.05 1] holds 1"},
		{[]string{"demo", "--filter-match-marks-rare", "0.05", "--work", "/nonexistent/demo"}, "--filter-match-marks-rare needs --filter-match-marks"},
		{[]string{"demo", "--filter-match-marks", "--filter-match-marks-rare", "0,0.1", "--work", "/nonexistent/demo"}, "--filter-match-marks-rare: [0 0.1] holds 0"},
		{[]string{"demo", "--filter-calibrate", "--filter-ensemble-seeds", "7", "--work", "/nonexistent/demo"}, "--filter-calibrate with --filter-ensemble-seeds"},
		{[]string{"demo", "--filter-calibrate", "--filter-finetune-epochs", "1", "--work", "/nonexistent/demo"}, "--filter-calibrate with --filter-finetune-epochs"},
		{[]string{"train", "calibration", "--model", "/nonexistent/m", "--data", "/nonexistent/d.jsonl", "--out", "/nonexistent/o", "--features", "log_odds,bm25"}, `--features "log_odds,bm25": feature "bm25"`},
		{[]string{"train", "calibration", "--model", "/nonexistent/m", "--data", "/nonexistent/d.jsonl", "--out", "/nonexistent/o", "--l2", "0"}, "--l2 0: want > 0"},
		{[]string{"train", "calibration", "--model", "/nonexistent/m", "--data", "/nonexistent/d.jsonl", "--out", "/nonexistent/o", "--l2", "nan"}, "--l2 NaN: not a finite number"},
		{[]string{"train", "calibration", "--model", "/nonexistent/m", "--data", "/nonexistent/d.jsonl"}, "--model, --data and --out are required"},
		{[]string{"selflearn", "--negatives", "-3"}, "--negatives -3: must be at least 0"},
		{[]string{"bench", "train"}, `--shape "": want one of flan-t5-large, bge-large, bge-m3`},
		{[]string{"bench", "train", "--shape", "bge-large", "--layers", "-2"}, "--layers -2: must be at least 0"},
		{[]string{"bench", "train", "--shape", "flan-t5-large", "--negatives", "3"}, "--negatives and --sub-batch-tokens apply to bge-large and bge-m3"},
		{[]string{"pipeline", "build", "--chunk-size", "-5", "--out", "/nonexistent/p"}, "--chunk-size -5: must be at least 0"},
		{[]string{"runs", "list", "--limit", "-2"}, "--limit -2: must be at least 0"},
		{[]string{"demo", "--ict-per-chunk", "0", "--work", "/nonexistent/demo"}, "--ict-per-chunk 0: must be at least 1"},
		{[]string{"demo", "--filter-finetune-epochs", "-1", "--work", "/nonexistent/demo"}, "--filter-finetune-epochs -1: must be at least 0"},
		{[]string{"demo", "--ict-max-chunks", "-1", "--work", "/nonexistent/demo"}, "--ict-max-chunks -1: must be at least 0"},
		{[]string{"demo", "--filter-ensemble-seeds", "42", "--work", "/nonexistent/demo"}, "--filter-ensemble-seeds: seed 42 twice"},
		{[]string{"demo", "--filter-ensemble-seeds", "7,7", "--work", "/nonexistent/demo"}, "--filter-ensemble-seeds: seed 7 twice"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{}, tc.args...)
			switch tc.args[0] {
			case "eval", "label":
				args = append(args, corpus...)
			case "selflearn", "pipeline":
				args = append(args, corpus[:2]...)
			}
			code, stderr := runErr(append(args, "--db", t.TempDir()+"/runs.db")...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
	}
}

// Documented zeros stay accepted by the check.
func TestMeaningfulZerosPassTheFlagCheck(t *testing.T) {
	for _, args := range [][]string{
		{"eval", "retrieval", "--chunk-size", "0", "--limit", "0"},
		{"label", "evidence", "--negatives", "0"},
		{"demo", "--ict-max-chunks", "0"},
	} {
		root := newRoot(&globals{})
		cmd, rest, err := root.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		if err := checkFlags(cmd); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
