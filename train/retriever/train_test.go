package retriever

import (
	"cmp"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/hyde"
	"github.com/ragforge/ragforge/train/trainer"
)

// testBackend runs ops sequentially: GoMLX v0.26's simplego can deadlock
// on 2-core machines when parallel op execution nests DotGeneral workers
// (all workers wait in workersPool.WaitToStart).
// testBackend is the pure-Go backend, or $RAGFORGE_TEST_BACKEND (the GPU
// check runs the training fixtures through XLA with it).
var testBackend = cmp.Or(os.Getenv(backend.TestEnvVar), "go:ops_sequential")

// toyModelDir writes a random 1-layer BERT (hidden 32) with the testdata
// vocabulary to a temporary HF directory.
func toyModelDir(t *testing.T, dropout float64) string {
	t.Helper()
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg := bert.TinyConfig(tok.Len())
	cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 2, 64, 1
	cfg.MaxPositionEmbeddings, cfg.InitializerRange = 32, 0.2 // wide init: texts get distinct embeddings
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = dropout, dropout
	m, err := bert.NewRandom(be, cfg, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var toyTriplets = []Triplet{
	{Query: "what causes gout?", HypoDocs: []string{"uric acid crystals in the joint"}, Pos: "gout is caused by uric acid crystals", Negs: []string{"asthma is a disease of the airway"}},
	{Query: "asthma symptoms", HypoDocs: []string{"wheeze and airway inflammation"}, Pos: "asthma causes wheeze in the lungs", Negs: []string{"eczema is a skin rash"}},
	{Query: "eczema treatment", HypoDocs: []string{"treat the skin rash and itch"}, Pos: "eczema skin rash treatment", Negs: []string{"insulin for diabetes"}},
	{Query: "aspirin dose for heart attack", HypoDocs: []string{"aspirin mg daily"}, Pos: "aspirin daily dose mg heart", Negs: []string{"kidney stone pain"}},
}

// evalLoss is Eq. 8 over all toy triplets computed on the inference path:
// encode.BERTEncoder (no dropout) + hyde.Encode (Eq. 10, re-normalised) +
// the reference InfoNCE.
func evalLoss(t *testing.T, dir string, temp float64) float64 {
	t.Helper()
	be, _ := backend.New(testBackend)
	m, err := bert.Load(be, dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc := encode.NewBERTEncoder(m, tok, "toy")
	var q, p [][]float32
	var negs [][][]float32
	var ids []string
	for _, tr := range toyTriplets {
		v, err := hyde.Encode(enc, hyde.Config{Mode: hyde.ModeFusion, N: 1, Normalize: true}, tr.Query, tr.HypoDocs)
		if err != nil {
			t.Fatal(err)
		}
		d, err := enc.EncodeDocs(append([]string{tr.Pos}, tr.Negs...))
		if err != nil {
			t.Fatal(err)
		}
		q, p, negs, ids = append(q, v), append(p, d[0]), append(negs, d[1:]), append(ids, tr.Pos)
	}
	return InfoNCE(q, p, negs, temp, ids)
}

type fakeRun struct{ steps map[int]map[string]float64 }

func (f *fakeRun) LogMetrics(v map[string]float64, step int) error {
	f.steps[step] = v
	return nil
}

// Without dropout, the first update's training loss (graph, whole toy set
// in one batch) equals Eq. 8 computed on the inference path, and a few
// AdamW steps lower it; metrics reach the logger with the linear schedule.
func TestTrainLossMatchesInferenceAndDecreases(t *testing.T) {
	dir := toyModelDir(t, 0)
	cfg := DefaultConfig()
	cfg.Backend = testBackend
	cfg.OutputDir, cfg.BatchSize, cfg.Epochs, cfg.LearningRate, cfg.WarmupRatio = t.TempDir(), 4, 8, 2e-3, 0
	before := evalLoss(t, dir, cfg.Temperature)
	run := &fakeRun{steps: map[int]map[string]float64{}}
	res, err := Train(context.Background(), cfg, toyTriplets, dir, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.History[0].Loss-before) > 1e-3*before {
		t.Errorf("first training loss %.6f, inference-path Eq. 8 %.6f", res.History[0].Loss, before)
	}
	after := evalLoss(t, cfg.OutputDir, cfg.Temperature)
	for _, e := range res.History {
		t.Logf("step %d loss %.4f lr %.2g", e.Step, e.Loss, e.LearningRate)
	}
	t.Logf("InfoNCE before %.4f after %.4f (%d steps)", before, after, res.Steps)
	if !(after < 0.5*before) {
		t.Errorf("InfoNCE %.4f → %.4f after %d steps, want < 50%%", before, after, res.Steps)
	}
	if res.Steps != 8 || len(run.steps) != 8 {
		t.Fatalf("steps %d, logged %d, want 8", res.Steps, len(run.steps))
	}
	for s := 1; s <= 8; s++ {
		want := trainer.LinearSchedule(s-1, 0, 8, cfg.LearningRate)
		if got := run.steps[s]["learning_rate"]; math.Abs(got-want) > 1e-15 {
			t.Errorf("step %d: learning_rate %g, want %g", s, got, want)
		}
		if run.steps[s]["loss"] != res.History[s-1].Loss {
			t.Errorf("step %d: logged loss %g, history %g", s, run.steps[s]["loss"], res.History[s-1].Loss)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(cfg.OutputDir, f)); err != nil {
			t.Errorf("final model: %v", err)
		}
	}
	// The final model is a sentence-transformers directory encoding as trained.
	st, ok, err := hf.ReadSentenceTransformer(cfg.OutputDir)
	if err != nil || !ok {
		t.Fatalf("sentence-transformers files: ok %v, %v", ok, err)
	}
	if want := SentenceTransformer(cfg, res.Model); st != want || st.Pooling != "cls" || !st.Normalize {
		t.Errorf("sentence-transformers config %+v, want %+v (CLS, normalized)", st, want)
	}
}

// A run interrupted after 2 of 4 updates and resumed from its checkpoint
// ends with the same weights and losses as an uninterrupted run (dropout on,
// gradient accumulation 2).
func TestTrainResumeIsExact(t *testing.T) {
	dir := toyModelDir(t, 0.1)
	cfg := DefaultConfig()
	cfg.Backend = testBackend
	cfg.BatchSize, cfg.GradAccumulation, cfg.Epochs, cfg.LearningRate, cfg.SaveSteps = 1, 2, 2, 1e-3, 1
	// No clipping: bert.Load creates variables in map order, so the global
	// gradient norm is summed in a random order and differs in the last ulp
	// between runs; without clipping the update is elementwise and exact.
	cfg.MaxGradNorm = 0
	cfg.OutputDir = t.TempDir()
	full, err := Train(context.Background(), cfg, toyTriplets, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OutputDir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Train(ctx, cfg, toyTriplets, dir, nil, func(e trainer.LogEntry) {
		if e.Step == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	cfg.Resume = true
	resumed, err := Train(context.Background(), cfg, toyTriplets, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(resumed.ResumedFrom) != "checkpoint-2" {
		t.Errorf("resumed from %q, want checkpoint-2", resumed.ResumedFrom)
	}
	if resumed.Steps != 4 || len(resumed.History) != 4 {
		t.Fatalf("resumed run: %d steps, %d history entries, want 4", resumed.Steps, len(resumed.History))
	}
	for i := range full.History {
		if full.History[i].Loss != resumed.History[i].Loss {
			t.Errorf("update %d: loss %v uninterrupted, %v resumed", i+1, full.History[i].Loss, resumed.History[i].Loss)
		}
	}
	ids := [][]int{{2, 10, 11, 3}}
	a, err := full.Model.Embed(ids, nil, bert.PoolCLS, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := resumed.Model.Embed(ids, nil, bert.PoolCLS, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a[0] {
		if a[0][i] != b[0][i] {
			t.Fatalf("embedding[%d]: %v uninterrupted, %v resumed", i, a[0][i], b[0][i])
		}
	}
	// Other data refuses to resume.
	other := append([]Triplet(nil), toyTriplets...)
	other[0].Pos = "changed"
	if _, err := Train(context.Background(), cfg, other, dir, nil, nil); err == nil {
		t.Error("resume with other triplets: no error")
	}
}

func TestConfigValidate(t *testing.T) {
	for field, edit := range map[string]func(*Config){
		"OutputDir":   func(c *Config) { c.OutputDir = "" },
		"Temperature": func(c *Config) { c.Temperature = 0 },
		"BatchSize":   func(c *Config) { c.BatchSize = 0 },
		"Pooling":     func(c *Config) { c.Pooling = "max" },
	} {
		c := DefaultConfig()
		c.OutputDir = "x"
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"`+field+`"`) {
			t.Errorf("%s: error %v does not name the field", field, err)
		}
	}
}
