package filter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/data/runs"
	mfilter "github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/trainer"
)

// ArgsFile holds the Config of the run inside each checkpoint.
const ArgsFile = "training_args.json"

// Progress is reported after every update ("train"), every
// Config.LoggingSteps updates ("log"), after every validation ("eval") and
// checkpoint ("checkpoint").
type Progress struct {
	Phase         string
	Epoch, Epochs int     // Epoch is 1-based
	EpochFrac     float64 // epochs done, fractional (HF "epoch"); "train", "log", "eval"
	Step, Steps   int     // updates done / planned
	// Loss is this update's loss ("train") or the mean over the updates
	// since the previous "log" (HF logging); LearningRate and GradNorm are
	// the last update's (GradNorm before clipping).
	Loss          float64
	LearningRate  float64
	GradNorm      float64
	TokensPerSec  float64 // real (unpadded) encoder tokens per second: this update ("train"), since the last log ("log")
	WindowsPerSec float64
	ValidAccuracy float64            // "eval" only
	Valid         map[string]float64 // "eval" only: every validation metric (EvalReport.Metrics)
	Checkpoint    string             // "checkpoint" only
	// SkippedNonFinite counts the updates skipped so far (Config.SkipNonFinite).
	SkippedNonFinite int
}

// Result summarises a training run.
type Result struct {
	OutputDir      string
	ResumedFrom    string // checkpoint the run continued from, "" for a fresh start
	GlobalStep     int
	TotalSteps     int
	FinalLoss      float64 // loss of the last update
	LastCheckpoint string
	BestCheckpoint string  // by validation accuracy; the last checkpoint without validation data
	BestAccuracy   float64 // -1 without validation data
	StopReason     string  // "completed", "max_steps", "early_stopping"
	TrainExamples  int
	TrainWindows   int
	// SkippedNonFinite is the number of updates skipped because their loss
	// or gradient was not finite (Config.SkipNonFinite; resumed runs included).
	SkippedNonFinite int
	History          []trainer.LogEntry
}

// Train fine-tunes the T5 checkpoint cfg.ModelDir as a RAG² filter on train
// and validates on valid (may be empty) at every checkpoint. Checkpoints go
// to cfg.OutputDir/checkpoint-<step>/ (HF layout: config.json,
// model.safetensors, tokenizer files with the added tokens; plus
// optimizer.safetensors, trainer_state.json and training_args.json), each
// written atomically; cfg.OutputDir/best links to the best one.
//
// Data order: each epoch shuffles the windows with a permutation seeded by
// (cfg.Seed, epoch), so a resumed run sees the same batches. Dropout uses the
// model context's RNG, seeded with cfg.Seed and saved in every checkpoint.
// With cfg.Resume the newest complete checkpoint is restored and training
// continues after its last update; the result matches an uninterrupted run.
//
// run (may be nil) receives per-update series train/loss,
// train/learning_rate, train/grad_norm, train/tokens_per_second and
// train/windows_per_second, validation metrics valid/* at their step,
// train/skipped_nonfinite at the end, and checkpoint artifacts. A skipped
// non-finite update (Config.SkipNonFinite) logs no series point; its data
// still counts as consumed. On resume the run's metrics after the
// checkpoint's step are deleted first, so a run resumed under the same id
// has one row per step.
// Cancelling ctx stops before the next update without writing anything (as a
// kill would). Errors: invalid cfg, no training examples, an OutputDir that
// already holds checkpoints without cfg.Resume, a checkpoint made with other
// data or settings, load/compute/write failures.
func Train(ctx context.Context, cfg Config, train, valid []mfilter.Example, run *runs.Run, progress func(Progress)) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(train) == 0 {
		return nil, fmt.Errorf("train filter: training set: %w", mfilter.ErrEmpty)
	}
	latest, err := CheckOutputDir(cfg)
	if err != nil {
		return nil, err
	}
	src := cfg.ModelDir
	if latest != "" {
		src = latest
	}
	lm, err := loadForTraining(cfg.Backend, src, cfg.Seed, cfg.Dropout, cfg.predictor())
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	wins, err := Windows(lm.Tokenizer, train, cfg.MaxSeqLength, cfg.DocStride)
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	target := make([]int, len(wins))
	for i, w := range wins {
		target[i] = lm.NotHelpful
		if train[w.Example].Answer == mfilter.Helpful {
			target[i] = lm.Helpful
		}
	}
	B, A := cfg.BatchSize, cfg.GradAccumulation
	numMicro := (len(wins) + B - 1) / B
	perEpoch := (numMicro + A - 1) / A
	total := cfg.Epochs * perEpoch
	if cfg.MaxSteps > 0 {
		total = cfg.MaxSteps
	}
	epochs := (total + perEpoch - 1) / perEpoch
	tr, err := trainer.New(lm.Model.Backend, lm.Model.Ctx, lm.lossFn, cfg.optim(total))
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	st := trainer.State{Seed: cfg.Seed, DataHash: dataHash(train), ConfigHash: configHash(cfg), BestMetric: -1}
	res := &Result{OutputDir: cfg.OutputDir, TotalSteps: total, TrainExamples: len(train), TrainWindows: len(wins), BestAccuracy: -1}
	if latest != "" {
		old, err := trainer.ReadState(latest)
		if err != nil {
			return nil, fmt.Errorf("train filter: resume: %w", err)
		}
		if old.DataHash != st.DataHash {
			return nil, fmt.Errorf("train filter: resume %s: training data differ from the run's (data_hash %s, now %s)", latest, old.DataHash, st.DataHash)
		}
		if old.ConfigHash != st.ConfigHash {
			return nil, fmt.Errorf("train filter: resume %s: settings differ from the run's (see its %s)", latest, ArgsFile)
		}
		if err := tr.LoadState(filepath.Join(latest, trainer.OptimizerFile)); err != nil {
			return nil, fmt.Errorf("train filter: resume: %w", err)
		}
		if tr.GlobalStep() != old.GlobalStep {
			return nil, fmt.Errorf("train filter: resume %s: optimizer step %d, trainer_state.json global_step %d", latest, tr.GlobalStep(), old.GlobalStep)
		}
		st = old
		res.ResumedFrom, res.LastCheckpoint = latest, latest
		if run != nil {
			// The run goes on from the checkpoint: what was logged after it was lost work.
			if err := run.TruncateMetrics(st.GlobalStep); err != nil {
				return nil, fmt.Errorf("train filter: resume: %w", err)
			}
		}
	} else if err := lm.Model.Ctx.SetRNGStateFromSeed(cfg.Seed); err != nil {
		return nil, fmt.Errorf("train filter: seed: %w", err)
	}
	report := func(p Progress) {
		if progress != nil {
			p.Epochs, p.Steps = epochs, total
			progress(p)
		}
	}
	// unsaved: data consumed since the last checkpoint (updates, or skipped
	// non-finite ones, which move the data position but not the step).
	unsaved := false
	// HF-style logging: means over the updates since the last log line.
	var logLoss, logSecs float64
	var logN, logTokens, logRows int
	lastEpoch := float64(st.Epoch)
	checkpoint := func(epochDone bool) (stop bool, err error) {
		step := tr.GlobalStep()
		improved := false
		if len(valid) > 0 {
			r, err := evaluate(lm.Predictor, valid, 0.5, nil)
			if err != nil {
				return false, fmt.Errorf("validation at step %d: %w", step, err)
			}
			if run != nil {
				if err := run.LogMetrics(r.Metrics("valid/"), step); err != nil {
					return false, err
				}
			}
			st.LogHistory = append(st.LogHistory, trainer.LogEntry{Step: step, Epoch: float64(st.Epoch), EvalAccuracy: r.Accuracy})
			report(Progress{Phase: "eval", Epoch: st.Epoch + 1, EpochFrac: lastEpoch, Step: step, ValidAccuracy: r.Accuracy,
				Valid: r.Metrics(""), SkippedNonFinite: tr.SkippedNonFinite()})
			if r.Accuracy > st.BestMetric {
				st.BestMetric, improved, st.EvalsWithoutImprovement = r.Accuracy, true, 0
			} else {
				st.EvalsWithoutImprovement++
			}
		} else {
			improved = true
		}
		if epochDone {
			st.Epoch, st.BatchInEpoch = st.Epoch+1, 0
		}
		name := trainer.CheckpointName(step)
		if improved {
			st.BestModelCheckpoint = name
		}
		dir, err := trainer.WriteCheckpoint(cfg.OutputDir, step, func(dir string) error {
			if err := lm.Model.Save(dir); err != nil {
				return err
			}
			if err := lm.Tokenizer.Save(dir); err != nil {
				return err
			}
			if err := tr.SaveState(filepath.Join(dir, trainer.OptimizerFile)); err != nil {
				return err
			}
			args, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, ArgsFile), append(args, '\n'), 0o644); err != nil {
				return err
			}
			return trainer.WriteState(dir, st)
		})
		if err != nil {
			return false, err
		}
		if improved {
			if err := trainer.SetBest(cfg.OutputDir, name); err != nil {
				return false, err
			}
		}
		if run != nil {
			if err := run.Artifact("checkpoint", filepath.Join(dir, "model.safetensors")); err != nil {
				return false, err
			}
		}
		unsaved, res.LastCheckpoint = false, dir
		report(Progress{Phase: "checkpoint", Epoch: st.Epoch, Step: step, Checkpoint: dir})
		return cfg.EarlyStoppingPatience > 0 && st.EvalsWithoutImprovement >= cfg.EarlyStoppingPatience, nil
	}

	res.StopReason = "completed"
loop:
	for st.Epoch < epochs {
		if tr.GlobalStep() >= total {
			res.StopReason = "max_steps"
			break
		}
		perm := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(st.Epoch))).Perm(len(wins))
		for g := st.BatchInEpoch / A; g < perEpoch; g++ {
			if err := ctx.Err(); err != nil {
				res.GlobalStep = tr.GlobalStep()
				return res, fmt.Errorf("train filter: stopped at step %d: %w", tr.GlobalStep(), err)
			}
			var micro [][]*tensors.Tensor
			tokens, rows := 0, 0
			for mb := g * A; mb < min((g+1)*A, numMicro); mb++ {
				idx := perm[mb*B : min((mb+1)*B, len(perm))]
				ids := make([][]int, len(idx))
				labels := make([]int, len(idx))
				for k, i := range idx {
					ids[k], labels[k] = wins[i].IDs, target[i]
					tokens += len(wins[i].IDs)
				}
				rows += len(idx)
				idT, maskT := mfilter.EncoderBatch(ids, B, lm.Model.Config.PadTokenID)
				decT, labT := lm.targetBatch(labels, B)
				micro = append(micro, []*tensors.Tensor{idT, maskT, decT, labT})
			}
			t0 := time.Now()
			sr, err := tr.Step(micro)
			if err != nil {
				return res, fmt.Errorf("train filter: epoch %d: %w", st.Epoch+1, err)
			}
			secs := time.Since(t0).Seconds()
			unsaved = true
			st.GlobalStep, st.BatchInEpoch = sr.Step, min((g+1)*A, numMicro)
			ep := float64(st.Epoch) + float64(g+1)/float64(perEpoch)
			lastEpoch = ep
			if !sr.Skipped {
				res.GlobalStep, res.FinalLoss = sr.Step, sr.Loss
				st.LogHistory = append(st.LogHistory, trainer.LogEntry{Step: sr.Step, Epoch: ep, Loss: sr.Loss, LearningRate: sr.LearningRate, GradNorm: sr.GradNorm})
				if run != nil {
					if err := run.LogMetrics(map[string]float64{"train/loss": sr.Loss, "train/learning_rate": sr.LearningRate,
						"train/grad_norm": sr.GradNorm, "train/tokens_per_second": float64(tokens) / secs,
						"train/windows_per_second": float64(rows) / secs}, sr.Step); err != nil {
						return res, fmt.Errorf("train filter: %w", err)
					}
				}
				report(Progress{Phase: "train", Epoch: st.Epoch + 1, EpochFrac: ep, Step: sr.Step, Loss: sr.Loss, LearningRate: sr.LearningRate,
					GradNorm: sr.GradNorm, TokensPerSec: float64(tokens) / secs, WindowsPerSec: float64(rows) / secs,
					SkippedNonFinite: tr.SkippedNonFinite()})
				logLoss, logN, logTokens, logRows, logSecs = logLoss+sr.Loss, logN+1, logTokens+tokens, logRows+rows, logSecs+secs
				if sr.Step%cfg.LoggingSteps == 0 {
					report(Progress{Phase: "log", Epoch: st.Epoch + 1, EpochFrac: ep, Step: sr.Step, Loss: logLoss / float64(logN),
						LearningRate: sr.LearningRate, GradNorm: sr.GradNorm, TokensPerSec: float64(logTokens) / logSecs,
						WindowsPerSec: float64(logRows) / logSecs, SkippedNonFinite: tr.SkippedNonFinite()})
					logLoss, logN, logTokens, logRows, logSecs = 0, 0, 0, 0, 0
				}
			}
			last := g == perEpoch-1
			if cfg.SaveSteps > 0 && !sr.Skipped && sr.Step%cfg.SaveSteps == 0 || cfg.SaveSteps == 0 && last {
				stop, err := checkpoint(last)
				if err != nil {
					return res, fmt.Errorf("train filter: checkpoint: %w", err)
				}
				if stop {
					res.StopReason = "early_stopping"
					break loop
				}
			} else if last {
				st.Epoch, st.BatchInEpoch = st.Epoch+1, 0
			}
			if sr.Step >= total {
				if sr.Step < epochs*perEpoch {
					res.StopReason = "max_steps"
				}
				break loop
			}
		}
	}
	if unsaved {
		if _, err := checkpoint(false); err != nil {
			return res, fmt.Errorf("train filter: checkpoint: %w", err)
		}
	}
	res.GlobalStep = tr.GlobalStep()
	res.SkippedNonFinite = tr.SkippedNonFinite()
	if run != nil {
		if err := run.LogMetrics(map[string]float64{"train/skipped_nonfinite": float64(res.SkippedNonFinite)}, res.GlobalStep); err != nil {
			return res, fmt.Errorf("train filter: %w", err)
		}
	}
	res.BestCheckpoint = filepath.Join(cfg.OutputDir, st.BestModelCheckpoint)
	res.BestAccuracy = st.BestMetric
	res.History = st.LogHistory
	return res, nil
}

// CheckOutputDir returns the newest complete checkpoint in cfg.OutputDir
// ("" when none), and an error when there is one but cfg.Resume is false
// (a fresh run must not mix with an old one's checkpoints).
func CheckOutputDir(cfg Config) (string, error) {
	latest, err := trainer.LatestCheckpoint(cfg.OutputDir)
	if err != nil {
		return "", fmt.Errorf("train filter: %w", err)
	}
	if latest != "" && !cfg.Resume {
		return "", fmt.Errorf("train filter: %s already holds checkpoints (newest %s); resume, or choose another output directory", cfg.OutputDir, filepath.Base(latest))
	}
	return latest, nil
}

// dataHash fingerprints the training examples (id, answer, instruction) in order.
func dataHash(examples []mfilter.Example) string {
	h := sha256.New()
	for _, ex := range examples {
		fmt.Fprintf(h, "%d:%s%d:%s%d:%s", len(ex.ID), ex.ID, len(ex.Answer), ex.Answer, len(ex.Question), ex.Question)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// configHash fingerprints the settings that shape the trajectory.
func configHash(c Config) string {
	fields := []any{c.MaxSeqLength, c.DocStride, c.BatchSize, c.GradAccumulation, c.Epochs, c.MaxSteps,
		c.LearningRate, c.WeightDecay, c.WarmupSteps, c.WarmupRatio, c.MaxGradNorm, c.Seed}
	if c.LRScheduler != trainer.SchedulerLinear {
		// Appended only when not the default, so checkpoints written before
		// the field existed still resume.
		fields = append(fields, c.LRScheduler)
	}
	b, _ := json.Marshal(fields)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
