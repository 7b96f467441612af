package pretrain

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
)

// sampleTexts are the demo corpus's chunks.
func sampleTexts(t *testing.T) []string {
	t.Helper()
	corpus, _, err := sample.WriteTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	docs, err := data.LoadCorpus(corpus, data.FieldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, err := chunk.SplitAll(docs, chunk.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.Text
	}
	return texts
}

// Causal-LM pretraining of a random tiny Qwen2 on the demo corpus lowers
// the loss from about ln(vocab) and turns its samples from random bytes
// (mostly invalid UTF-8) into text: most sampled passages pass
// lm.CheckText. The checkpoint records the run and loads as a generator.
func TestCausalLM(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a decoder; skipped with -short")
	}
	gen := tinyqwen.Random(t, 3)
	out := filepath.Join(t.TempDir(), "pt")
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.OutputDir, cfg.Backend = gen, out, "go"
	cfg.MaxSeqLength, cfg.BatchSize, cfg.Epochs, cfg.LearningRate = 128, 8, 30, 1e-2
	rec, err := CausalLM(context.Background(), cfg, "sample", sampleTexts(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d chunks, %d steps, loss %.3f → %.3f", rec.Chunks, rec.Steps, rec.FirstLoss, rec.FinalLoss)
	if rec.Objective != ObjectiveCausalLM || rec.FirstLoss < 5.5 || rec.FinalLoss > rec.FirstLoss-2 {
		t.Fatalf("record %+v: want a first loss near ln 512 ≈ 6.2 falling by more than 2", rec)
	}
	valid := func(dir string) int {
		g, err := lm.LoadDecoder(dir, "go")
		if err != nil {
			t.Fatal(err)
		}
		prompts := []string{"Please write a medical passage to answer the question.\nQuestion: how long is formalin fixation?\nPassage:"}
		outs, errs := g.Generate(context.Background(), prompts, lm.Options{MaxNewTokens: 12, Temperature: 1, Seed: 1, N: 8})
		n := 0
		if errs[0] == nil {
			n = len(outs[0])
		}
		t.Logf("%s: %d of 8 samples valid: %q (%v)", filepath.Base(dir), n, strings.Join(outs[0], " | "), errs[0])
		return n
	}
	if before, after := valid(gen), valid(out); after < 6 || after <= before {
		t.Fatalf("valid samples: %d before, %d after pretraining; want most after", before, after)
	}
}
