package lora

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/train/trainer"
)

// ArgsFile holds the Options of the run inside each checkpoint.
const ArgsFile = "training_args.json"

// AdapterDir and MergedDir are the final outputs inside Options.OutputDir:
// the PEFT adapter folder and (Options.Merge) the merged HF checkpoint.
const (
	AdapterDir = "adapter"
	MergedDir  = "merged"
)

// Options are one training run's inputs besides the examples.
type Options struct {
	Config
	ModelDir  string // base model: HF decoder directory (llama, qwen2, qwen3)
	OutputDir string // checkpoints, adapter/ and merged/
	Backend   string `json:"-"` // GoMLX backend ("" = default)
	Resume    bool   `json:"-"` // continue from OutputDir's newest checkpoint
	Merge     bool   // also write OutputDir/merged (W + scaling·B·A)
	// BaseModelName is adapter_config.json's base_model_name_or_path
	// ("" = ModelDir).
	BaseModelName string
	// InitAdapter, when set, is a PEFT adapter folder to start from instead
	// of a fresh PEFT init (continued training; its settings must equal
	// LoRA's).
	InitAdapter string
}

// Validate checks the settings (Config.Validate) and the directories.
func (o Options) Validate() error {
	switch {
	case o.ModelDir == "":
		return fmt.Errorf("lora options: field %q: empty, want the base model directory", "ModelDir")
	case o.OutputDir == "":
		return fmt.Errorf("lora options: field %q: empty, want the output directory", "OutputDir")
	}
	return o.Config.Validate()
}

// Progress is reported after every update ("train") and checkpoint
// ("checkpoint").
type Progress struct {
	Phase        string
	Step, Steps  int     // updates done / planned
	Epoch        float64 // epochs done, fractional
	Loss         float64 // this update's loss (mean over its micro-batches)
	LearningRate float64
	GradNorm     float64 // before clipping
	TokensPerSec float64 // real (unpadded) tokens of this update per second
	Checkpoint   string  // "checkpoint" only
}

// Result summarises a run.
type Result struct {
	OutputDir, AdapterDir, MergedDir string
	ResumedFrom                      string
	GlobalStep, TotalSteps           int
	FinalLoss                        float64
	Examples, ScoredTokens           int
	TrainableParams, FrozenParams    int64
	History                          []trainer.LogEntry
}

// Train LoRA-fine-tunes the decoder at opt.ModelDir on examples (Example:
// prompt ids then response ids ending with eos) and writes
// opt.OutputDir/adapter (WriteAdapter) and, with opt.Merge,
// opt.OutputDir/merged. Only the LoRA weights are trainable: the trainer
// keeps AdamW moments for them alone. Updates take opt.GradAccumulation
// micro-batches of opt.BatchSize examples, their losses weighted so that
// the update's loss is the token mean over all of them (MicroWeights, as
// transformers' Trainer); each epoch is a PCG(Seed, epoch) permutation. Checkpoints (adapter folder, optimizer.safetensors,
// trainer_state.json, training_args.json) go to
// opt.OutputDir/checkpoint-<step> every SaveSteps updates and at the end;
// with opt.Resume the newest one is restored and the result equals an
// uninterrupted run's. run (may be nil) receives train/loss,
// train/learning_rate, train/grad_norm and train/tokens_per_second per
// update. Cancelling ctx stops before the next update. Errors: invalid
// options, no examples, checkpoints present without Resume, a checkpoint
// made with other data or settings, load/compute/write failures.
func Train(ctx context.Context, opt Options, examples []Example, run *tracker.Run, progress func(Progress)) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if len(examples) == 0 {
		return nil, fmt.Errorf("train lora: no examples")
	}
	for i, e := range examples {
		if len(e.Prompt)+len(e.Response) > opt.MaxLength {
			return nil, fmt.Errorf("train lora: example %d: %d tokens > max length %d", i, len(e.Prompt)+len(e.Response), opt.MaxLength)
		}
	}
	l, err := NormalizeLoRA(opt.LoRA)
	if err != nil {
		return nil, err
	}
	opt.LoRA = l
	latest, err := trainer.LatestCheckpoint(opt.OutputDir)
	if err != nil {
		return nil, fmt.Errorf("train lora: %w", err)
	}
	if latest != "" && !opt.Resume {
		return nil, fmt.Errorf("train lora: %s already holds checkpoints (newest %s); resume, or choose another output directory", opt.OutputDir, filepath.Base(latest))
	}
	// A resumed run reads its adapter from the checkpoint (written with the
	// same settings: configHash).
	from := opt.InitAdapter
	if latest != "" {
		from = latest
	}
	m, err := loadModel(opt.Backend, opt.ModelDir, opt.LoRA, opt.Seed, from)
	if err != nil {
		return nil, fmt.Errorf("train lora: %w", err)
	}
	m.GradientCheckpointing = opt.GradientCheckpointing
	if from != "" {
		got, err := NormalizeLoRA(*m.LoRA)
		if err != nil || !reflect.DeepEqual(got, opt.LoRA) {
			return nil, fmt.Errorf("train lora: adapter %s has r %d, lora_alpha %g, lora_dropout %g, target_modules %v (%v); the run asks for r %d, lora_alpha %g, lora_dropout %g, target_modules %v",
				from, m.LoRA.R, m.LoRA.Alpha, m.LoRA.Dropout, m.LoRA.TargetModules, err, opt.LoRA.R, opt.LoRA.Alpha, opt.LoRA.Dropout, opt.LoRA.TargetModules)
		}
	}
	B, A := opt.BatchSize, opt.GradAccumulation
	numMicro := (len(examples) + B - 1) / B
	perEpoch := (numMicro + A - 1) / A
	total := perEpoch * opt.Epochs
	tcfg := trainer.DefaultConfig()
	tcfg.LearningRate, tcfg.WarmupSteps, tcfg.TotalSteps = opt.LearningRate, opt.WarmupSteps, total
	tcfg.Scheduler, tcfg.MaxGradNorm, tcfg.WeightDecay, tcfg.GradAccumulation = trainer.SchedulerCosine, opt.MaxGradNorm, opt.WeightDecay, A
	tr, err := trainer.New(m.Backend, m.Ctx, lossFn(m), tcfg)
	if err != nil {
		return nil, fmt.Errorf("train lora: %w", err)
	}
	r := &loraRun{opt: opt, m: m, tr: tr, examples: examples, run: run, progress: progress,
		numMicro: numMicro, perEpoch: perEpoch, total: total}
	r.st = trainer.State{Seed: opt.Seed, DataHash: dataHash(examples), ConfigHash: configHash(opt), BestMetric: -1}
	r.res = &Result{OutputDir: opt.OutputDir, TotalSteps: total, Examples: len(examples)}
	r.res.TrainableParams, r.res.FrozenParams = paramCounts(m)
	for _, e := range examples {
		r.res.ScoredTokens += len(e.Response)
	}
	if latest == "" {
		if err := m.Ctx.SetRNGStateFromSeed(opt.Seed); err != nil {
			return nil, fmt.Errorf("train lora: seed: %w", err)
		}
	} else if err := r.resume(latest); err != nil {
		return nil, err
	}
	if err := r.loop(ctx); err != nil {
		return r.res, err
	}
	return r.finish()
}

// loraRun is one Train call.
type loraRun struct {
	opt                       Options
	m                         *decoder.Model
	tr                        *trainer.Trainer
	examples                  []Example
	run                       *tracker.Run
	progress                  func(Progress)
	numMicro, perEpoch, total int
	st                        trainer.State
	res                       *Result
	unsaved                   bool
}

// resume restores the adapter, optimizer state and position of checkpoint
// dir after checking it was made with the same data and settings.
func (r *loraRun) resume(dir string) error {
	old, err := r.tr.Resume(dir, r.st, ArgsFile)
	if err != nil {
		return fmt.Errorf("train lora: resume %w", err)
	}
	r.st = old
	r.res.ResumedFrom = dir
	if r.run != nil {
		if err := r.run.TruncateMetrics(r.st.GlobalStep); err != nil {
			return fmt.Errorf("train lora: resume: %w", err)
		}
	}
	return nil
}

// loop runs the planned updates; each epoch is a PCG(Seed, epoch)
// permutation of the examples.
func (r *loraRun) loop(ctx context.Context) error {
	B, A := r.opt.BatchSize, r.opt.GradAccumulation
	for r.st.Epoch < r.opt.Epochs {
		perm := rand.New(rand.NewPCG(uint64(r.opt.Seed), uint64(r.st.Epoch))).Perm(len(r.examples))
		for g := r.st.BatchInEpoch / A; g < r.perEpoch; g++ {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("train lora: stopped at step %d: %w", r.tr.GlobalStep(), err)
			}
			var batches []Batch
			tokens := 0
			for mb := g * A; mb < min((g+1)*A, r.numMicro); mb++ {
				idx := perm[mb*B : min((mb+1)*B, len(perm))]
				ex := make([]Example, len(idx))
				for k, i := range idx {
					ex[k] = r.examples[i]
				}
				b := NewBatch(ex, B, max(r.m.Config.PadTokenID, 0))
				tokens += b.Tokens
				batches = append(batches, b)
			}
			micro := make([][]*tensors.Tensor, len(batches))
			for i, w := range MicroWeights(batches) {
				micro[i] = batches[i].Inputs(w)
			}
			t0 := time.Now()
			sr, err := r.tr.Step(micro)
			if err != nil {
				return fmt.Errorf("train lora: epoch %d: %w", r.st.Epoch+1, err)
			}
			secs := time.Since(t0).Seconds()
			r.unsaved = true
			last := g == r.perEpoch-1
			r.st.GlobalStep, r.st.BatchInEpoch = sr.Step, min((g+1)*A, r.numMicro)
			if last {
				r.st.Epoch, r.st.BatchInEpoch = r.st.Epoch+1, 0
			}
			ep := float64(r.st.Epoch) + float64(r.st.BatchInEpoch)/float64(r.numMicro)
			if !sr.Skipped {
				r.res.GlobalStep, r.res.FinalLoss = sr.Step, sr.Loss
				r.st.LogHistory = append(r.st.LogHistory, trainer.LogEntry{Step: sr.Step, Epoch: ep, Loss: sr.Loss, LearningRate: sr.LearningRate, GradNorm: sr.GradNorm})
				if r.run != nil {
					if err := r.run.LogMetrics(map[string]float64{"train/loss": sr.Loss, "train/learning_rate": sr.LearningRate,
						"train/grad_norm": sr.GradNorm, "train/tokens_per_second": float64(tokens) / secs}, sr.Step); err != nil {
						return fmt.Errorf("train lora: %w", err)
					}
				}
				r.report(Progress{Phase: "train", Step: sr.Step, Epoch: ep, Loss: sr.Loss, LearningRate: sr.LearningRate,
					GradNorm: sr.GradNorm, TokensPerSec: float64(tokens) / secs})
			}
			if r.opt.SaveSteps > 0 && sr.Step%r.opt.SaveSteps == 0 {
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (r *loraRun) report(p Progress) {
	if r.progress != nil {
		p.Steps = r.total
		r.progress(p)
	}
}

// checkpoint writes checkpoint-<step>: the adapter folder, the optimizer
// state, trainer_state.json and training_args.json.
func (r *loraRun) checkpoint() error {
	step := r.tr.GlobalStep()
	dir, err := trainer.WriteCheckpoint(r.opt.OutputDir, step, func(dir string) error {
		if err := r.writeAdapter(dir); err != nil {
			return err
		}
		if err := r.tr.SaveState(filepath.Join(dir, trainer.OptimizerFile)); err != nil {
			return err
		}
		if err := hf.WriteJSON(filepath.Join(dir, ArgsFile), r.opt); err != nil {
			return err
		}
		return trainer.WriteState(dir, r.st)
	})
	if err != nil {
		return fmt.Errorf("train lora: checkpoint: %w", err)
	}
	r.unsaved = false
	r.report(Progress{Phase: "checkpoint", Step: step, Checkpoint: dir})
	return nil
}

func (r *loraRun) writeAdapter(dir string) error {
	w, mods, err := loraWeights(r.m)
	if err != nil {
		return err
	}
	base := r.opt.BaseModelName
	if base == "" {
		base = r.opt.ModelDir
	}
	return WriteAdapter(dir, r.opt.LoRA, base, mods, w)
}

// finish writes the last checkpoint, the adapter folder and the merged
// checkpoint.
func (r *loraRun) finish() (*Result, error) {
	if r.unsaved {
		if err := r.checkpoint(); err != nil {
			return r.res, err
		}
	}
	r.res.GlobalStep = r.tr.GlobalStep()
	r.res.History = r.st.LogHistory
	r.res.AdapterDir = filepath.Join(r.opt.OutputDir, AdapterDir)
	// Through a temporary sibling, so adapter/ is a complete folder or the
	// previous one.
	if err := atomicfile.Dir(r.res.AdapterDir, true, r.writeAdapter); err != nil {
		return r.res, fmt.Errorf("train lora: %w", err)
	}
	if r.opt.Merge {
		r.res.MergedDir = filepath.Join(r.opt.OutputDir, MergedDir)
		if err := os.RemoveAll(r.res.MergedDir); err != nil {
			return r.res, fmt.Errorf("train lora: %w", err)
		}
		if err := Merge(r.opt.Backend, r.opt.ModelDir, r.res.AdapterDir, r.res.MergedDir); err != nil {
			return r.res, fmt.Errorf("train lora: %w", err)
		}
	}
	return r.res, nil
}

// dataHash fingerprints the examples' ids in order.
func dataHash(examples []Example) string {
	h := sha256.New()
	for _, e := range examples {
		b, _ := json.Marshal([2][]int{e.Prompt, e.Response})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// configHash fingerprints the settings that shape the trajectory.
func configHash(o Options) string {
	c := o.Config
	c.SaveSteps = 0 // checkpoint spacing does not change the trajectory
	b, _ := json.Marshal(c)
	h := sha256.Sum256(append(append(b, o.ModelDir...), "\x00"+o.InitAdapter...))
	return hex.EncodeToString(h[:8])
}
