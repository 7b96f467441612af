// Package trainbench runs one training step (forward, backward, AdamW
// update) of the papers' real model shapes at random init, for `ragforge
// bench train` and its PyTorch peer (scripts/torch_train_bench.py): the
// RAG² filter step of flan-t5-large and the SL-HyDE InfoNCE step of
// bge-large and bge-m3, with or without per-block gradient checkpointing,
// reporting seconds per step and peak RSS beside the train/memory estimate.
package trainbench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/xlmr"
	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/memory"
	"github.com/ragforge/ragforge/train/retriever"
)

// Shapes are the names Options.Shape takes: google/flan-t5-large (RAG²'s
// largest filter), BAAI/bge-large-en-v1.5 (SL-HyDE's retriever) and
// BAAI/bge-m3 (XLM-RoBERTa).
var Shapes = []string{"flan-t5-large", "bge-large", "bge-m3"}

// Options is one step. DefaultOptions gives issue 34's settings: the
// filter step at batch 4 × 512 input / 2 target tokens ([label, </s>]);
// the InfoNCE step at 4 queries × (1 positive + 7 hard negatives) × 512
// tokens with GradCache passes of retriever.DefaultSubBatchTokens.
type Options struct {
	Shape                 string
	GradientCheckpointing bool
	Batch                 int // filter: windows; retriever: queries
	Seq                   int // tokens per text (filter: encoder input)
	TargetTokens          int // filter: decoder tokens
	Negatives             int // retriever: hard negatives per query
	SubBatchTokens        int // retriever: padded tokens per GradCache pass (0: the trainer's default)
	// Overrides of the real shape (0 keeps it), to try the step small:
	// layers (T5: encoder and decoder each), hidden size, heads, FFN
	// size (d_ff / intermediate_size), vocabulary.
	Layers, Hidden, Heads, FFN, Vocab int
	Backend                           string // models/backend name ("" = default)
}

// DefaultOptions is the step for shape.
func DefaultOptions(shape string) Options {
	o := Options{Shape: shape, Batch: 4, Seq: 512}
	if shape == "flan-t5-large" {
		o.TargetTokens = 2
	} else {
		o.Negatives = 7
	}
	return o
}

// Result is one measured step.
type Result struct {
	Shape                 string          `json:"shape"`
	GradientCheckpointing bool            `json:"gradient_checkpointing"`
	Step                  string          `json:"step"` // e.g. "4×512/2" or "4×(1+7)×512"
	Params                int64           `json:"params"`
	CompileSeconds        float64         `json:"compile_seconds"`  // the first step: graph compilation and one run
	SecondsPerStep        float64         `json:"seconds_per_step"` // the second step, timed alone
	PeakRSS               int64           `json:"peak_rss_bytes"`   // ru_maxrss after both steps
	Estimate              memory.Estimate `json:"memory_estimate"`
}

// Validate checks o once; errors name the `bench train` flag of the field.
func (o Options) Validate() error {
	t5 := o.Shape == "flan-t5-large"
	switch {
	case !slices.Contains(Shapes, o.Shape):
		return fmt.Errorf("--shape %q: want one of %s", o.Shape, strings.Join(Shapes, ", "))
	case o.Batch < 1:
		return fmt.Errorf("--batch %d: must be at least 1", o.Batch)
	case o.Seq < 2:
		return fmt.Errorf("--seq %d: must be at least 2", o.Seq)
	case t5 && o.TargetTokens < 1:
		return fmt.Errorf("--target-tokens %d: must be at least 1", o.TargetTokens)
	case t5 && (o.Negatives != 0 || o.SubBatchTokens != 0):
		return fmt.Errorf("--negatives and --sub-batch-tokens apply to bge-large and bge-m3, not %s", o.Shape)
	case !t5 && o.TargetTokens != 0:
		return fmt.Errorf("--target-tokens applies to flan-t5-large, not %s", o.Shape)
	case o.Negatives < 0:
		return fmt.Errorf("--negatives %d: must be at least 0", o.Negatives)
	}
	for _, f := range []struct {
		flag string
		v    int
	}{{"--sub-batch-tokens", o.SubBatchTokens}, {"--layers", o.Layers}, {"--hidden", o.Hidden}, {"--heads", o.Heads}, {"--ffn", o.FFN}, {"--vocab", o.Vocab}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d: must be at least 0 (0: the shape's)", f.flag, f.v)
		}
	}
	if o.hidden()%o.heads() != 0 {
		return fmt.Errorf("--hidden %d is not a multiple of --heads %d", o.hidden(), o.heads())
	}
	return nil
}

func (o Options) hidden() int { return or(o.Hidden, 1024) } // all three shapes: 1024
func (o Options) heads() int  { return or(o.Heads, 16) }    // all three shapes: 16

func or(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// T5 is flan-t5-large with o's overrides (d_kv = hidden / heads).
func (o Options) T5() t5.Config {
	c := t5.LargeConfig()
	c.NumLayers, c.NumDecoderLayers = or(o.Layers, c.NumLayers), or(o.Layers, c.NumDecoderLayers)
	c.DModel, c.NumHeads = o.hidden(), o.heads()
	c.DKV = c.DModel / c.NumHeads
	c.DFF, c.VocabSize = or(o.FFN, c.DFF), or(o.Vocab, c.VocabSize)
	return c
}

// Encoder is bge-large (BERT) or bge-m3 (XLM-R) with o's overrides.
func (o Options) Encoder() (bert.Config, bert.Arch) {
	c, a := bert.LargeConfig(30522), bert.BERT
	if o.Shape == "bge-m3" {
		c, a = xlmr.BGEM3Config(), xlmr.Arch
	}
	c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads = or(o.Layers, c.NumHiddenLayers), o.hidden(), o.heads()
	c.IntermediateSize, c.VocabSize = or(o.FFN, c.IntermediateSize), or(o.Vocab, c.VocabSize)
	return c, a
}

func (o Options) subBatch() int { return or(o.SubBatchTokens, retriever.DefaultSubBatchTokens) }

// Estimate is train/memory's estimate of the step.
func (o Options) Estimate() memory.Estimate {
	var e memory.Estimate
	if o.Shape == "flan-t5-large" {
		e = memory.Filter(o.T5(), o.Batch, o.Seq, o.TargetTokens)
	} else {
		c, a := o.Encoder()
		e = memory.Retriever(c, a.ModelType, o.subBatch(), o.Seq)
	}
	if o.GradientCheckpointing {
		e = e.WithCheckpointing()
	}
	return e
}

// Run builds the model at random init and runs two steps: the first
// compiles, the second is timed. Errors: invalid options, a step that
// fails.
func Run(o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("bench train: %w", err)
	}
	e := o.Estimate()
	r := Result{Shape: o.Shape, GradientCheckpointing: o.GradientCheckpointing, Params: e.Params, Estimate: e}
	if o.Shape == "flan-t5-large" {
		r.Step = fmt.Sprintf("%d×%d/%d", o.Batch, o.Seq, o.TargetTokens)
		s := filtertrain.BenchShape{Batch: o.Batch, EncLen: o.Seq, DecLen: o.TargetTokens, GradientCheckpointing: o.GradientCheckpointing, SkipScoring: true}
		res, err := filtertrain.BenchStep(o.Backend, o.T5(), s, 1)
		if err != nil {
			return r, fmt.Errorf("bench train %s: %w", o.Shape, err)
		}
		r.CompileSeconds, r.SecondsPerStep = res.CompileMs/1e3, res.MsPerStepMedian/1e3
	} else {
		r.Step = fmt.Sprintf("%d×(1+%d)×%d", o.Batch, o.Negatives, o.Seq)
		c, a := o.Encoder()
		s := retriever.BenchShape{Queries: o.Batch, Negatives: o.Negatives, Length: o.Seq, SubBatchTokens: o.subBatch(),
			SkipEncode: true, GradientCheckpointing: o.GradientCheckpointing}
		res, err := retriever.BenchTrainStep(o.Backend, c, a, s, 1)
		if err != nil {
			return r, fmt.Errorf("bench train %s: %w", o.Shape, err)
		}
		r.CompileSeconds, r.SecondsPerStep = res.CompileMs/1e3, res.MsPerStepMedian/1e3
	}
	r.PeakRSS = memory.PeakRSS()
	return r, nil
}
