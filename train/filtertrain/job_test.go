package filtertrain

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/train/trainer"
)

// A recipe sets its fields; the fields named in Explicit keep the job's.
func TestTrainJobResolve(t *testing.T) {
	base := DefaultConfig()
	base.ModelDir, base.OutputDir = "model", "out"
	base.LearningRate, base.Epochs = 5e-4, 3
	scratch := Recipes[trainer.RecipeScratch]
	for _, c := range []struct {
		name     string
		recipe   string
		explicit []string
		lr       float64
		epochs   int
		batch    int
		err      string
	}{
		{"scratch", trainer.RecipeScratch, nil, scratch.LearningRate, scratch.Epochs, scratch.BatchSize, ""},
		{"explicit lr", trainer.RecipeScratch, []string{"learning_rate"}, 5e-4, scratch.Epochs, scratch.BatchSize, ""},
		{"explicit lr and epochs", trainer.RecipeScratch, []string{"learning_rate", "num_train_epochs"}, 5e-4, 3, scratch.BatchSize, ""},
		{"pretrained", trainer.RecipePretrained, nil, 3e-5, 40, 16, ""},
		{"unknown recipe", "fast", nil, 0, 0, 0, `recipe "fast"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := TrainJob{Config: base, Data: Data{Train: "train.json", ValidFrac: 0.2}, Recipe: c.recipe, Explicit: c.explicit}
			got, name, err := j.Resolve()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != c.recipe || got.LearningRate != c.lr || got.Epochs != c.epochs || got.BatchSize != c.batch {
				t.Errorf("recipe %q lr %g epochs %d batch %d; want %q %g %d %d", name, got.LearningRate, got.Epochs, got.BatchSize, c.recipe, c.lr, c.epochs, c.batch)
			}
		})
	}
}

// ResolveWindows takes the filter's own windows for every value not set,
// records where each came from and says which set value overrides it.
func TestResolveWindows(t *testing.T) {
	fx := sharedDir(t, "fixtures/t5-flan-tiny")
	// A training checkpoint: the fixture's files and the windows it trained at.
	ckpt := t.TempDir()
	for _, f := range []string{"config.json"} {
		b, err := os.ReadFile(filepath.Join(fx, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ckpt, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args, _ := json.Marshal(map[string]int{"max_seq_length": 256, "doc_stride": 64})
	if err := os.WriteFile(filepath.Join(ckpt, ArgsFile), args, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		dirs          []string
		req           WindowsRequest
		max, stride   int
		from, strFrom string
		note, err     string
	}{
		{"default", []string{fx}, WindowsRequest{}, 512, 128, WindowsFromDefault, WindowsFromDefault, "", ""},
		{"training", []string{ckpt}, WindowsRequest{}, 256, 64, WindowsFromTraining, WindowsFromTraining, "", ""},
		{"max set", []string{ckpt}, WindowsRequest{MaxSeqLength: 128, SetMaxSeqLength: true}, 128, 64, WindowsFromFlag, WindowsFromTraining, "--max-seq-length 128 overrides the training value 256", ""},
		{"members disagree", []string{fx, ckpt}, WindowsRequest{}, 0, 0, "", "", "", "give --max-seq-length and --doc-stride"},
		{"members settled", []string{fx, ckpt}, WindowsRequest{MaxSeqLength: 200, DocStride: 50, SetMaxSeqLength: true, SetDocStride: true}, 200, 50, WindowsFromFlag, WindowsFromFlag, "overrides the default value 512", ""},
		{"invalid", []string{fx}, WindowsRequest{MaxSeqLength: 64, DocStride: 64, SetMaxSeqLength: true, SetDocStride: true}, 0, 0, "", "", "", "--max-seq-length 64 --doc-stride 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var note bytes.Buffer
			w, err := ResolveWindows(c.dirs, c.req, &note)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.MaxSeqLength != c.max || w.DocStride != c.stride || w.Sources.MaxSeqLength != c.from || w.Sources.DocStride != c.strFrom {
				t.Errorf("windows %+v, want %d/%d from %s/%s", w, c.max, c.stride, c.from, c.strFrom)
			}
			if !strings.Contains(note.String(), c.note) || (c.note == "" && note.Len() > 0) {
				t.Errorf("note %q, want %q", note.String(), c.note)
			}
		})
	}
}
