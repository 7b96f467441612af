package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/trainer"
)

type trainFilterOptions struct {
	Config filtertrain.Config
	Recipe string
	Data   filtertrain.Data
	// changed are the flags given (an explicit flag overrides the recipe).
	changed map[string]bool
}

const trainFilterLong = `Fine-tunes a T5 checkpoint (a real Flan-T5 or ` + "`models init`" + ` output) on
RAG² filter examples (JSON list or JSONL with id, question, answer,
dataset_name). [HELPFUL] and [NOT_HELPFUL] are added as tokens (embeddings
resized); the target is the label token followed by </s>. Inputs longer than
--max-seq-length are split into windows sharing --doc-stride tokens, each
window carrying its example's label; an example's prediction is its window
with the highest P([HELPFUL]).

Without --valid, --valid-frac of the questions are held out (split by
question: no question is in both splits). Checkpoints (HF layout, atomic)
go to --out/checkpoint-<step>; --resume continues from the newest with the
same data order and optimizer state.

--recipe pretrained keeps RAG²'s launch-script settings (lr 3e-5, batch 16,
40 epochs, the checkpoint's dropout); --recipe scratch (the default for a
checkpoint whose config.json has "ragforge_random_init": true, i.e. made by
` + "`models init`" + `) sets lr, warmup, epochs, batch size, dropout and clipping for a randomly
initialised T5 (values and the sweep that chose them: docs/recipes.md).
Explicit --lr/--warmup-ratio/--epochs/--batch-size/--dropout/--max-grad-norm override the
recipe. When the two label tokens' embedding (or output) rows are identical —
as adding them to a checkpoint gives (HF resize_token_embeddings puts the
mean row in both) — they get N(0, 0.02²) noise seeded by --seed, because two
identical rows are a symmetric start that training never separates.

--match-marks writes DrQA's exact-match features into each evidence as text:
an evidence word shared with the question is preceded by "@ ", a run of n
consecutive shared words by n "@" (at most 5). The checkpoints record this
in config.json ("ragforge_filter_match_marks"), and eval filter, serve and
further training mark their inputs the same way; a transformers user must
mark them too (the rule and a Python version: docs/recipes.md). Marks are
for a randomly initialised T5, which does not learn to find the question's
words in the evidence on its own. Starting from a checkpoint of train
calibration drops its calibration, which was fitted to the start weights.`

func newTrainFilterCmd(g *globals) *cobra.Command {
	o := trainFilterOptions{Config: filtertrain.DefaultConfig(), Data: filtertrain.Data{ValidFrac: 0.2}}
	cmd := &cobra.Command{
		Use:     "filter",
		Short:   "Fine-tune a T5 checkpoint as the RAG² [HELPFUL]/[NOT_HELPFUL] filter",
		Long:    trainFilterLong,
		Example: `  ragforge train filter --model work/t5-tiny --train ../shared/data/rag2_filter/medqa_llama3_cot_5pct-train.json --out work/filter --epochs 2`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.changed = changedFlags(cmd)
			return runTrainFilter(cmdContext(cmd), g, o)
		},
	}
	c := &o.Config
	f := cmd.Flags()
	f.StringVar(&c.ModelDir, "model", "", "starting T5 checkpoint directory (required)")
	addRecipeFlag(cmd, &o.Recipe, "T5")
	f.StringVar(&o.Data.Train, "train", "", "training examples, RAG² filter schema (.json or .jsonl) (required)")
	f.StringVar(&o.Data.Valid, "valid", "", "validation examples (default: hold out --valid-frac of the questions)")
	f.StringVar(&o.Data.Augment, "augment", "", "extra training examples added after the split, never held out (e.g. `label ict` output)")
	f.BoolVar(&o.Data.AugmentOnly, "augment-only", false, "train on the --augment examples alone; --train only supplies the held-out questions (--valid-frac), e.g. a random T5 that would memorise which passages were helpful")
	f.Float64Var(&o.Data.ValidFrac, "valid-frac", o.Data.ValidFrac, "fraction of questions held out for validation when --valid is not given (0: none)")
	f.StringVar(&c.OutputDir, "out", "", "output directory for checkpoints (required)")
	f.IntVar(&c.MaxSeqLength, "max-seq-length", c.MaxSeqLength, "tokens per window (</s> included)")
	f.IntVar(&c.DocStride, "doc-stride", c.DocStride, "tokens shared by consecutive windows")
	f.IntVar(&c.BatchSize, "batch-size", c.BatchSize, "windows per micro-batch")
	f.IntVar(&c.GradAccumulation, "grad-accum", c.GradAccumulation, "gradient accumulation steps")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "training epochs")
	f.IntVar(&c.MaxSteps, "max-steps", c.MaxSteps, "stop after this many updates (0: epochs decide)")
	f.Float64Var(&c.LearningRate, "lr", c.LearningRate, "AdamW peak learning rate")
	f.Float64Var(&c.WeightDecay, "weight-decay", c.WeightDecay, "AdamW weight decay")
	f.IntVar(&c.WarmupSteps, "warmup-steps", c.WarmupSteps, "linear warmup steps")
	f.Float64Var(&c.WarmupRatio, "warmup-ratio", c.WarmupRatio, "linear warmup as a fraction of all steps")
	f.Float64Var(&c.MaxGradNorm, "max-grad-norm", c.MaxGradNorm, "gradient clipping norm (0: none)")
	f.StringVar(&c.LRScheduler, "lr-scheduler", c.LRScheduler, "learning-rate schedule after warmup: linear, cosine or constant (HF lr_scheduler_type)")
	f.BoolVar(&c.SkipNonFinite, "skip-nonfinite", false, "skip and count updates whose loss or gradient is not finite (default: stop with an error)")
	f.IntVar(&c.LoggingSteps, "logging-steps", c.LoggingSteps, "print loss, learning rate, gradient norm and throughput to stderr every N updates")
	f.Int64Var(&c.Seed, "seed", c.Seed, "seed for data order and dropout")
	f.Float64Var(&c.Dropout, "dropout", c.Dropout, "dropout rate while training (< 0: the checkpoint's dropout_rate)")
	f.Float64Var(&c.LabelSmoothing, "label-smoothing", c.LabelSmoothing, "label smoothing factor in [0, 1) (HF label_smoothing_factor; 0: plain cross-entropy)")
	f.BoolVar(&c.MatchMarks, "match-marks", false, "mark the evidence words the question shares (exact-match features, recorded in the checkpoint's config.json; eval, serve and export then mark too; see docs/recipes.md)")
	f.Float64SliceVar(&c.MatchMarksRare, "match-marks-rare", nil, "with --match-marks: one more mark on a shared word per fraction its document frequency over the training evidence is at or below, e.g. 0.05,0.005 (frequencies recorded with the marks; docs/recipes.md)")
	f.IntVar(&c.SaveSteps, "save-steps", c.SaveSteps, "checkpoint every N updates (0: every epoch)")
	f.IntVar(&c.EarlyStoppingPatience, "early-stopping", c.EarlyStoppingPatience, "stop after N validations without a better accuracy (0: off)")
	f.BoolVar(&c.Resume, "resume", false, "continue from the newest checkpoint in --out")
	f.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", false, "recompute each transformer block in the backward pass instead of keeping its activations (HF gradient_checkpointing): the same gradients, less memory, about one more forward pass per step")
	return cmd
}

// trainFilterJob checks the flags and returns the job with the backend,
// its explicit recipe fields and the resolved config (recipe applied).
func trainFilterJob(g *globals, o trainFilterOptions) (filtertrain.TrainJob, filtertrain.Config, error) {
	c := o.Config
	c.Backend = g.Backend
	j := filtertrain.TrainJob{Config: c, Data: o.Data, Recipe: o.Recipe}
	if o.Data.Train == "" || c.ModelDir == "" || c.OutputDir == "" {
		return j, c, fmt.Errorf("--model, --train and --out are required")
	}
	if !trainer.ValidScheduler(c.LRScheduler) {
		return j, c, fmt.Errorf("--lr-scheduler %q: want one of %s", c.LRScheduler, strings.Join(trainer.Schedulers, ", "))
	}
	if c.LoggingSteps < 1 {
		return j, c, fmt.Errorf("--logging-steps %d: want >= 1", c.LoggingSteps)
	}
	if c.LabelSmoothing < 0 || c.LabelSmoothing >= 1 {
		return j, c, fmt.Errorf("--label-smoothing %v: want in [0, 1)", c.LabelSmoothing)
	}
	if len(c.MatchMarksRare) > 0 && !c.MatchMarks {
		return j, c, fmt.Errorf("--match-marks-rare needs --match-marks")
	}
	if err := filter.CheckRareDocFractions(c.MatchMarksRare); err != nil {
		return j, c, fmt.Errorf("--match-marks-rare: %w", err)
	}
	if err := o.Data.Check(); err != nil {
		return j, c, err
	}
	// AdamW moves each weight by about lr per update: past 1 every update
	// overwrites the weights (fine-tuning uses 1e-5..1e-3). The trainer
	// itself takes any positive rate (tests force divergence with 1e30).
	if o.changed["lr"] && !(c.LearningRate > 0 && c.LearningRate <= 1) {
		return j, c, fmt.Errorf("--lr %g: want a learning rate in (0, 1]", c.LearningRate)
	}
	for flag, field := range trainFilterRecipeFlags {
		if o.changed[flag] {
			j.Explicit = append(j.Explicit, field)
		}
	}
	recipe, err := resolveRecipe(o.Recipe, c.ModelDir)
	if err != nil {
		return j, c, err
	}
	j.Recipe = recipe
	c, _, err = j.Resolve()
	return j, c, err
}

// trainFilterRecipeFlags are the flags that override the recipe, by the
// Config field (JSON name) each sets.
var trainFilterRecipeFlags = map[string]string{"lr": "learning_rate", "warmup-ratio": "warmup_ratio", "epochs": "num_train_epochs",
	"batch-size": "batch_size", "dropout": "dropout", "max-grad-norm": "max_grad_norm"}

func runTrainFilter(ctx context.Context, g *globals, o trainFilterOptions) (err error) {
	j, c, err := trainFilterJob(g, o)
	if err != nil {
		return err
	}
	// Before any data is read: a step that cannot fit stops here.
	if err := checkFilterMemory(g.Err, c); err != nil {
		return err
	}
	// --resume continues the run that wrote --out (its metrics go on from the checkpoint's step).
	r, start := runStarter(func(kind string, config any) (*tracker.Store, *tracker.Run, error) {
		return startOrResumeRun(g, kind, config, c.OutputDir, c.Resume)
	})
	defer r.finish(&err)
	var bar *progress.Bar
	rep, err := filtertrain.RunTrain(ctx, j, barOnStart(start, &bar, g.Err, -1, "train filter"), func(p filtertrain.Progress) {
		filtertrain.ShowProgress(bar, g.Err, p)
	})
	bar.Finish()
	if err != nil {
		return err
	}
	return printTrainFilter(g, c, rep)
}

func printTrainFilter(g *globals, c filtertrain.Config, rep *filtertrain.TrainReport) error {
	if g.JSON {
		return printJSON(g.Out, rep)
	}
	res := rep.Result
	fmt.Fprintf(g.Out, "run %s: %d steps (%s), final loss %.4f, %d train examples (%d windows), %d validation examples\n",
		rep.RunID, res.GlobalStep, res.StopReason, res.FinalLoss, res.TrainExamples, res.TrainWindows, rep.ValidExamples)
	if c.SkipNonFinite || res.SkippedNonFinite > 0 {
		fmt.Fprintf(g.Out, "%d updates skipped: loss or gradient not finite\n", res.SkippedNonFinite)
	}
	if res.BestAccuracy >= 0 {
		fmt.Fprintf(g.Out, "best checkpoint %s (validation accuracy %.4f)\n", res.BestCheckpoint, res.BestAccuracy)
	} else {
		fmt.Fprintf(g.Out, "last checkpoint %s\n", res.LastCheckpoint)
	}
	return nil
}
