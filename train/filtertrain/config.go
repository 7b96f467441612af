// Package filter trains, evaluates and exports the RAG² filter (Sohn et al.,
// NAACL 2025): a Flan-T5 that reads "Given the following evidence, determine
// whether it helps answer the provided question. Evidence: … Question: …"
// and emits [HELPFUL] or [NOT_HELPFUL].
//
// It follows RAG²'s classifier/run_classifier.py (an Accelerate "no_trainer"
// loop over HF T5ForConditionalGeneration):
//   - the two label strings are added to the tokenizer (HF add_tokens) and
//     the embeddings resized to len(tokenizer) (resize_token_embeddings);
//   - the input is the stripped instruction, truncated to MaxSeqLength with
//     DocStride overflow windows (HF return_overflowing_tokens); every window
//     is a training row carrying its example's label; the target is the label
//     token followed by </s>, and the loss is HF's seq2seq cross-entropy;
//   - evaluation reads the first decoder step: P(helpful) is the softmax over
//     the logits of the two label tokens; an example's probability aggregates
//     its windows (Config.Aggregate, default the maximum P(helpful) over its
//     windows), and it is predicted [HELPFUL] when P ≥ 0.5;
//   - RAG²'s evaluation files dict_id_pred_results.json, final_eval_results.json
//     and final_eval_results_perClass.json are written by WriteRAG2Files.
//
// Optimisation, schedule, state and checkpoint layout come from train/trainer.
// The package prints nothing: progress goes through a callback.
package filtertrain

import (
	"fmt"
	"math"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/trainer"
)

// Aggregation rules of window probabilities into an example probability
// (models/filter).
const (
	AggregateMax   = filter.AggregateMax   // highest P(helpful) over the windows (default)
	AggregateMean  = filter.AggregateMean  // mean P(helpful)
	AggregateFirst = filter.AggregateFirst // the first window only (plain truncation)
)

// Config is the training configuration. DefaultConfig gives RAG²'s launch
// script values (classifier/run/run_large_train_xl_000.sh: lr 3e-5, batch 16,
// max_seq_length 512, doc_stride 128, 40 epochs, checkpoint every epoch) and
// run_classifier.py's defaults for the rest (AdamW weight decay 0, linear
// schedule, no warmup, accumulation 1, no clipping); seed 42 (HF default);
// a log line every 10 updates.
type Config struct {
	ModelDir  string `json:"model_dir"`  // starting HF T5 checkpoint (config.json, model.safetensors, tokenizer files)
	OutputDir string `json:"output_dir"` // checkpoint-<step>/, best → checkpoint-<step>

	// Windowing: tokens per window (</s> included), tokens shared by
	// consecutive windows (HF stride), window → example rule for validation.
	filter.Windowing

	BatchSize        int     `json:"batch_size"`      // windows per micro-batch (per_device_train_batch_size)
	EvalBatchSize    int     `json:"eval_batch_size"` // windows per validation batch
	GradAccumulation int     `json:"gradient_accumulation_steps"`
	Epochs           int     `json:"num_train_epochs"`
	MaxSteps         int     `json:"max_train_steps"` // > 0: stop after this many updates (overrides Epochs, HF)
	LearningRate     float64 `json:"learning_rate"`
	WeightDecay      float64 `json:"weight_decay"`
	WarmupSteps      int     `json:"num_warmup_steps"`
	WarmupRatio      float64 `json:"warmup_ratio"`
	MaxGradNorm      float64 `json:"max_grad_norm"` // 0 = no clipping (RAG²)
	// LRScheduler is the schedule after warmup (trainer.Schedulers; HF
	// lr_scheduler_type): "linear" (RAG², default), "cosine" or "constant".
	LRScheduler string `json:"lr_scheduler_type"`
	// SkipNonFinite skips (and counts, Result.SkippedNonFinite) an update
	// whose loss or gradient is not finite instead of stopping with an
	// error; such an update never changes the weights or the optimiser.
	SkipNonFinite bool  `json:"skip_nonfinite"`
	Seed          int64 `json:"seed"` // data order, dropout and label-row separation
	// LoggingSteps is how often (in updates) the mean loss, learning rate,
	// gradient norm and throughput are reported (Progress phase "log"; HF
	// TrainingArguments.logging_steps). Default 10.
	LoggingSteps int `json:"logging_steps"`
	// Dropout ≥ 0 overrides the checkpoint's dropout_rate for training (and
	// is what the saved checkpoints' config.json then holds); < 0 keeps the
	// checkpoint's value (RAG²: Flan-T5's 0.1).
	Dropout float64 `json:"dropout"`
	// LabelSmoothing in [0, 1) mixes the target with the uniform
	// distribution over the vocabulary (HF TrainingArguments
	// label_smoothing_factor, LabelSmoother); 0 (RAG², default) is plain
	// cross-entropy.
	LabelSmoothing float64 `json:"label_smoothing_factor"`
	// MatchMarks trains on evidence with the question's words marked
	// (models/filter.MatchMarks, DefaultMatchMarks) and records the marks
	// in every checkpoint's config.json, so eval, serve and export read
	// their inputs the same way. A starting checkpoint that carries marks
	// keeps them whether or not this is set. Off by default (RAG²).
	MatchMarks bool `json:"match_marks"`
	// MatchMarksRare sets the marks' RareDocFractions (models/filter
	// .MatchMarks; needs MatchMarks): a shared word gets one more mark per
	// fraction its document frequency over the training evidence is at or
	// below, the frequencies recorded with the marks. Empty by default;
	// demo-ap uses [0.05, 0.005], chosen on its training questions
	// (docs/recipes.md, "Filter: exact-match marks").
	MatchMarksRare []float64 `json:"match_marks_rare_doc_fractions,omitempty"`

	// SaveSteps > 0 writes a checkpoint every SaveSteps updates (and at the
	// end); 0 writes one at the end of every epoch (RAG² --checkpointing_steps epoch).
	SaveSteps int `json:"save_steps"`
	// EarlyStoppingPatience > 0 stops after that many consecutive
	// validations (one per checkpoint) without a higher accuracy; 0 = off.
	EarlyStoppingPatience int `json:"early_stopping_patience"`
	// Resume continues from the newest complete checkpoint in OutputDir
	// (weights, optimiser moments, RNG, data position). Without it, an
	// OutputDir that already holds checkpoints is an error (nothing is overwritten).
	Resume bool `json:"-"`

	// GradientCheckpointing recomputes each transformer block in the
	// backward pass instead of keeping its activations (HF
	// TrainingArguments.gradient_checkpointing, off by default): the same
	// gradients for about one more forward pass, with activation memory of
	// the block inputs plus one block (models/remat, train/memory).
	GradientCheckpointing bool `json:"gradient_checkpointing,omitempty"`

	Backend string `json:"-"` // GoMLX backend config ("" = pure Go, see models/backend)
}

// DefaultConfig returns the RAG² defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Windowing: filter.Windowing{MaxSeqLength: 512, DocStride: 128, Aggregate: AggregateMax},
		BatchSize: 16, EvalBatchSize: 16, GradAccumulation: 1, Epochs: 40,
		LearningRate: 3e-5, LRScheduler: trainer.SchedulerLinear, Seed: 42, LoggingSteps: 10, Dropout: -1,
	}
}

// Validate checks the configuration; errors name the field.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("filter config: field %q: %v, want %s", field, v, want)
	}
	switch {
	case c.ModelDir == "":
		return bad("ModelDir", `""`, "a T5 checkpoint directory")
	case c.OutputDir == "":
		return bad("OutputDir", `""`, "a directory")
	case c.Windowing.Check() != nil:
		return fmt.Errorf("filter config: %w", c.Windowing.Check())
	case c.BatchSize < 1:
		return bad("BatchSize", c.BatchSize, ">= 1")
	case c.EvalBatchSize < 1:
		return bad("EvalBatchSize", c.EvalBatchSize, ">= 1")
	case c.Epochs < 1:
		return bad("Epochs", c.Epochs, ">= 1")
	case c.MaxSteps < 0:
		return bad("MaxSteps", c.MaxSteps, ">= 0")
	case c.SaveSteps < 0:
		return bad("SaveSteps", c.SaveSteps, ">= 0")
	case c.EarlyStoppingPatience < 0:
		return bad("EarlyStoppingPatience", c.EarlyStoppingPatience, ">= 0")
	case c.LoggingSteps < 1:
		return bad("LoggingSteps", c.LoggingSteps, ">= 1")
	case c.Dropout >= 1:
		return bad("Dropout", c.Dropout, "in [0, 1), or < 0 for the checkpoint's")
	case c.LabelSmoothing < 0 || c.LabelSmoothing >= 1 || math.IsNaN(c.LabelSmoothing):
		return bad("LabelSmoothing", c.LabelSmoothing, "in [0, 1)")
	case len(c.MatchMarksRare) > 0 && !c.MatchMarks:
		return bad("MatchMarksRare", c.MatchMarksRare, "empty unless MatchMarks is set")
	}
	if err := filter.CheckRareDocFractions(c.MatchMarksRare); err != nil {
		return fmt.Errorf("filter config: field %q: %w", "MatchMarksRare", err)
	}
	return c.optim(1).Validate()
}

// optim maps the optimiser fields onto a trainer.Config for total updates.
func (c Config) optim(total int) trainer.Config {
	o := trainer.DefaultConfig()
	o.LearningRate, o.WeightDecay, o.MaxGradNorm = c.LearningRate, c.WeightDecay, c.MaxGradNorm
	o.WarmupSteps, o.WarmupRatio, o.TotalSteps, o.GradAccumulation = c.WarmupSteps, c.WarmupRatio, total, c.GradAccumulation
	o.Scheduler, o.SkipNonFinite = c.LRScheduler, c.SkipNonFinite
	return o
}

// markPlan is what training asks of the marks (Config.MatchMarks,
// MatchMarksRare) and the training evidence WithDocFreq counts.
type markPlan struct {
	rare     []float64
	evidence []string // set only with rare
}

// matchMarks returns the plan of the marks (nil without MatchMarks),
// with the evidence of train when MatchMarksRare needs its document
// frequencies. Errors: an instruction that is not RAG²'s, by example.
func (c Config) matchMarks(train []filter.Example) (*markPlan, error) {
	if !c.MatchMarks {
		return nil, nil
	}
	p := &markPlan{rare: c.MatchMarksRare}
	if len(p.rare) == 0 {
		return p, nil
	}
	p.evidence = make([]string, len(train))
	for i, ex := range train {
		ev, _, err := filter.ParseInstruction(strings.TrimSpace(ex.Question))
		if err != nil {
			return nil, fmt.Errorf("match marks: training example %d (id %q): field \"question\": %w", i+1, ex.ID, err)
		}
		p.evidence[i] = ev
	}
	return p, nil
}

// predictor is the models/filter configuration of validation: windows as
// in training, EvalBatchSize windows per call, c.Aggregate.
func (c Config) predictor() filter.Config {
	return filter.Config{Windowing: c.Windowing, BatchSize: c.EvalBatchSize}
}
