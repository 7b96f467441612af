package pretrain

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/testutil/tinyt5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// testBackend is the pure-Go backend run one op at a time (as train/filtertrain's
// tests), or $RAGFORGE_TEST_BACKEND.
var testBackend = cmp.Or(os.Getenv(backend.TestEnvVar), "go:ops_sequential")

// smallModel writes a random T5 smaller than t5.TinyConfig with the fixture
// tokenizer plus the filter's label tokens, marked random-init as `models
// init` marks it.
func smallModel(t *testing.T) string {
	t.Helper()
	tok, err := tokenizer.Load(testutil.SharedPath(t, "fixtures/t5-flan-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]"})
	dir := tinyt5.Save(t, tok, testBackend, 0.1)
	if err := hf.MarkRandomInit(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var toyTexts = []string{
	"Surgical specimens are immersed in neutral buffered formalin as soon as possible after excision.",
	"The volume of fixative should be at least ten times the volume of the tissue.",
	"Samples are centrifuged at four degrees before the supernatant is removed.",
	"Label every tube with the patient identifier and the date of collection.",
}

func TestSpanCorruptT5(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 for a few seconds")
	}
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.OutputDir, cfg.Backend = smallModel(t), filepath.Join(t.TempDir(), "out"), testBackend
	cfg.BatchSize, cfg.MaxSteps, cfg.LearningRate, cfg.LoggingSteps = 4, 40, 1e-2, 10
	var logs int
	rec, err := SpanCorruptT5(context.Background(), cfg, "toy", toyTexts, nil, func(p Progress) {
		if p.Phase == "log" {
			logs++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.4f → %.4f in %d steps", rec.FirstLoss, rec.FinalLoss, rec.Steps)
	if rec.Steps != 40 || rec.StopReason != "max_steps" || logs != 4 || rec.Chunks != 4 {
		t.Fatalf("record %+v, %d log reports; want 40 steps (max_steps), 4 logs, 4 chunks", rec, logs)
	}
	if !(rec.FinalLoss < rec.FirstLoss/2) {
		t.Fatalf("span-corruption loss %.4f → %.4f: did not halve", rec.FirstLoss, rec.FinalLoss)
	}
	// The output is a T5 checkpoint that keeps the label tokens, the
	// random-init mark (scratch recipe) and the checkpoint's dropout, and
	// records the run.
	c, err := t5.LoadConfig(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.DropoutRate != 0.1 {
		t.Errorf("saved dropout_rate %v, want the checkpoint's 0.1 (pretraining ran with 0)", c.DropoutRate)
	}
	if random, err := hf.IsRandomInit(cfg.OutputDir); err != nil || !random {
		t.Errorf("ragforge_random_init %v (%v), want true", random, err)
	}
	tok, err := tokenizer.Load(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range []string{"[HELPFUL]", "[NOT_HELPFUL]", "<extra_id_0>"} {
		if id, ok := tok.TokenToID(lt); !ok || id >= c.VocabSize {
			t.Errorf("token %s: id %d, found %v, vocab %d", lt, id, ok, c.VocabSize)
		}
	}
	raw, err := hf.ReadRawConfig(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(raw[RecordKey])
	var got Record
	if err := json.Unmarshal(b, &got); err != nil || got != *rec {
		t.Errorf("config.json %s = %s (%v), want %+v", RecordKey, b, err, *rec)
	}
	// The output loads and scores with the pretrained weights.
	be, _ := backend.New(testBackend)
	m, err := t5.Load(be, cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Loss([][]int{{5, 6, 7, 1}}, nil, [][]int{{8, 1}}); err != nil {
		t.Fatal(err)
	}
	// An existing checkpoint is never overwritten.
	if _, err := SpanCorruptT5(context.Background(), cfg, "toy", toyTexts, nil, nil); err == nil || !strings.Contains(err.Error(), "already holds a checkpoint") {
		t.Errorf("second run into the same --out: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"model", func(c *Config) { c.ModelDir = "" }},
		{"out", func(c *Config) { c.OutputDir = "" }},
		{"out", func(c *Config) { c.OutputDir = c.ModelDir + "/" }},
		{"noise_density", func(c *Config) { c.NoiseDensity = 0 }},
		{"noise_density", func(c *Config) { c.NoiseDensity = 1 }},
		{"mean_noise_span_length", func(c *Config) { c.MeanSpanLength = 0.5 }},
		{"max_seq_length", func(c *Config) { c.MaxSeqLength = 1 }},
		{"batch_size", func(c *Config) { c.BatchSize = 0 }},
		{"epochs", func(c *Config) { c.Epochs = 0 }},
		{"max_steps", func(c *Config) { c.MaxSteps = -1 }},
		{"max_time", func(c *Config) { c.MaxTime = -1 }},
		{"dropout", func(c *Config) { c.Dropout = 1 }},
		{"logging_steps", func(c *Config) { c.LoggingSteps = 0 }},
		{"LearningRate", func(c *Config) { c.LearningRate = 0 }},
		{"Scheduler", func(c *Config) { c.Scheduler = "inverse_sqrt" }},
	} {
		c := DefaultConfig()
		c.ModelDir, c.OutputDir = "in", "out"
		if err := c.Validate(); err != nil {
			t.Fatalf("defaults: %v", err)
		}
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
			t.Errorf("field %s: error %v, want one naming it", tc.field, err)
		}
	}
}

// A corpus with no chunk of 2 tokens is refused before training, and nothing is written.
func TestNoUsableChunk(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.OutputDir, cfg.Backend = smallModel(t), filepath.Join(t.TempDir(), "out"), testBackend
	if _, err := SpanCorruptT5(context.Background(), cfg, "toy", []string{"", " "}, nil, nil); err == nil || !strings.Contains(err.Error(), "2 or more tokens") {
		t.Errorf("only empty chunks: %v", err)
	}
	if _, err := os.Stat(cfg.OutputDir); !os.IsNotExist(err) {
		t.Errorf("failed run wrote %s", cfg.OutputDir)
	}
}
