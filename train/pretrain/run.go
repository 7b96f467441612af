package pretrain

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/t5"
)

// Corpus is the text a pretraining reads: one string per chunk.
type Corpus struct {
	Name  string   // recorded in the checkpoint's config.json (RecordKey)
	Texts []string // the chunks' texts
	Desc  any      // the corpus description recorded with the run
}

// Report is what Run did; `pretrain --json` prints it.
type Report struct {
	Out       string  `json:"out"`
	Pretrain  *Record `json:"pretrain"`
	RunID     string  `json:"run_id"`
	Objective string  `json:"-"` // ObjectiveSpanCorruption or ObjectiveCausalLM
}

// Objective returns the objective of the checkpoint in dir by its
// config.json model_type: span corruption for a T5, the causal LM for a
// decoder (decoder.ModelTypes), with the trainer and weights file of each.
func Objective(dir string) (string, func(context.Context, Config, string, []string, *tracker.Run, func(Progress)) (*Record, error), string, error) {
	mt, err := hf.ModelType(dir)
	if err != nil {
		return "", nil, "", err
	}
	switch {
	case mt == "t5":
		return ObjectiveSpanCorruption, SpanCorruptT5, t5.WeightsFile, nil
	case slices.Contains(decoder.ModelTypes(), mt):
		return ObjectiveCausalLM, CausalLM, decoder.WeightsFile, nil
	}
	return "", nil, "", fmt.Errorf("--model %s: model_type %q: want t5 (span corruption) or a decoder (%s; causal LM)", dir, mt, strings.Join(decoder.ModelTypes(), ", "))
}

// Run pretrains cfg.ModelDir on the corpus with its objective (Objective),
// recorded as a run of kind "pretrain" (config, corpus, objective) whose
// metrics are the first and final loss and the steps, the written weights
// its artifact.
func Run(ctx context.Context, cfg Config, c Corpus, start tracker.Starter, progress func(Progress)) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	objective, train, weights, err := Objective(cfg.ModelDir)
	if err != nil {
		return nil, err
	}
	run, err := start.Start("pretrain", map[string]any{"config": cfg, "corpus": c.Desc, "objective": objective})
	if err != nil {
		return nil, err
	}
	rec, err := train(ctx, cfg, c.Name, c.Texts, run, progress)
	if err != nil {
		return nil, err
	}
	rep := &Report{Out: cfg.OutputDir, Pretrain: rec, Objective: objective}
	if run == nil {
		return rep, nil
	}
	rep.RunID = run.ID
	if err := run.LogMetrics(map[string]float64{"pretrain/first_loss": rec.FirstLoss, "pretrain/final_loss": rec.FinalLoss, "pretrain/steps": float64(rec.Steps)}, rec.Steps); err != nil {
		return nil, err
	}
	return rep, run.Artifact("checkpoint", filepath.Join(cfg.OutputDir, weights))
}
