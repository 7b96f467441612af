package pretrain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/train/lora"
)

// ObjectiveCausalLM names the decoders' objective in the checkpoint's record.
const ObjectiveCausalLM = "causal_lm"

// CausalLM pretrains every weight of the decoder checkpoint cfg.ModelDir
// (Llama, Qwen2, Qwen3; usually `models init` output) on texts (the corpus
// chunks; corpus names them in the record) with the causal-LM objective —
// next-token cross-entropy on every token, transformers'
// AutoModelForCausalLM loss — and writes the result to cfg.OutputDir in HF
// layout with a Record under RecordKey in config.json. A random decoder
// samples arbitrary byte-level tokens, mostly invalid UTF-8; a few epochs
// on the corpus make it write corpus-like text that a self-learning round
// can use as a generator (SL-HyDE's "from scratch" generator).
//
// Each chunk is the tokenizer's ids without specials plus eos, cut to
// MaxSeqLength tokens (eos kept); chunks of fewer than 2 tokens are
// skipped. Batches are right-padded (lora.NewBatch: every token but the
// first is a label) in a PCG(Seed, epoch) permutation; the optimisation is
// trainLoop's. NoiseDensity, MeanSpanLength and Dropout do not apply.
// Errors: invalid cfg, an OutputDir that already holds a config.json, no
// usable chunk, load/compute/write failures.
func CausalLM(ctx context.Context, cfg Config, corpus string, texts []string, run *tracker.Run, progress func(Progress)) (*Record, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, hf.ConfigName)); err == nil {
		return nil, fmt.Errorf("pretrain: %s already holds a checkpoint; choose another --out", cfg.OutputDir)
	}
	be, err := backend.New(cfg.Backend)
	if err != nil {
		return nil, err
	}
	m, err := decoder.Load(be, cfg.ModelDir)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	m.GradientCheckpointing = cfg.GradientCheckpointing
	tok, err := bpe.Load(cfg.ModelDir)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if tok.Len() > m.Config.VocabSize {
		return nil, fmt.Errorf("pretrain: %s: tokenizer has %d tokens, the model's vocab_size is %d", cfg.ModelDir, tok.Len(), m.Config.VocabSize)
	}
	maxLen := min(cfg.MaxSeqLength, m.Config.MaxPositionEmbeddings)
	eos := tok.EOSID()
	var seqs []lora.Example
	rec := &Record{Objective: ObjectiveCausalLM, Corpus: corpus, MaxSeqLength: maxLen, BatchSize: cfg.BatchSize,
		LearningRate: cfg.LearningRate, Seed: cfg.Seed}
	for _, t := range texts {
		ids := tok.Encode(t, false)
		if eos >= 0 {
			ids = append(ids[:min(len(ids), maxLen-1)], eos)
		} else if len(ids) > maxLen {
			ids = ids[:maxLen]
		}
		if len(ids) >= 2 {
			// No prompt: every token is a label; the first predicts nothing.
			seqs = append(seqs, lora.Example{Response: ids})
			rec.Tokens += len(ids)
		}
	}
	rec.Chunks = len(seqs)
	if len(seqs) == 0 {
		return nil, fmt.Errorf("pretrain: none of the %d chunks has 2 or more tokens", len(texts))
	}
	loss := func(gctx *mlctx.Context, in []*graph.Node) *graph.Node {
		return m.LossGraph(gctx, in[0], in[1], in[2], in[3])
	}
	pad := max(m.Config.PadTokenID, 0)
	err = trainLoop(ctx, cfg, m.Backend, m.Ctx, loss, len(seqs), rec, run, progress, func(_ int, idx []int) ([][]*tensors.Tensor, int, error) {
		ex := make([]lora.Example, len(idx))
		for k, i := range idx {
			ex[k] = seqs[i]
		}
		b := lora.NewBatch(ex, cfg.BatchSize, pad)
		return [][]*tensors.Tensor{b.Inputs(1)[:4]}, b.Tokens, nil
	})
	if err != nil {
		return nil, err
	}
	if err := save(m, tok, cfg.OutputDir, rec); err != nil {
		return nil, err
	}
	return rec, nil
}
