package pretrain

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/train/trainer"
)

// ObjectiveSpanCorruption names T5's objective in the checkpoint's record.
const ObjectiveSpanCorruption = "t5_span_corruption"

// RecordKey is the config.json key describing the pretraining a checkpoint
// went through (Record). The checkpoint keeps "ragforge_random_init": a few
// minutes on one corpus leave it far from a real pretrained model, so
// `--recipe auto` still picks the scratch recipe for it.
const RecordKey = "ragforge_pretrain"

// Config sets a span-corruption run. DefaultConfig gives the defaults.
type Config struct {
	ModelDir  string `json:"model"`
	OutputDir string `json:"out"`
	Backend   string `json:"backend"`
	// NoiseDensity and MeanSpanLength: T5 §3.3.4 (15%, 3), DefaultNoiseDensity.
	NoiseDensity   float64 `json:"noise_density"`
	MeanSpanLength float64 `json:"mean_noise_span_length"`
	// MaxSeqLength is the tokens kept of each chunk before corruption (the
	// filter's window, 512; T5 pretrains on 512-token inputs, §3.1.2).
	MaxSeqLength int `json:"max_seq_length"`
	BatchSize    int `json:"batch_size"` // chunks per update
	Epochs       int `json:"epochs"`     // passes over the chunks (MaxSteps > 0 overrides)
	MaxSteps     int `json:"max_steps"`  // 0: Epochs decide
	// MaxTime stops after the update that passes it (0: no limit); the
	// schedule is still planned over the steps Epochs/MaxSteps give.
	MaxTime      time.Duration `json:"max_time"`
	LearningRate float64       `json:"learning_rate"`
	WarmupRatio  float64       `json:"warmup_ratio"`
	Scheduler    string        `json:"lr_scheduler"`
	WeightDecay  float64       `json:"weight_decay"`
	MaxGradNorm  float64       `json:"max_grad_norm"`
	// Dropout while pretraining (T5 v1.1 turned it off in pre-training);
	// < 0 keeps the checkpoint's. The saved config keeps its dropout_rate.
	Dropout      float64 `json:"dropout"`
	Seed         int64   `json:"seed"` // data order, noise masks, dropout
	LoggingSteps int     `json:"logging_steps"`
	// GradientCheckpointing recomputes each transformer block in the
	// backward pass instead of keeping its activations (HF
	// TrainingArguments.gradient_checkpointing, off by default): the same
	// gradients for about one more forward pass, with activation memory of
	// the block inputs plus one block (models/remat, train/memory).
	GradientCheckpointing bool `json:"gradient_checkpointing,omitempty"`
}

// DefaultConfig: T5's span corruption (15%, mean span 3, §3.3.4), 512
// tokens, batch 16 (RAG²'s filter batch), 1 epoch; AdamW at lr 3e-3 (the
// filter's scratch recipe; of 3e-4, 1e-3 and 3e-3 it reached the lowest
// span-corruption loss in 60 updates on the demo's sample, docs/recipes.md)
// with 10% warmup, then constant (T5's inverse square-root schedule is
// constant over its first 10⁴ steps, §3.1.2); no weight decay, clipping at
// 1.0 (HF Trainer), dropout 0 (T5 v1.1 pretrained without dropout).
func DefaultConfig() Config {
	return Config{
		NoiseDensity: DefaultNoiseDensity, MeanSpanLength: DefaultMeanSpanLength,
		MaxSeqLength: 512, BatchSize: 16, Epochs: 1, LearningRate: 3e-3, WarmupRatio: 0.1,
		Scheduler: trainer.SchedulerConstant, MaxGradNorm: 1, Dropout: 0, Seed: 42, LoggingSteps: 10,
	}
}

// Validate checks every field; errors name it.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("pretrain config: field %q: %v, want %s", field, v, want)
	}
	switch {
	case c.ModelDir == "":
		return bad("model", `""`, "a T5 checkpoint directory")
	case c.OutputDir == "":
		return bad("out", `""`, "an output directory")
	case filepath.Clean(c.ModelDir) == filepath.Clean(c.OutputDir):
		return bad("out", c.OutputDir, "a directory other than the starting checkpoint")
	case !(c.NoiseDensity > 0 && c.NoiseDensity < 1):
		return bad("noise_density", c.NoiseDensity, "in (0,1)")
	case !(c.MeanSpanLength >= 1) || math.IsInf(c.MeanSpanLength, 0):
		return bad("mean_noise_span_length", c.MeanSpanLength, ">= 1")
	case c.MaxSeqLength < 2:
		return bad("max_seq_length", c.MaxSeqLength, ">= 2")
	case c.BatchSize < 1:
		return bad("batch_size", c.BatchSize, ">= 1")
	case c.Epochs < 1:
		return bad("epochs", c.Epochs, ">= 1")
	case c.MaxSteps < 0:
		return bad("max_steps", c.MaxSteps, ">= 0 (0: epochs decide)")
	case c.MaxTime < 0:
		return bad("max_time", c.MaxTime, ">= 0 (0: no limit)")
	case c.Dropout >= 1:
		return bad("dropout", c.Dropout, "< 1 (< 0: the checkpoint's)")
	case c.LoggingSteps < 1:
		return bad("logging_steps", c.LoggingSteps, ">= 1")
	}
	return c.optim(1).Validate()
}

func (c Config) optim(total int) trainer.Config {
	tc := trainer.DefaultConfig()
	tc.LearningRate, tc.WarmupRatio, tc.Scheduler = c.LearningRate, c.WarmupRatio, c.Scheduler
	tc.WeightDecay, tc.MaxGradNorm, tc.TotalSteps = c.WeightDecay, c.MaxGradNorm, total
	return tc
}

// Progress is reported after every update ("train") and, every
// LoggingSteps updates, with the mean loss since the last report ("log").
type Progress struct {
	Phase        string
	Step, Steps  int
	Epoch        int // 1-based
	Loss         float64
	LearningRate float64
	GradNorm     float64
	TokensPerSec float64 // real (unpadded) input+target tokens per second
}

// Record is what RecordKey holds in the output config.json.
type Record struct {
	Objective      string  `json:"objective"`
	Corpus         string  `json:"corpus"`
	Chunks         int     `json:"chunks"`
	Tokens         int     `json:"tokens"` // tokens of the chunks after truncation, before corruption
	Steps          int     `json:"steps"`
	StopReason     string  `json:"stop_reason"` // "completed", "max_steps", "max_time"
	NoiseDensity   float64 `json:"noise_density"`
	MeanSpanLength float64 `json:"mean_noise_span_length"`
	MaxSeqLength   int     `json:"max_seq_length"`
	BatchSize      int     `json:"batch_size"`
	LearningRate   float64 `json:"learning_rate"`
	Seed           int64   `json:"seed"`
	FirstLoss      float64 `json:"first_loss"`
	FinalLoss      float64 `json:"final_loss"` // mean loss of the last LoggingSteps updates
}

// SpanCorruptT5 pretrains the T5 checkpoint cfg.ModelDir on texts (the
// corpus chunks; corpus names them in the record) with T5's span
// corruption and writes the result to cfg.OutputDir in HF layout (config,
// weights, generation config, tokenizer with every added token, e.g. the
// filter's [HELPFUL]/[NOT_HELPFUL]), with a Record under RecordKey in
// config.json.
//
// Each chunk is tokenized without </s> and cut to MaxSeqLength tokens; each
// time it is drawn it gets a fresh NoiseMask and SpanCorrupt with the
// tokenizer's <extra_id_K> sentinels, and the model is trained with the HF
// T5 loss on (input, target) by trainer (AdamW, the schedule, clipping).
// Chunks of fewer than 2 tokens are skipped. Batches are a PCG(Seed, epoch)
// permutation; masks come from PCG(Seed, step). run (may be nil) receives
// the series train/loss, train/learning_rate, train/grad_norm per update.
// Cancelling ctx stops before the next update with ctx.Err() and writes
// nothing. Errors: invalid cfg, an OutputDir that already holds a
// config.json, a tokenizer without <extra_id_0>, no usable chunk, a chunk
// with more spans than sentinels, load/compute/write failures.
func SpanCorruptT5(ctx context.Context, cfg Config, corpus string, texts []string, run *tracker.Run, progress func(Progress)) (*Record, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, t5.ConfigFile)); err == nil {
		return nil, fmt.Errorf("pretrain: %s already holds a checkpoint; choose another --out", cfg.OutputDir)
	}
	m, tok, err := loadT5(cfg)
	if err != nil {
		return nil, err
	}
	sentinels := sentinelIDs(tok)
	if len(sentinels) == 0 {
		return nil, fmt.Errorf("pretrain: %s: tokenizer has no <extra_id_0> sentinel (span corruption needs T5's sentinels)", cfg.ModelDir)
	}
	rec := &Record{Objective: ObjectiveSpanCorruption, Corpus: corpus, NoiseDensity: cfg.NoiseDensity,
		MeanSpanLength: cfg.MeanSpanLength, MaxSeqLength: cfg.MaxSeqLength, BatchSize: cfg.BatchSize,
		LearningRate: cfg.LearningRate, Seed: cfg.Seed}
	seqs := encodeChunks(tok, texts, cfg.MaxSeqLength)
	rec.Chunks = len(seqs)
	for _, ids := range seqs {
		rec.Tokens += len(ids)
	}
	if len(seqs) == 0 {
		return nil, fmt.Errorf("pretrain: none of the %d chunks has 2 or more tokens", len(texts))
	}
	loss := func(gctx *mlctx.Context, in []*graph.Node) *graph.Node {
		return t5.LossGraph(m.LogitsGraph(gctx, in[0], in[1], in[2]), in[3])
	}
	savedDropout := m.Config.DropoutRate
	if cfg.Dropout >= 0 {
		m.Config.DropoutRate = cfg.Dropout
	}
	eos := tok.EOSID()
	err = trainLoop(ctx, cfg, m.Backend, m.Ctx, loss, len(seqs), rec, run, progress, func(step int, idx []int) ([][]*tensors.Tensor, int, error) {
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(step)+1<<32))
		in, tgt, tokens, err := corruptBatch(cfg, seqs, idx, sentinels, eos, rng)
		if err != nil {
			return nil, 0, err
		}
		return [][]*tensors.Tensor{m.Config.TrainBatch(in, tgt, cfg.BatchSize)}, tokens, nil
	})
	if err != nil {
		return nil, err
	}
	m.Config.DropoutRate = savedDropout
	if err := save(m, tok, cfg.OutputDir, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// trainLoop runs the updates of a pretraining run over n sequences:
// batches of cfg.BatchSize are a PCG(Seed, epoch) permutation, batch(step,
// idx) builds the trainer inputs of the sequences idx (and counts their
// tokens), trainer optimises loss on them (AdamW, the schedule, clipping).
// It fills rec's steps, stop reason and losses, logs to run (may be nil)
// and reports progress. Cancelling ctx stops before the next update with
// ctx.Err().
func trainLoop(ctx context.Context, cfg Config, be backends.Backend, mctx *mlctx.Context, loss trainer.LossFn, n int,
	rec *Record, run *tracker.Run, progress func(Progress), batch func(step int, idx []int) ([][]*tensors.Tensor, int, error)) error {
	B := cfg.BatchSize
	perEpoch := (n + B - 1) / B
	total := cfg.Epochs * perEpoch
	if cfg.MaxSteps > 0 {
		total = cfg.MaxSteps
	}
	tr, err := trainer.New(be, mctx, loss, cfg.optim(total))
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := mctx.SetRNGStateFromSeed(cfg.Seed); err != nil {
		return fmt.Errorf("pretrain: seed: %w", err)
	}
	start := time.Now()
	rec.StopReason = "completed"
	if cfg.MaxSteps > 0 {
		rec.StopReason = "max_steps"
	}
	var logLoss float64
	var logN int
	var perm []int
	for step := 0; step < total; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cfg.MaxTime > 0 && time.Since(start) >= cfg.MaxTime {
			rec.StopReason = "max_time"
			break
		}
		epoch, b := step/perEpoch, step%perEpoch
		if b == 0 {
			perm = rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(epoch))).Perm(n)
		}
		in, tokens, err := batch(step, perm[b*B:min((b+1)*B, len(perm))])
		if err != nil {
			return err
		}
		t0 := time.Now()
		sr, err := tr.Step(in)
		if err != nil {
			return fmt.Errorf("pretrain: update %d: %w", step+1, err)
		}
		if step == 0 {
			rec.FirstLoss = sr.Loss
		}
		rec.Steps = sr.Step
		logLoss += sr.Loss
		logN++
		if run != nil {
			if err := run.LogMetrics(map[string]float64{"train/loss": sr.Loss, "train/learning_rate": sr.LearningRate, "train/grad_norm": sr.GradNorm}, sr.Step); err != nil {
				return fmt.Errorf("pretrain: %w", err)
			}
		}
		p := Progress{Phase: "train", Step: sr.Step, Steps: total, Epoch: epoch + 1, Loss: sr.Loss, LearningRate: sr.LearningRate,
			GradNorm: sr.GradNorm, TokensPerSec: float64(tokens) / max(time.Since(t0).Seconds(), 1e-9)}
		if progress != nil {
			progress(p)
		}
		if sr.Step%cfg.LoggingSteps == 0 || sr.Step == total {
			rec.FinalLoss = logLoss / float64(logN)
			p.Phase, p.Loss = "log", rec.FinalLoss
			logLoss, logN = 0, 0
			if progress != nil {
				progress(p)
			}
		}
	}
	if logN > 0 {
		rec.FinalLoss = logLoss / float64(logN)
	}
	return nil
}

// save writes the checkpoint to a temporary sibling of dir and renames it
// into place, so dir never holds half a checkpoint.
func save(m interface{ Save(dir string) error }, tok tokenizer.Tokenizer, dir string, rec *Record) error {
	err := atomicfile.Dir(dir, false, func(tmp string) error {
		if err := m.Save(tmp); err != nil {
			return err
		}
		if err := tok.Save(tmp); err != nil {
			return fmt.Errorf("save tokenizer: %w", err)
		}
		if err := hf.AddConfigKey(tmp, RecordKey, rec); err != nil {
			return fmt.Errorf("%w (pretraining an already pretrained checkpoint again is not supported)", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	return nil
}

// sentinelIDs returns the ids of <extra_id_0>, <extra_id_1>, ... up to the
// first one the tokenizer lacks (T5's sentinels, Raffel et al. 2020 §3.1.4).
func sentinelIDs(tok tokenizer.Tokenizer) []int {
	var ids []int
	for k := 0; ; k++ {
		id, ok := tok.TokenToID(fmt.Sprintf("<extra_id_%d>", k))
		if !ok {
			return ids
		}
		ids = append(ids, id)
	}
}

// encodeChunks tokenizes each text without </s>, truncated to maxLen tokens;
// texts of fewer than 2 tokens are dropped (span corruption needs a kept and
// a noise token).
func encodeChunks(tok tokenizer.Tokenizer, texts []string, maxLen int) [][]int {
	var seqs [][]int
	for _, t := range texts {
		ids := tok.Encode(t, false)
		if len(ids) > maxLen {
			ids = ids[:maxLen]
		}
		if len(ids) >= 2 {
			seqs = append(seqs, ids)
		}
	}
	return seqs
}

// corruptBatch span-corrupts the chunks seqs[idx] with fresh noise from rng:
// the encoder inputs, the targets and their total token count.
func corruptBatch(cfg Config, seqs [][]int, idx, sentinels []int, eos int, rng *rand.Rand) (in, tgt [][]int, tokens int, err error) {
	in, tgt = make([][]int, len(idx)), make([][]int, len(idx))
	for r, i := range idx {
		noise := NoiseMask(len(seqs[i]), cfg.NoiseDensity, cfg.MeanSpanLength, rng)
		if in[r], tgt[r], err = SpanCorrupt(seqs[i], noise, sentinels, eos); err != nil {
			return nil, nil, 0, fmt.Errorf("pretrain: chunk %d: %w (lower --max-seq-length)", i, err)
		}
		tokens += len(in[r]) + len(tgt[r])
	}
	return in, tgt, tokens, nil
}

// loadT5 loads the checkpoint and tokenizer of cfg.ModelDir on cfg.Backend;
// a tokenizer with more tokens than the model's vocab_size is an error.
func loadT5(cfg Config) (*t5.Model, tokenizer.Tokenizer, error) {
	be, err := backend.New(cfg.Backend)
	if err != nil {
		return nil, nil, err
	}
	m, err := t5.Load(be, cfg.ModelDir)
	if err != nil {
		return nil, nil, fmt.Errorf("pretrain: %w", err)
	}
	m.GradientCheckpointing = cfg.GradientCheckpointing
	tok, err := tokenizer.Load(cfg.ModelDir)
	if err != nil {
		return nil, nil, fmt.Errorf("pretrain: %w", err)
	}
	if tok.Len() > m.Config.VocabSize {
		return nil, nil, fmt.Errorf("pretrain: %s: tokenizer has %d tokens, the model's vocab_size is %d", cfg.ModelDir, tok.Len(), m.Config.VocabSize)
	}
	return m, tok, nil
}
