package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/trainer"
)

type trainFilterOptions struct {
	Config filtertrain.Config
	Recipe string
	Data   filtertrain.Data
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
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTrainFilter(cmd, g, o) },
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

// trainFilterConfig is o.Config with the backend, the recipe's settings and
// the explicitly given flags over them, validated; it returns the recipe's
// name too.
func trainFilterConfig(cmd *cobra.Command, g *globals, o trainFilterOptions) (filtertrain.Config, string, error) {
	c := o.Config
	c.Backend = g.Backend
	if o.Data.Train == "" || c.ModelDir == "" || c.OutputDir == "" {
		return c, "", fmt.Errorf("--model, --train and --out are required")
	}
	if !trainer.ValidScheduler(c.LRScheduler) {
		return c, "", fmt.Errorf("--lr-scheduler %q: want one of %s", c.LRScheduler, strings.Join(trainer.Schedulers, ", "))
	}
	if c.LoggingSteps < 1 {
		return c, "", fmt.Errorf("--logging-steps %d: want >= 1", c.LoggingSteps)
	}
	if c.LabelSmoothing < 0 || c.LabelSmoothing >= 1 {
		return c, "", fmt.Errorf("--label-smoothing %v: want in [0, 1)", c.LabelSmoothing)
	}
	if len(c.MatchMarksRare) > 0 && !c.MatchMarks {
		return c, "", fmt.Errorf("--match-marks-rare needs --match-marks")
	}
	if err := filter.CheckRareDocFractions(c.MatchMarksRare); err != nil {
		return c, "", fmt.Errorf("--match-marks-rare: %w", err)
	}
	if err := o.Data.Check(); err != nil {
		return c, "", err
	}
	// AdamW moves each weight by about lr per update: past 1 every update
	// overwrites the weights (fine-tuning uses 1e-5..1e-3). The trainer
	// itself takes any positive rate (tests force divergence with 1e30).
	if cmd.Flags().Changed("lr") && !(c.LearningRate > 0 && c.LearningRate <= 1) {
		return c, "", fmt.Errorf("--lr %g: want a learning rate in (0, 1]", c.LearningRate)
	}
	recipe, err := resolveRecipe(o.Recipe, c.ModelDir)
	if err != nil {
		return c, "", err
	}
	r, err := filtertrain.LookupRecipe(recipe)
	if err != nil {
		return c, "", err
	}
	r.Apply(&c)
	x := o.Config
	keepExplicit(cmd, map[string]func(){
		"lr": func() { c.LearningRate = x.LearningRate }, "warmup-ratio": func() { c.WarmupRatio = x.WarmupRatio },
		"epochs": func() { c.Epochs = x.Epochs }, "batch-size": func() { c.BatchSize = x.BatchSize },
		"dropout": func() { c.Dropout = x.Dropout }, "max-grad-norm": func() { c.MaxGradNorm = x.MaxGradNorm },
	})
	return c, recipe, c.Validate()
}

func runTrainFilter(cmd *cobra.Command, g *globals, o trainFilterOptions) (err error) {
	c, recipe, err := trainFilterConfig(cmd, g, o)
	if err != nil {
		return err
	}
	// Before any data is read: a step that cannot fit stops here.
	if err := checkFilterMemory(g.Err, c); err != nil {
		return err
	}
	// Before a run is started (and recorded in --out).
	train, valid, err := filtertrain.PrepareData(c, o.Data)
	if err != nil {
		return err
	}
	// --resume continues the run that wrote --out (its metrics go on from the checkpoint's step).
	st, run, err := startOrResumeRun(g, "train-filter", map[string]any{"config": c, "recipe": recipe, "train": o.Data.Train, "augment": o.Data.Augment, "augment_only": o.Data.AugmentOnly, "valid": o.Data.Valid, "valid_frac": o.Data.ValidFrac},
		c.OutputDir, c.Resume)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	bar := progress.New(g.Err, -1, "train filter")
	res, err := filtertrain.Train(cmdContext(cmd), c, train, valid, run, func(p filtertrain.Progress) {
		switch p.Phase {
		case "train":
			bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f lr %.2e %.0f tok/s", p.Epoch, p.Epochs, p.Loss, p.LearningRate, p.TokensPerSec))
			bar.Set(p.Step, p.Steps)
		case "log", "eval":
			bar.Println(g.Err, filterLogLine(p))
		}
	})
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "recipe": recipe, "result": res})
	}
	fmt.Fprintf(g.Out, "run %s: %d steps (%s), final loss %.4f, %d train examples (%d windows), %d validation examples\n",
		run.ID, res.GlobalStep, res.StopReason, res.FinalLoss, res.TrainExamples, res.TrainWindows, len(valid))
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

// filterLogLine formats a "log" or "eval" progress report as HF Trainer's
// log line (a Python-style dict; eval metrics prefixed "eval_").
func filterLogLine(p filtertrain.Progress) string {
	if p.Phase == "eval" {
		parts := make([]string, 0, len(p.Valid)+2)
		for _, k := range sortedKeys(p.Valid) {
			parts = append(parts, fmt.Sprintf("'eval_%s': %.4g", k, p.Valid[k]))
		}
		parts = append(parts, fmt.Sprintf("'epoch': %.2f", p.EpochFrac), fmt.Sprintf("'step': %d", p.Step))
		return "{" + strings.Join(parts, ", ") + "}"
	}
	line := fmt.Sprintf("{'loss': %.4f, 'grad_norm': %.4g, 'learning_rate': %.4g, 'epoch': %.2f, 'step': %d, 'train_tokens_per_second': %.1f, 'train_samples_per_second': %.2f",
		p.Loss, p.GradNorm, p.LearningRate, p.EpochFrac, p.Step, p.TokensPerSec, p.WindowsPerSec)
	if p.SkippedNonFinite > 0 {
		line += fmt.Sprintf(", 'skipped_nonfinite': %d", p.SkippedNonFinite)
	}
	return line + "}"
}

// evalFilterOptions are the flags of `eval filter`.
type evalFilterOptions struct {
	Models    []string // one checkpoint, or an ensemble's members
	Data, Out string
	Eval      filtertrain.EvalOptions
	Windows   filterWindows
}

func newEvalFilterCmd(g *globals) *cobra.Command {
	var o evalFilterOptions
	cmd := &cobra.Command{
		Use:   "filter",
		Short: "Evaluate a filter checkpoint: accuracy, per-class accuracy, P/R/F1 of [HELPFUL], ROC-AUC, threshold sweep",
		Long: `P([HELPFUL]) is the softmax over the two label-token logits at the first
decoder step; an example's probability is its best window's. Given --model
more than once, the filters form an ensemble: an example's P([HELPFUL]) is
the mean of the members' (soft voting). A checkpoint trained with match
marks (train filter --match-marks) has its inputs marked as in training.
The windows default to the filter's own: its config.json's
ragforge_filter_windows (an export's or a calibrated checkpoint's: what it
was evaluated at), else its training_args.json's. Writes RAG²'s
dict_id_pred_results.json, final_eval_results.json and
final_eval_results_perClass.json into --out and stores the metrics in a run.`,
		Example: `  ragforge eval filter --model work/filter/best --data work/labels-test.jsonl --out work/filter-eval`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEvalFilter(g, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Models, "model", nil, "filter checkpoint directory (with [HELPFUL]/[NOT_HELPFUL] tokens) (required; repeat for an ensemble)")
	f.StringVar(&o.Data, "data", "", "examples in the RAG² filter schema (.json or .jsonl) (required)")
	f.StringVar(&o.Out, "out", "", "directory for the RAG² result files (default runs/<run id>)")
	o.Windows.add(cmd)
	f.IntVar(&o.Eval.BatchSize, "batch-size", 16, "windows per batch")
	f.Float64Var(&o.Eval.Threshold, "threshold", 0.5, "predict [HELPFUL] when P([HELPFUL]) >= threshold")
	return cmd
}

// runEvalFilter scores o.Data with the checkpoint(s) o.Models, writes RAG²'s
// result files and records the metrics in a run.
func runEvalFilter(g *globals, o evalFilterOptions) (err error) {
	if len(o.Models) == 0 || o.Data == "" {
		return fmt.Errorf("--model and --data are required")
	}
	for i, m := range o.Models {
		if m == "" {
			return fmt.Errorf("--model %d of %d: empty directory", i+1, len(o.Models))
		}
	}
	for i, m := range o.Models {
		if o.Models[i], err = modelDir(g, "model", m); err != nil {
			return err
		}
	}
	if err := o.Windows.resolve(o.Models, g.Err); err != nil {
		return err
	}
	o.Eval.MaxSeqLength, o.Eval.DocStride = o.Windows.MaxSeqLength, o.Windows.DocStride
	examples, err := filter.ReadExamples(o.Data)
	if err != nil {
		return err
	}
	st, run, err := startRun(g, "eval-filter", map[string]any{"model": strings.Join(o.Models, ","), "data": o.Data,
		"max_seq_length": o.Eval.MaxSeqLength, "doc_stride": o.Eval.DocStride, "windows_sources": o.Windows.Sources,
		"batch_size": o.Eval.BatchSize, "threshold": o.Eval.Threshold})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	bar := progress.New(g.Err, -1, "eval filter")
	o.Eval.Backend = g.Backend
	o.Eval.Progress = bar.Func()
	rep, err := filtertrain.EvaluateEnsemble(o.Models, examples, o.Eval)
	bar.Finish()
	if err != nil {
		return err
	}
	dir, err := runDir(g, run.ID, o.Out)
	if err != nil {
		return err
	}
	if err := rep.WriteRAG2Files(dir); err != nil {
		return err
	}
	for _, f := range []string{"dict_id_pred_results.json", "final_eval_results.json", "final_eval_results_perClass.json"} {
		if err := run.Artifact(f, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	if err := run.LogMetrics(rep.Metrics(""), 0); err != nil {
		return err
	}
	if g.JSON {
		rep.Predictions = nil
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "dir": dir, "windows": o.Windows, "report": rep, "notes": earlierBetterNotes(o.Models)})
	}
	auc := "n/a (one class)"
	if rep.ROCAUC != nil {
		auc = fmt.Sprintf("%.4f", *rep.ROCAUC)
	}
	fmt.Fprintf(g.Out, "run %s: %d examples (%d windows)\naccuracy %.4f  (majority-class baseline %.4f: always %s)\n",
		run.ID, rep.N, rep.Windows, rep.Accuracy, rep.MajorityBaseline, rep.MajorityClass)
	fmt.Fprintf(g.Out, "[HELPFUL] precision %.4f recall %.4f F1 %.4f  ROC-AUC %s\n", rep.Precision, rep.Recall, rep.F1, auc)
	for _, k := range sortedKeys(rep.PerClass) {
		fmt.Fprintf(g.Out, "accuracy on %-14s %.4f\n", k, rep.PerClass[k])
	}
	for _, n := range earlierBetterNotes(o.Models) {
		fmt.Fprintln(g.Out, n)
	}
	fmt.Fprintf(g.Out, "files in %s\n", dir)
	return nil
}

// earlierBetterNotes says, for each training checkpoint among models
// (its trainer_state.json), when an earlier checkpoint of its run scored
// higher on validation: the figures above are this checkpoint's.
func earlierBetterNotes(models []string) []string {
	var notes []string
	for _, m := range models {
		s, err := trainer.ReadState(m)
		if err != nil {
			continue // an export or a base model: no training history
		}
		if best, bestAcc, own, ok := s.EarlierBest(); ok {
			notes = append(notes, fmt.Sprintf("note: %s (step %d) scored validation accuracy %.4f; an earlier checkpoint of its run, %s, scored %.4f (evaluate %s to see it)",
				m, s.GlobalStep, own, best, bestAcc, filepath.Join(filepath.Dir(m), best)))
		}
	}
	return notes
}

// exportOptions are the flags of `export`.
type exportOptions struct {
	Run, From, Out string
	Retriever      retrieverExportFlags
	Windows        filterWindows // a filter export's
}

func newExportCmd(g *globals) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a trained filter (HF layout) or retriever (sentence-transformers layout) for transformers / sentence-transformers",
		Long: `Copies the best checkpoint of a train-filter run (--run) or a checkpoint
directory (--from) to --out in Hugging Face layout: config.json,
model.safetensors, generation_config.json, spiece.model, tokenizer.json and
the tokenizer json files with [HELPFUL]/[NOT_HELPFUL], loadable by ragforge
and by transformers' T5ForConditionalGeneration/AutoTokenizer. A filter
trained with --match-marks keeps "ragforge_filter_match_marks" in its
config.json: outside ragforge its instructions must be marked before
tokenizing (the rule and a Python function: docs/recipes.md). A filter made
by train calibration keeps "ragforge_filter_calibration": outside ragforge
its P([HELPFUL]) is the T5's until that map is applied (docs/recipes.md).
The export records the windows it is to be read at in config.json
("ragforge_filter_windows": --max-seq-length and --doc-stride, by default
the checkpoint's own), which eval filter, pipeline build and serve read.

With --retriever DIR, copies a BERT bi-encoder and writes the
sentence-transformers files (modules.json, 1_Pooling/config.json,
2_Normalize when normalized, sentence_bert_config.json,
config_sentence_transformers.json; tokenizer_config.json model_max_length
set to max_seq_length), so SentenceTransformer(--out) encodes as ragforge.`,
		Example: `  ragforge export --run 20261129-171500-train-filter-ab12 --out work/filter-export
  ragforge export --retriever work/selflearn/round-1/retriever --out work/retriever-st`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExportRecorded(g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "train-filter run id (its best checkpoint is exported)")
	f.StringVar(&o.From, "from", "", "checkpoint directory to export instead of a run's")
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	o.Retriever.add(cmd)
	o.Windows.add(cmd)
	return cmd
}

// runExport writes a filter checkpoint (a train-filter run's best, or
// o.From) or, with --retriever, a bi-encoder to o.Out.
func runExport(g *globals, o exportOptions) (exportResult, error) {
	if o.Retriever.Dir != "" {
		if o.Out == "" || o.Run != "" || o.From != "" {
			return exportResult{}, fmt.Errorf("--retriever takes --out and neither --run nor --from")
		}
		for _, f := range []string{"max-seq-length", "doc-stride"} {
			if o.Windows.changed(f) {
				return exportResult{}, fmt.Errorf("--%s applies to filter exports only (a retriever's is --max-length)", f)
			}
		}
		line, err := o.Retriever.export(g, o.Out)
		return exportResult{Kind: "retriever", Source: o.Retriever.Dir, Dir: o.Out, Line: line}, err
	}
	if o.Out == "" || (o.Run == "") == (o.From == "") {
		return exportResult{}, fmt.Errorf("--out and exactly one of --run, --from or --retriever are required")
	}
	if err := o.Retriever.stray(); err != nil {
		return exportResult{}, err
	}
	src, err := modelDir(g, "from", o.From)
	if err != nil {
		return exportResult{}, err
	}
	if o.Run != "" {
		st, err := openStore(g)
		if err != nil {
			return exportResult{}, err
		}
		d, err := st.Get(o.Run)
		st.Close()
		if err != nil {
			return exportResult{}, err
		}
		if d.Kind != "train-filter" {
			return exportResult{}, fmt.Errorf("run %s is a %s run; export takes a train-filter run", d.ID, d.Kind)
		}
		var cfg struct {
			Config filtertrain.Config `json:"config"`
		}
		if err := jsonUnmarshal(d.Config, &cfg); err != nil {
			return exportResult{}, fmt.Errorf("run %s: config: %w", d.ID, err)
		}
		src = filepath.Join(cfg.Config.OutputDir, "best")
	}
	if err := o.Windows.resolve([]string{src}, g.Err); err != nil {
		return exportResult{}, err
	}
	w := o.Windows.set()
	if err := filtertrain.ExportAt(src, o.Out, &w); err != nil {
		return exportResult{}, err
	}
	res := exportResult{Kind: "filter", Source: src, Dir: o.Out, Windows: &w,
		Line: fmt.Sprintf("exported %s to %s (windows: %d tokens sharing %d, %s)", src, o.Out, w.MaxSeqLength, w.DocStride, o.Windows.Sources.MaxSeqLength)}
	if c, err := t5.LoadConfig(o.Out); err == nil {
		if _, marked := c.Extra(filter.MatchMarksKey); marked {
			fmt.Fprintf(g.Err, "note: %s reads match-marked evidence (%s in config.json); mark inputs before tokenizing them outside ragforge (docs/recipes.md)\n", o.Out, filter.MatchMarksKey)
		}
	}
	return res, nil
}
