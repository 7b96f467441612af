package filtertrain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/trainer"
)

func TestPrepareData(t *testing.T) {
	var base []filter.Example // 4 questions × 2 snippets
	for q := range 4 {
		for i := range 2 {
			base = append(base, ex(fmt.Sprintf("q%d-%d", q, i), []string{filter.Helpful, filter.NotHelpful}[i], fmt.Sprintf("evidence %d", i), fmt.Sprintf("question %d?", q)))
		}
	}
	held := []filter.Example{ex("v-0", filter.Helpful, "held evidence", "held question?")}
	extra := []filter.Example{ex("ict-0", filter.Helpful, "ict evidence", "question 0?")}
	splitTrain, splitValid, err := SplitByQuestion(base, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for name, exs := range map[string][]filter.Example{"train.json": base, "valid.jsonl": held, "ict.jsonl": extra} {
		f, _ := filter.FormatOf("", name)
		if err := filter.WriteExamples(filepath.Join(src, name), f, exs); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(src, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"x","question":"no instruction","answer":"[HELPFUL]"}`+"\n"), 0o644)
	in := func(name string) string { return filepath.Join(src, name) }

	for _, tc := range []struct {
		name             string
		data             Data
		resume           bool
		checkpoint       bool // the output directory already holds one
		wantTrain, valid []filter.Example
		wantFiles        bool   // train.jsonl and valid.jsonl written
		wantErr          string // "" = no error
	}{
		{name: "valid file", data: Data{Train: in("train.json"), Valid: in("valid.jsonl"), ValidFrac: 0.5},
			wantTrain: base, valid: held, wantFiles: true},
		{name: "split by question", data: Data{Train: in("train.json"), ValidFrac: 0.5},
			wantTrain: splitTrain, valid: splitValid, wantFiles: true},
		{name: "augment after the split", data: Data{Train: in("train.json"), ValidFrac: 0.5, Augment: in("ict.jsonl")},
			wantTrain: append(append([]filter.Example{}, splitTrain...), extra...), valid: splitValid, wantFiles: true},
		{name: "no validation writes no split", data: Data{Train: in("train.json")}, wantTrain: base},
		{name: "resume writes no split", data: Data{Train: in("train.json"), ValidFrac: 0.5}, resume: true,
			wantTrain: splitTrain, valid: splitValid},
		{name: "resume over checkpoints", data: Data{Train: in("train.json"), ValidFrac: 0.5}, resume: true, checkpoint: true,
			wantTrain: splitTrain, valid: splitValid},
		{name: "checkpoints without resume", data: Data{Train: in("train.json"), ValidFrac: 0.5}, checkpoint: true,
			wantErr: "already holds checkpoints"},
		{name: "no train file", data: Data{ValidFrac: 0.5}, wantErr: "no training file"},
		{name: "valid fraction 1", data: Data{Train: in("train.json"), ValidFrac: 1}, wantErr: "valid fraction 1 outside [0, 1)"},
		{name: "negative valid fraction", data: Data{Train: in("train.json"), ValidFrac: -0.2, Valid: in("valid.jsonl")}, wantErr: "valid fraction -0.2"},
		{name: "bad augment file", data: Data{Train: in("train.json"), Augment: bad}, wantErr: bad + ": record 1 (line 1): field \"question\""},
		{name: "missing valid file", data: Data{Train: in("train.json"), Valid: in("nope.jsonl")}, wantErr: "nope.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Seed, cfg.Resume, cfg.OutputDir = 3, tc.resume, filepath.Join(t.TempDir(), "out")
			if tc.checkpoint {
				if _, err := trainer.WriteCheckpoint(cfg.OutputDir, 5, func(dir string) error { return trainer.WriteState(dir, trainer.State{}) }); err != nil {
					t.Fatal(err)
				}
			}
			train, valid, err := PrepareData(cfg, tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(train, tc.wantTrain) || !reflect.DeepEqual(valid, tc.valid) {
				t.Errorf("train %d examples, valid %d; want %d and %d", len(train), len(valid), len(tc.wantTrain), len(tc.valid))
			}
			for name, want := range map[string][]filter.Example{TrainSplitFile: tc.wantTrain, ValidSplitFile: tc.valid} {
				got, err := filter.ReadExamples(filepath.Join(cfg.OutputDir, name))
				switch {
				case !tc.wantFiles && !errors.Is(err, os.ErrNotExist):
					t.Errorf("%s written (%v)", name, err)
				case tc.wantFiles && (err != nil || !reflect.DeepEqual(got, want)):
					t.Errorf("%s: %d examples, %v; want %d", name, len(got), err, len(want))
				}
			}
		})
	}
}
