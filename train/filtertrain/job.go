package filtertrain

import (
	"context"
	"slices"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/train/trainer"
)

// TrainJob is one filter training as `ragforge train filter` runs it:
// Config before the recipe, the data, and the recipe to apply.
type TrainJob struct {
	Config Config
	Data   Data
	// Recipe is pretrained, scratch, or auto/"" (scratch for a checkpoint
	// made by `models init`: trainer.ResolveRecipe on Config.ModelDir).
	Recipe string
	// Explicit names the recipe fields given explicitly, by Config's JSON
	// names (learning_rate, warmup_ratio, num_train_epochs, batch_size,
	// dropout, max_grad_norm): they keep Config's value over the recipe's.
	Explicit []string
}

// TrainReport is what RunTrain did; `train filter --json` prints it.
type TrainReport struct {
	Recipe string  `json:"recipe"`
	Result *Result `json:"result"`
	RunID  string  `json:"run_id"`
	// ValidExamples is the number of validation examples.
	ValidExamples int `json:"-"`
}

// Resolve returns the job's Config with the recipe's settings and the
// explicit fields over them, validated, and the recipe's name. Errors: an
// unknown recipe, invalid data settings or config.
func (j TrainJob) Resolve() (Config, string, error) {
	c := j.Config
	if err := j.Data.Check(); err != nil {
		return c, "", err
	}
	name, err := trainer.ResolveRecipe(j.Recipe, c.ModelDir)
	if err != nil {
		return c, "", err
	}
	r, err := LookupRecipe(name)
	if err != nil {
		return c, "", err
	}
	r.Apply(&c)
	x := j.Config
	for field, keep := range map[string]func(){
		"learning_rate": func() { c.LearningRate = x.LearningRate }, "warmup_ratio": func() { c.WarmupRatio = x.WarmupRatio },
		"num_train_epochs": func() { c.Epochs = x.Epochs }, "batch_size": func() { c.BatchSize = x.BatchSize },
		"dropout": func() { c.Dropout = x.Dropout }, "max_grad_norm": func() { c.MaxGradNorm = x.MaxGradNorm },
	} {
		if slices.Contains(j.Explicit, field) {
			keep()
		}
	}
	return c, name, c.Validate()
}

// RunTrain resolves the job, reads and splits its data (PrepareData), then
// starts a run of kind "train-filter" recording the config, recipe and data
// files, and trains (Train) with progress. The run is started after the
// data is read, so a refused job records none.
func RunTrain(ctx context.Context, j TrainJob, start tracker.Starter, progress func(Progress)) (*TrainReport, error) {
	c, recipe, err := j.Resolve()
	if err != nil {
		return nil, err
	}
	train, valid, err := PrepareData(c, j.Data)
	if err != nil {
		return nil, err
	}
	d := j.Data
	const kind = "train-filter"
	run, err := start.Start(kind, map[string]any{"config": c, "recipe": recipe, "train": d.Train, "augment": d.Augment,
		"augment_only": d.AugmentOnly, "valid": d.Valid, "valid_frac": d.ValidFrac})
	if err != nil {
		return nil, err
	}
	rep := &TrainReport{Recipe: recipe, ValidExamples: len(valid)}
	if run != nil {
		// For --resume: the run that writes OutputDir (the command has
		// written the same when it resumed or started it).
		if err := tracker.RecordInDir(c.OutputDir, run, kind); err != nil {
			return nil, err
		}
		rep.RunID = run.ID
	}
	rep.Result, err = Train(ctx, c, train, valid, run, progress)
	if err != nil {
		return nil, err
	}
	return rep, nil
}
