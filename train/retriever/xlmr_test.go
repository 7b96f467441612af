package retriever

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/testutil/tinyxlmr"
	"github.com/ragforge/ragforge/models/xlmr"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// An XLM-R checkpoint trains through the same Train (positions from the
// ids, pad id 1) and is saved back as XLM-R; one whose tokenizer has more ids
// than vocab_size is refused before training, naming vocab_size.
func TestTrainXLMR(t *testing.T) {
	tok := tinyxlmr.Tokenizer(t)
	save := func(vocab int) string {
		cfg := xlmr.TinyConfig(vocab)
		cfg.NumHiddenLayers, cfg.InitializerRange = 1, 0.2
		return tinyxlmr.Save(t, cfg, tok, testBackend)
	}
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.OutputDir, cfg.Backend, cfg.BatchSize, cfg.LearningRate, cfg.MaxLength = filepath.Join(t.TempDir(), "out"), testBackend, 2, 1e-3, 64
	res, err := Train(context.Background(), cfg, toyTriplets, save(tok.Len()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 2 || len(res.History) != 2 {
		t.Fatalf("steps %d, history %d, want 2", res.Steps, len(res.History))
	}
	for _, e := range res.History {
		if math.IsNaN(e.Loss) || !(e.Loss > 0) {
			t.Fatalf("loss %v at step %d", e.Loss, e.Step)
		}
	}
	m, err := encode.LoadModel(be, cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	if m.ModelType() != xlmr.ModelType {
		t.Fatalf("trained model saved as %q", m.ModelType())
	}

	cfg.OutputDir = filepath.Join(t.TempDir(), "out2")
	if _, err := Train(context.Background(), cfg, toyTriplets, save(tok.Len()-2), nil, nil); err == nil || !strings.Contains(err.Error(), "vocab_size") {
		t.Fatalf("tokenizer past vocab_size: err = %v", err)
	}
}
