package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/train/pretrain"
	"github.com/ragforge/ragforge/train/trainer"
)

// pretrainOptions are the flags of `pretrain`.
type pretrainOptions struct {
	Config pretrain.Config
	Corpus corpusFlags
}

const pretrainLong = `Self-supervised pretraining of a T5 or decoder checkpoint (usually ` + "`models init`" + `
output) on the corpus's own chunks, with T5's span corruption (Raffel et al.
2020, §3.1.4; HF run_t5_mlm_flax.py): in each chunk --noise-density of the
tokens, in spans of mean length --mean-noise-span-length, are replaced by
the sentinels <extra_id_0>, <extra_id_1>, … and the model learns to write
each sentinel followed by the span it hides, then </s>. Fresh masks are
drawn every time a chunk is seen. No weights are downloaded.

The output (HF layout) keeps the tokenizer with every added token (e.g.
[HELPFUL]/[NOT_HELPFUL] from ` + "`models init --add-tokens`" + `) and the
"ragforge_random_init" mark, so ` + "`train filter --recipe auto`" + ` still picks the
scratch recipe; config.json records the run under "ragforge_pretrain"
(objective, corpus, chunks, steps, losses). Measurements: docs/recipes.md.

A decoder (config.json model_type llama, qwen2 or qwen3, e.g. from
` + "`models init --arch qwen2`" + `) is pretrained with the causal-LM objective instead
(next-token cross-entropy on each chunk's tokens plus eos; the span flags
and --dropout do not apply): a random decoder writes random bytes, mostly
invalid UTF-8, and this gives a self-learning round a generator that writes
text.`

func newPretrainCmd(g *globals) *cobra.Command {
	o := pretrainOptions{Config: pretrain.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Pretrain a T5 (span corruption) or decoder (causal LM) checkpoint on the corpus (no downloaded weights)",
		Long:  pretrainLong,
		Example: `  ragforge pretrain --model work/t5-tiny --corpus data/corpus.jsonl --out work/t5-tiny-pt --epochs 20
  ragforge pretrain --model work/qwen2-tiny --corpus data/corpus.jsonl --out work/qwen2-tiny-pt --max-seq-length 128 --batch-size 8 --epochs 30 --lr 1e-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPretrain(cmdContext(cmd), g, o) },
	}
	c := &o.Config
	f := cmd.Flags()
	f.StringVar(&c.ModelDir, "model", "", "starting T5 or decoder (llama, qwen2, qwen3) checkpoint directory (required)")
	o.Corpus.add(cmd)
	f.StringVar(&c.OutputDir, "out", "", "output checkpoint directory, must not hold one yet (required)")
	f.Float64Var(&c.NoiseDensity, "noise-density", c.NoiseDensity, "fraction of each chunk's tokens corrupted (T5 §3.3.4)")
	f.Float64Var(&c.MeanSpanLength, "mean-noise-span-length", c.MeanSpanLength, "mean length of a corrupted span in tokens (T5 §3.3.4)")
	f.IntVar(&c.MaxSeqLength, "max-seq-length", c.MaxSeqLength, "tokens kept of each chunk before corruption")
	f.IntVar(&c.BatchSize, "batch-size", c.BatchSize, "chunks per update")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "passes over the chunks")
	f.IntVar(&c.MaxSteps, "max-steps", c.MaxSteps, "stop after this many updates (0: --epochs decide)")
	f.DurationVar(&c.MaxTime, "max-time", c.MaxTime, "stop after the update that passes this wall time, e.g. 30s (0: no limit)")
	f.Float64Var(&c.LearningRate, "lr", c.LearningRate, "AdamW peak learning rate")
	f.Float64Var(&c.WarmupRatio, "warmup-ratio", c.WarmupRatio, "linear warmup as a fraction of the planned updates")
	f.StringVar(&c.Scheduler, "lr-scheduler", c.Scheduler, "learning-rate schedule after warmup: linear, cosine or constant (T5's inverse square root is constant over its first 10⁴ steps)")
	f.Float64Var(&c.WeightDecay, "weight-decay", c.WeightDecay, "AdamW weight decay")
	f.Float64Var(&c.MaxGradNorm, "max-grad-norm", c.MaxGradNorm, "gradient clipping norm (0: none)")
	f.Float64Var(&c.Dropout, "dropout", c.Dropout, "dropout while pretraining (T5 v1.1: 0; < 0: the checkpoint's dropout_rate)")
	f.Int64Var(&c.Seed, "seed", c.Seed, "seed for data order, noise masks and dropout")
	f.IntVar(&c.LoggingSteps, "logging-steps", c.LoggingSteps, "print the mean loss to stderr every N updates")
	f.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", false, "recompute each transformer block in the backward pass instead of keeping its activations (HF gradient_checkpointing): the same gradients, less memory, about one more forward pass per step")
	minInt(f, 1, "max-seq-length", "batch-size", "epochs", "logging-steps")
	minInt(f, 0, "max-steps")
	return cmd
}

func runPretrain(ctx context.Context, g *globals, o pretrainOptions) (err error) {
	c := o.Config
	c.Backend = g.Backend
	if c.ModelDir == "" || c.OutputDir == "" || o.Corpus.Path == "" {
		return fmt.Errorf("--model, --corpus and --out are required")
	}
	if !trainer.ValidScheduler(c.Scheduler) {
		return fmt.Errorf("--lr-scheduler %q: want one of %s", c.Scheduler, strings.Join(trainer.Schedulers, ", "))
	}
	if c.MaxTime < 0 {
		return fmt.Errorf("--max-time %s: want >= 0 (0: no limit)", c.MaxTime)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	_, chunks, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	corpus := pretrain.Corpus{Name: o.Corpus.Path, Texts: make([]string, len(chunks)), Desc: &o.Corpus}
	for i, ch := range chunks {
		corpus.Texts[i] = ch.Text
	}
	if !data.IsEncodedSpec(corpus.Name) { // recorded in config.json: absolute, as run artifacts are
		if abs, aerr := filepath.Abs(corpus.Name); aerr == nil {
			corpus.Name = abs
		}
	}
	r, start := startRunOf(g)
	defer r.finish(&err)
	var bar *progress.Bar
	rep, err := pretrain.Run(ctx, c, corpus, barOnStart(start, &bar, g.Err, -1, "pretrain"), func(p pretrain.Progress) {
		switch p.Phase {
		case "train":
			bar.Describe(fmt.Sprintf("epoch %d loss %.4f lr %.2e %.0f tok/s", p.Epoch, p.Loss, p.LearningRate, p.TokensPerSec))
			bar.Set(p.Step, p.Steps)
		case "log":
			bar.Println(g.Err, fmt.Sprintf("{'loss': %.4f, 'grad_norm': %.4g, 'learning_rate': %.4g, 'epoch': %d, 'step': %d}", p.Loss, p.GradNorm, p.LearningRate, p.Epoch, p.Step))
		}
	})
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rep)
	}
	rec := rep.Pretrain
	fmt.Fprintf(g.Out, "run %s: %d steps (%s) on %d chunks (%d tokens), %s loss %.4f → %.4f\nwrote %s\n",
		rep.RunID, rec.Steps, rec.StopReason, rec.Chunks, rec.Tokens, rep.Objective, rec.FirstLoss, rec.FinalLoss, c.OutputDir)
	return nil
}
