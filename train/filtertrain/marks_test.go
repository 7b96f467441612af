package filtertrain

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"
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
		m, err := filter.MatchMarksOf(c.Extra(filter.MatchMarksKey))
		if err != nil || m == nil || !reflect.DeepEqual(*m, filter.DefaultMatchMarks()) {
			t.Fatalf("%s: marks %v (%v), want the defaults", dir, m, err)
		}
	}
	p, err := loadForEval(testBackend, out, cfg.predictor(), "")
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
	r, err := Evaluate(out, valid, EvalOptions{Windowing: filter.Windowing{MaxSeqLength: cfg.MaxSeqLength, DocStride: cfg.DocStride}, Backend: testBackend})
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
	if _, ok := c2.Extra(filter.MatchMarksKey); !ok {
		t.Error("fine-tuning a marked checkpoint dropped its marks")
	}

	// An instruction that is not RAG²'s cannot be marked: its example is named.
	bad := append(slices.Clone(train), filter.Example{ID: "odd", Answer: filter.Helpful, Question: "free text"})
	cfg3 := cfg
	cfg3.OutputDir = filepath.Join(t.TempDir(), "bad")
	_, err = Train(context.Background(), cfg3, bad, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `example 9 (id "odd"): field "question"`) {
		t.Errorf("unmarkable example: %v", err)
	}
}

// Config.MatchMarksRare: the document frequencies of the training evidence
// are recorded with the marks and read back by eval; a checkpoint marked
// otherwise is refused rather than silently kept; the fractions are
// validated.
func TestTrainMatchMarksRare(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 for one update")
	}
	cfg := tinyConfig(t, 0)
	cfg.Epochs, cfg.MaxSteps, cfg.MatchMarks, cfg.MatchMarksRare = 1, 1, true, []float64{0.5}
	train := append(toySet(6), ex("x", filter.NotHelpful, "fever is common", "what reduces fever?"))
	res, err := Train(context.Background(), cfg, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := t5.LoadConfig(res.LastCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	m, err := filter.MatchMarksOf(c.Extra(filter.MatchMarksKey))
	// 3 distinct evidence texts; only "fever" and "is" (2 of 3 > 0.5 × 3) are common enough to keep.
	want := &filter.DocFreq{Docs: 3, Counts: map[string]int{"fever": 2, "is": 2}}
	if err != nil || m == nil || !reflect.DeepEqual(m.DocFreq, want) || !slices.Equal(m.RareDocFractions, cfg.MatchMarksRare) {
		t.Fatalf("marks %+v (%v), want rare_doc_fractions %v and doc_freq %+v", m, err, cfg.MatchMarksRare, want)
	}
	p, err := loadForEval(testBackend, res.LastCheckpoint, cfg.predictor(), "")
	if err != nil {
		t.Fatal(err)
	}
	marked, _ := p.Marks.Mark(train[0].Question)
	if !strings.Contains(marked, "Evidence: aspirin @@@ reduces @@ fever in adults\n") {
		t.Fatalf("toy example marked as %q", marked)
	}

	cfg2 := cfg
	cfg2.ModelDir, cfg2.OutputDir, cfg2.MatchMarksRare = res.LastCheckpoint, filepath.Join(t.TempDir(), "other"), []float64{0.1}
	if _, err := Train(context.Background(), cfg2, train, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "rare_doc_fractions [0.5]") {
		t.Errorf("training a checkpoint marked with other fractions: %v", err)
	}
	// Fine-tuning with --match-marks alone keeps the rare marks.
	cfg3 := cfg
	cfg3.ModelDir, cfg3.OutputDir, cfg3.MatchMarksRare = res.LastCheckpoint, filepath.Join(t.TempDir(), "keep"), nil
	res3, err := Train(context.Background(), cfg3, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := marksOf(t, res3.LastCheckpoint); !reflect.DeepEqual(got, *m) {
		t.Errorf("fine-tuned without MatchMarksRare: marks %+v, want the start's %+v", got, m)
	}
	// A start checkpoint marked without rare fractions keeps its own marks
	// (prefix_chars here) and gains the fractions, counted by its keys.
	start := marksOf(t, res.LastCheckpoint)
	start.RareDocFractions, start.DocFreq, start.PrefixChars = nil, nil, 3
	c4 := cfg
	c4.ModelDir, c4.OutputDir, c4.MatchMarks, c4.MatchMarksRare = writeMarks(t, res.LastCheckpoint, start), filepath.Join(t.TempDir(), "prefix"), true, []float64{0.5}
	res4, err := Train(context.Background(), c4, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := marksOf(t, res4.LastCheckpoint)
	if got.PrefixChars != 3 || !slices.Equal(got.RareDocFractions, c4.MatchMarksRare) || got.DocFreq.Counts["fev"] != 2 {
		t.Errorf("marks %+v (doc_freq %+v), want prefix_chars 3 with rare_doc_fractions [0.5] counted by 3-letter keys", got, got.DocFreq)
	}

	for _, tc := range []struct {
		marks bool
		rare  []float64
	}{{false, []float64{0.05}}, {true, []float64{0}}, {true, []float64{1}}} {
		c := cfg
		c.MatchMarks, c.MatchMarksRare = tc.marks, tc.rare
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"MatchMarksRare"`) {
			t.Errorf("Validate with MatchMarks %v, MatchMarksRare %v: %v", tc.marks, tc.rare, err)
		}
	}
}

// marksOf returns the match marks recorded in dir's config.json.
func marksOf(t *testing.T, dir string) filter.MatchMarks {
	t.Helper()
	c, err := t5.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := filter.MatchMarksOf(c.Extra(filter.MatchMarksKey))
	if err != nil || m == nil {
		t.Fatalf("%s: marks %v (%v)", dir, m, err)
	}
	return *m
}

// writeMarks exports checkpoint dir (Export: the model files, no trainer
// state) with config.json's marks replaced by m, and returns the copy.
func writeMarks(t *testing.T, dir string, m filter.MatchMarks) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "marked")
	if err := Export(dir, out); err != nil {
		t.Fatal(err)
	}
	c, err := t5.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetExtra(filter.MatchMarksKey, m); err != nil {
		t.Fatal(err)
	}
	b, err := c.MarshalConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
