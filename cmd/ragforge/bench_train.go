package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ragforge/ragforge/train/memory"
	"github.com/ragforge/ragforge/train/trainbench"
)

// benchTrainOptions are the flags of `bench train`: trainbench.Options,
// whose shape-dependent defaults apply to the flags not given.
type benchTrainOptions struct {
	trainbench.Options
	flags *pflag.FlagSet
}

func newBenchTrainCmd(g *globals) *cobra.Command {
	var o benchTrainOptions
	cmd := &cobra.Command{
		Use:   "train",
		Short: "One training step (forward, backward, AdamW) of flan-t5-large, bge-large or bge-m3 at random init: seconds per step and peak RSS",
		Long: `Builds the shape at random init (no download) and runs two training steps on
random tokens: the first compiles, the second is timed. Defaults are issue 34's
settings: flan-t5-large, the RAG² filter step at batch 4 × 512 input / 2 target
tokens; bge-large and bge-m3, the SL-HyDE InfoNCE step (GradCache) at 4 queries
× (1 positive + 7 hard negatives) × 512 tokens. Prints the train/memory
estimate first and refuses a step over the available memory
($RAGFORGE_MEMORY_LIMIT or MemAvailable). Peak RSS is ru_maxrss of this
process. scripts/torch_train_bench.py runs the same step in PyTorch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.flags = cmd.Flags()
			return runBenchTrain(g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Shape, "shape", "", "model shape: "+strings.Join(trainbench.Shapes, ", ")+" (required)")
	f.BoolVar(&o.GradientCheckpointing, "gradient-checkpointing", false, "recompute each transformer block in the backward pass (HF gradient_checkpointing)")
	f.IntVar(&o.Batch, "batch", 0, "flan-t5-large: windows; bge-*: queries (default 4)")
	f.IntVar(&o.Seq, "seq", 0, "tokens per text (default 512)")
	f.IntVar(&o.TargetTokens, "target-tokens", 0, "flan-t5-large: decoder tokens (default 2: label, </s>)")
	f.IntVar(&o.Negatives, "negatives", 0, "bge-*: hard negatives per query (default 7)")
	f.IntVar(&o.SubBatchTokens, "sub-batch-tokens", 0, "bge-*: padded tokens per GradCache encoder pass (0: the trainer's 4096)")
	f.IntVar(&o.Layers, "layers", 0, "override the layer count (flan-t5-large: encoder and decoder each; 0: the shape's)")
	f.IntVar(&o.Hidden, "hidden", 0, "override d_model / hidden_size (0: 1024)")
	f.IntVar(&o.Heads, "heads", 0, "override the attention heads (0: 16)")
	f.IntVar(&o.FFN, "ffn", 0, "override d_ff / intermediate_size (0: the shape's)")
	f.IntVar(&o.Vocab, "vocab", 0, "override the vocabulary size (0: the shape's)")
	return cmd
}

// resolve starts from the shape's defaults and applies the flags given.
func (o benchTrainOptions) resolve(backendName string) trainbench.Options {
	r := trainbench.DefaultOptions(o.Shape)
	r.GradientCheckpointing, r.SubBatchTokens = o.GradientCheckpointing, o.SubBatchTokens
	r.Layers, r.Hidden, r.Heads, r.FFN, r.Vocab, r.Backend = o.Layers, o.Hidden, o.Heads, o.FFN, o.Vocab, backendName
	changed := func(name string) bool { return o.flags != nil && o.flags.Changed(name) }
	if changed("batch") {
		r.Batch = o.Batch
	}
	if changed("seq") {
		r.Seq = o.Seq
	}
	if changed("target-tokens") {
		r.TargetTokens = o.TargetTokens
	}
	if changed("negatives") {
		r.Negatives = o.Negatives
	}
	return r
}

func runBenchTrain(g *globals, o benchTrainOptions) error {
	opts := o.resolve(g.Backend)
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("bench train: %w", err)
	}
	e := opts.Estimate()
	fmt.Fprintf(g.Err, "bench train %s: %s\n", opts.Shape, e)
	avail, src, err := memory.Available()
	if err != nil {
		return err
	}
	if err := memory.Check(e, avail, src, nil); err != nil {
		return fmt.Errorf("bench train %s: %w", opts.Shape, err)
	}
	res, err := trainbench.Run(opts)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, struct {
			trainbench.Result
			Threads int `json:"threads"`
		}{res, runtime.GOMAXPROCS(0)})
	}
	_, err = fmt.Fprintf(g.Out, "shape=%s gradient_checkpointing=%t step=%s params=%d seconds_per_step=%.3f compile_seconds=%.3f peak_rss_mib=%.0f estimate_peak_mib=%.0f threads=%d\n",
		res.Shape, res.GradientCheckpointing, res.Step, res.Params, res.SecondsPerStep, res.CompileSeconds,
		float64(res.PeakRSS)/(1<<20), float64(e.Peak())/(1<<20), runtime.GOMAXPROCS(0))
	return err
}
