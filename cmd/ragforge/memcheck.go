package main

import (
	"fmt"
	"io"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/memory"
	"github.com/ragforge/ragforge/train/retriever"
)

// filterDecoderTokens is the RAG² filter's decoder length: [label, </s>].
const filterDecoderTokens = 2

// checkFilterMemory prints the memory estimate of `train filter` with c to
// w and refuses, before any data is read, a step over the available memory
// (memory.Available), naming a --batch-size/--grad-accum (same effective
// batch) or --max-seq-length that fits (with c's --gradient-checkpointing),
// or --gradient-checkpointing.
func checkFilterMemory(w io.Writer, c filtertrain.Config) error {
	mc, err := t5.LoadConfig(c.ModelDir)
	if err != nil {
		return err
	}
	est := func(batch, length int) memory.Estimate {
		return withCheckpointing(memory.Filter(mc, batch, length, filterDecoderTokens), c.GradientCheckpointing)
	}
	e := est(c.BatchSize, c.MaxSeqLength)
	fmt.Fprintln(w, e)
	avail, src, err := memory.Available()
	if err != nil {
		return err
	}
	eff := c.BatchSize * c.GradAccumulation
	var opts []memory.Option
	for b := c.BatchSize / 2; b >= 1; b /= 2 {
		opts = append(opts, memory.Option{
			Flags:    fmt.Sprintf("--batch-size %d --grad-accum %d", b, (eff+b-1)/b),
			Estimate: est(b, c.MaxSeqLength),
		})
	}
	for l := c.MaxSeqLength / 2; l >= 64; l /= 2 {
		opts = append(opts, memory.Option{
			Flags:    fmt.Sprintf("--batch-size 1 --grad-accum %d --max-seq-length %d", eff, l),
			Estimate: est(1, l),
		})
	}
	if err := memory.Check(e, avail, src, opts); err != nil {
		return fmt.Errorf("train filter: %w", err)
	}
	return nil
}

// checkRetrieverMemory is checkFilterMemory for the InfoNCE training of the
// bi-encoder in dir at maxLength tokens with GradCache passes of subBatch
// padded tokens (0: retriever.DefaultSubBatchTokens; the batch size does not
// matter), suggesting --gradient-checkpointing, a --sub-batch-tokens, then a
// --max-length, that fits; ckpt: the training checkpoints its blocks.
func checkRetrieverMemory(w io.Writer, dir string, maxLength, subBatch int, ckpt bool) error {
	a, err := encode.Arch(dir)
	if err != nil {
		return err
	}
	mc, err := bert.LoadConfigFor(dir, a)
	if err != nil {
		return err
	}
	if subBatch <= 0 {
		subBatch = retriever.DefaultSubBatchTokens
	}
	bucket := func(l int) int { return bert.BucketLength(min(l, a.MaxLength(mc)), a.MaxLength(mc)) }
	est := func(tokens, l int) memory.Estimate {
		return withCheckpointing(memory.Retriever(mc, a.ModelType, tokens, bucket(l)), ckpt)
	}
	pass := func(l int) memory.Estimate { return est(subBatch, l) }
	e := pass(maxLength)
	fmt.Fprintln(w, e)
	avail, src, err := memory.Available()
	if err != nil {
		return err
	}
	var opts []memory.Option
	for t := subBatch / 2; t >= bucket(maxLength); t /= 2 { // down to one row per pass
		opts = append(opts, memory.Option{Flags: fmt.Sprintf("--sub-batch-tokens %d", t),
			Estimate: est(t, maxLength)})
	}
	for l := maxLength / 2; l >= 32; l /= 2 {
		opts = append(opts, memory.Option{Flags: fmt.Sprintf("--max-length %d", l), Estimate: pass(l)})
	}
	if err := memory.Check(e, avail, src, opts); err != nil {
		return fmt.Errorf("retriever training: %w", err)
	}
	return nil
}

// withCheckpointing is e, checkpointed when on (--gradient-checkpointing).
func withCheckpointing(e memory.Estimate, on bool) memory.Estimate {
	if on {
		return e.WithCheckpointing()
	}
	return e
}
