package lora

import (
	"context"

	"github.com/ragforge/ragforge/data/tracker"
)

// TrainJob is one `ragforge train lora`: the training options and the SFT
// data file (JSONL prompt/response pairs, ReadSFT).
type TrainJob struct {
	Options Options
	Data    string
	// ChatTemplate renders each prompt as one user message through the
	// tokenizer's chat template (else raw text).
	ChatTemplate bool
}

// TrainReport is what RunTrain did; `train lora --json` prints it.
type TrainReport struct {
	Result *Result `json:"result"`
	RunID  string  `json:"run_id"`
}

// RunTrain validates the config, reads and tokenizes the data, starts a
// run of kind "train-lora" (options, data file, example count) and trains.
func RunTrain(ctx context.Context, j TrainJob, start tracker.Starter, progress func(Progress)) (*TrainReport, error) {
	opt := j.Options
	if err := opt.Config.Validate(); err != nil {
		return nil, err
	}
	pairs, err := ReadSFT(j.Data)
	if err != nil {
		return nil, err
	}
	examples, err := Tokenize(opt.ModelDir, pairs, opt.Config.MaxLength, j.ChatTemplate)
	if err != nil {
		return nil, err
	}
	run, err := start.Start("train-lora", map[string]any{"options": opt, "data": j.Data, "examples": len(examples)})
	if err != nil {
		return nil, err
	}
	rep := &TrainReport{}
	if run != nil {
		rep.RunID = run.ID
	}
	if rep.Result, err = Train(ctx, opt, examples, run, progress); err != nil {
		return nil, err
	}
	return rep, nil
}
