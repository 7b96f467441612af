package demo

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// Window settings of the demo's filter: training windows of 256 tokens (a
// marked ICT example may take two; 384 scored lower on the AP training
// questions, docs/recipes.md) sharing 64; evalSeqLength holds a whole
// evidence example of a 512-character chunk with its match marks in one
// window, so no window lacks its question (at 256 a quarter of AP's took
// two; docs/recipes.md, "Filter: exact-match marks").
const (
	trainSeqLength = 256
	evalSeqLength  = 384
	docStride      = 64
	validFrac      = 0.2
)

// finetuneLR is the fine-tuning learning rate: 2e-4 scored above 1e-3 on
// the AP corpus' training questions (docs/recipes.md, "AP filter, fourth
// sweep"); the rest is the checkpoint's recipe.
const (
	finetuneLR     = 2e-4
	finetuneLRFlag = "2e-4" // as the summary's command has always written it
)

// trainFilter trains with the recipe train filter picks for the checkpoint
// (scratch: models init marks it random) on the ICT examples alone,
// holding out 20% of the evidence labels' questions for evaluation; with
// FilterFinetuneEpochs it then fine-tunes that checkpoint on the training
// questions' evidence labels (the same held-out split: same file, fraction
// and seed). The evaluation reads evalSeqLength.
func trainFilter(ctx context.Context, st *state) (Stage, error) {
	line, rep, out, err := st.trainFilter(ctx, st.dirs["t5-tiny"], "filter", st.o.Seed)
	if err != nil {
		return Stage{}, err
	}
	st.dirs["filter-run"] = rep.RunID
	st.dirs["filter-out"] = out
	st.filterMembers = []string{rep.Result.LastCheckpoint}
	return line, nil
}

// trainFilterMember adds an ensemble member: the T5 of models init and the
// filter training of the demo, both from seed (docs/recipes.md, "Filter,
// fourth sweep"). Only its last checkpoint is used, in eval filter; export
// and the pipeline keep the first filter.
func trainFilterMember(ctx context.Context, st *state, seed int64) (Stage, error) {
	model := st.fresh("models", fmt.Sprintf("t5-tiny-seed%d", seed))
	init, err := st.initT5(model, seed)
	if err != nil {
		return Stage{}, err
	}
	line, rep, _, err := st.trainFilter(ctx, model, fmt.Sprintf("filter-seed%d", seed), seed)
	if err != nil {
		return Stage{}, err
	}
	line.Command = init + "\n  " + line.Command
	st.filterMembers = append(st.filterMembers, rep.Result.LastCheckpoint)
	return line, nil
}

// trainFilter runs the demo's ICT training from model into the work
// directory name with seed, then, with FilterFinetuneEpochs, the
// fine-tuning into name-finetune. It returns the stage, the last run's
// report and its output directory.
func (st *state) trainFilter(ctx context.Context, model, name string, seed int64) (Stage, *filtertrain.TrainReport, string, error) {
	out := st.fresh(name)
	job, args := st.ictTrainJob(model, out, seed)
	rep, err := st.runTrainFilter(ctx, job)
	if err != nil {
		return Stage{}, nil, "", err
	}
	cmds := []string{st.command(args...)}
	if st.o.FilterFinetuneEpochs > 0 {
		out = st.fresh(name + "-finetune")
		job, args = st.finetuneJob(rep.Result.LastCheckpoint, out)
		if rep, err = st.runTrainFilter(ctx, job); err != nil {
			return Stage{}, nil, "", err
		}
		cmds = append(cmds, st.command(args...))
	}
	return Stage{Command: strings.Join(cmds, "\n  "), RunID: rep.RunID, Artifacts: []string{rep.Result.LastCheckpoint},
		Metrics: map[string]float64{"final_loss": rep.Result.FinalLoss, "steps": float64(rep.Result.GlobalStep)}}, rep, out, nil
}

func (st *state) runTrainFilter(ctx context.Context, job filtertrain.TrainJob) (*filtertrain.TrainReport, error) {
	var rep *filtertrain.TrainReport
	bar := progress.New(st.log, -1, "train filter")
	err := st.record(func(start tracker.Starter) error {
		var err error
		rep, err = filtertrain.RunTrain(ctx, job, start, trainProgress(bar, st.log))
		return err
	})
	bar.Finish()
	return rep, err
}

// ictTrainJob is the demo's ICT training from model into out with seed and
// its train filter command line: the ICT examples alone (AugmentOnly), 20%
// of the evidence labels' questions held out. With a seed other than the
// demo's, the run's own split (logged, never used) differs from the one
// the demo evaluates on; training sees the ICT examples only.
func (st *state) ictTrainJob(model, out string, seed int64) (filtertrain.TrainJob, []string) {
	c := filtertrain.DefaultConfig()
	c.ModelDir, c.OutputDir, c.MaxSeqLength, c.DocStride, c.Seed, c.Backend = model, out, trainSeqLength, docStride, seed, st.o.Backend
	job := filtertrain.TrainJob{Config: c, Recipe: st.o.Recipe,
		Data: filtertrain.Data{Train: st.dirs["labels"], Augment: st.dirs["labels-ict"], AugmentOnly: true, ValidFrac: validFrac}}
	args := []string{"train", "filter", "--model", model, "--train", st.dirs["labels"], "--augment", st.dirs["labels-ict"], "--augment-only",
		"--valid-frac", ftoa(validFrac), "--out", out, "--max-seq-length", itoa(trainSeqLength), "--doc-stride", itoa(docStride), "--seed", itoa(seed)}
	if st.o.FilterMatchMarks {
		// Fine-tuning inherits them from the checkpoint.
		job.Config.MatchMarks, job.Config.MatchMarksRare = true, st.o.FilterMatchMarksRare
		args = append(args, "--match-marks")
		if r := st.o.FilterMatchMarksRare; len(r) > 0 {
			args = append(args, "--match-marks-rare", floats(r))
		}
	}
	args = append(args, st.recipeArgs()...)
	epochs := 0
	switch {
	case st.o.Quick:
		epochs = 1
	case st.o.Epochs > 0:
		epochs = st.o.Epochs
	}
	if epochs > 0 {
		job.Config.Epochs, job.Explicit = epochs, []string{"num_train_epochs"}
		args = append(args, "--epochs", itoa(epochs))
	}
	return job, args
}

// finetuneJob fine-tunes the checkpoint model on the evidence labels'
// training questions, writing to out, and renders its command line; the
// held-out split is the demo's (same file, fraction and the demo's seed,
// for every ensemble member), so the evaluated questions stay out of
// training.
func (st *state) finetuneJob(model, out string) (filtertrain.TrainJob, []string) {
	epochs := st.o.FilterFinetuneEpochs
	if st.o.Quick {
		epochs = 1
	}
	c := filtertrain.DefaultConfig()
	c.ModelDir, c.OutputDir, c.MaxSeqLength, c.DocStride, c.Seed, c.Backend = model, out, trainSeqLength, docStride, st.o.Seed, st.o.Backend
	c.LearningRate, c.Epochs = finetuneLR, epochs
	job := filtertrain.TrainJob{Config: c, Recipe: st.o.Recipe, Explicit: []string{"learning_rate", "num_train_epochs"},
		Data: filtertrain.Data{Train: st.dirs["labels"], ValidFrac: validFrac}}
	args := []string{"train", "filter", "--model", model, "--train", st.dirs["labels"],
		"--valid-frac", ftoa(validFrac), "--out", out, "--max-seq-length", itoa(trainSeqLength), "--doc-stride", itoa(docStride), "--seed", itoa(st.o.Seed),
		"--lr", finetuneLRFlag, "--epochs", itoa(epochs)}
	return job, append(args, st.recipeArgs()...)
}

// trainProgress shows a filter training's progress on the log as `train
// filter` does on stderr: a bar and HF Trainer's log lines.
func trainProgress(bar *progress.Bar, log io.Writer) func(filtertrain.Progress) {
	return func(p filtertrain.Progress) { filtertrain.ShowProgress(bar, log, p) }
}
