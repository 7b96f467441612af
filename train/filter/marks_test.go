package filter

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mfilter "github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
)

// Config.MatchMarks: the windows trained on are the marked instructions',
// every checkpoint (and its export) records the marks, and a checkpoint
// that carries them is read with them by eval and by further training
// without the flag.
func TestTrainMatchMarks(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 for two updates")
	}
	cfg := tinyConfig(t, 0)
	cfg.Epochs, cfg.MatchMarks = 1, true
	train, valid := toySet(8), toySet(2)
	res, err := Train(context.Background(), cfg, train, valid, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	if err := Export(res.LastCheckpoint, out); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{res.LastCheckpoint, out} {
		c, err := t5.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mfilter.MatchMarksOf(c.Extra(mfilter.MatchMarksKey))
		if err != nil || m == nil || *m != mfilter.DefaultMatchMarks() {
			t.Fatalf("%s: marks %v (%v), want the defaults", dir, m, err)
		}
	}
	p, err := loadForEval(testBackend, out, cfg.predictor())
	if err != nil {
		t.Fatal(err)
	}
	if p.Marks == nil {
		t.Fatal("a marked checkpoint loads without its marks")
	}
	wins, err := Windows(p, valid)
	if err != nil {
		t.Fatal(err)
	}
	marked, _ := p.Marks.Mark(valid[0].Question)
	if !strings.Contains(marked, "Evidence: aspirin @@ reduces @@ fever in adults\n") {
		t.Fatalf("toy example marked as %q", marked)
	}
	if want := p.Tokenizer.Encode(marked, true); !slices.Equal(wins[0].IDs, want) {
		t.Fatalf("window %v, want the marked instruction's tokens %v", wins[0].IDs, want)
	}
	r, err := Evaluate(out, valid, EvalOptions{MaxSeqLength: cfg.MaxSeqLength, DocStride: cfg.DocStride, Backend: testBackend})
	if err != nil || len(r.Predictions) != len(valid) {
		t.Fatalf("eval of the marked export: %v", err)
	}

	// Fine-tuning the marked checkpoint without the flag keeps its marks.
	cfg2 := cfg
	cfg2.ModelDir, cfg2.OutputDir, cfg2.MatchMarks = out, filepath.Join(t.TempDir(), "ft"), false
	res2, err := Train(context.Background(), cfg2, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := t5.LoadConfig(res2.LastCheckpoint)
	if _, ok := c2.Extra(mfilter.MatchMarksKey); !ok {
		t.Error("fine-tuning a marked checkpoint dropped its marks")
	}

	// An instruction that is not RAG²'s cannot be marked: its example is named.
	bad := append(slices.Clone(train), mfilter.Example{ID: "odd", Answer: mfilter.Helpful, Question: "free text"})
	cfg3 := cfg
	cfg3.OutputDir = filepath.Join(t.TempDir(), "bad")
	_, err = Train(context.Background(), cfg3, bad, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `example 9 (id "odd"): field "question"`) {
		t.Errorf("unmarkable example: %v", err)
	}
}
