package filtertrain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/filter"
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
func Train(ctx context.Context, cfg Config, train, valid []filter.Example, run *tracker.Run, progress func(Progress)) (*Result, error) {
	r, err := newTrainRun(cfg, train, valid, run, progress)
	if err != nil {
		return nil, err
	}
	if err := r.loop(ctx); err != nil {
		return r.res, err
	}
	return r.finish()
}

// trainRun is one Train call: the model and its windows, the step plan, the
// trainer and the state saved in every checkpoint.
type trainRun struct {
	cfg          Config
	train, valid []filter.Example
	run          *tracker.Run
	progress     func(Progress)

	lm     *labeled
	wins   []Window
	target []int // label token id of each window
	tr     *trainer.Trainer
	// numMicro micro-batches of cfg.BatchSize windows make an epoch of
	// perEpoch updates; total updates over epochs epochs.
	numMicro, perEpoch, total, epochs int

	st  trainer.State
	res *Result
	// unsaved: data consumed since the last checkpoint (updates, or skipped
	// non-finite ones, which move the data position but not the step).
	unsaved   bool
	lastEpoch float64
	log       logWindow
}

// logWindow sums the updates since the last "log" report (HF-style
// logging: means over the updates since the previous log line).
type logWindow struct {
	loss, secs      float64
	n, tokens, rows int
}

// newTrainRun validates cfg, loads the model (from the newest checkpoint
// when resuming), cuts the windows, plans the steps and restores the state
// of a resumed run.
func newTrainRun(cfg Config, train, valid []filter.Example, run *tracker.Run, progress func(Progress)) (*trainRun, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(train) == 0 {
		return nil, fmt.Errorf("train filter: training set: %w", filter.ErrEmpty)
	}
	latest, err := CheckOutputDir(cfg)
	if err != nil {
		return nil, err
	}
	src := cfg.ModelDir
	if latest != "" {
		src = latest
	}
	marks, err := cfg.matchMarks(train)
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	lm, err := loadForTraining(cfg.Backend, src, cfg.Seed, cfg.Dropout, marks, cfg.predictor())
	if err == nil {
		lm.Model.GradientCheckpointing = cfg.GradientCheckpointing
	}
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	lm.smoothing = cfg.LabelSmoothing
	wins, err := Windows(lm.Predictor, train)
	if err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	r := &trainRun{cfg: cfg, train: train, valid: valid, run: run, progress: progress, lm: lm, wins: wins}
	r.target = make([]int, len(wins))
	for i, w := range wins {
		r.target[i] = lm.NotHelpful
		if train[w.Example].Answer == filter.Helpful {
			r.target[i] = lm.Helpful
		}
	}
	B, A := cfg.BatchSize, cfg.GradAccumulation
	r.numMicro = (len(wins) + B - 1) / B
	r.perEpoch = (r.numMicro + A - 1) / A
	r.total = cfg.Epochs * r.perEpoch
	if cfg.MaxSteps > 0 {
		r.total = cfg.MaxSteps
	}
	r.epochs = (r.total + r.perEpoch - 1) / r.perEpoch
	if r.tr, err = trainer.New(lm.Model.Backend, lm.Model.Ctx, lm.lossFn, cfg.optim(r.total)); err != nil {
		return nil, fmt.Errorf("train filter: %w", err)
	}
	r.st = trainer.State{Seed: cfg.Seed, DataHash: dataHash(train), ConfigHash: configHash(cfg), BestMetric: -1}
	r.res = &Result{OutputDir: cfg.OutputDir, TotalSteps: r.total, TrainExamples: len(train), TrainWindows: len(wins), BestAccuracy: -1}
	if latest == "" {
		if err := lm.Model.Ctx.SetRNGStateFromSeed(cfg.Seed); err != nil {
			return nil, fmt.Errorf("train filter: seed: %w", err)
		}
	} else if err := r.resume(latest); err != nil {
		return nil, err
	}
	r.lastEpoch = float64(r.st.Epoch)
	return r, nil
}

// resume restores the trainer and state of checkpoint latest, after
// checking that it was made with the same data and settings.
func (r *trainRun) resume(latest string) error {
	old, err := r.tr.Resume(latest, r.st, ArgsFile)
	if err != nil {
		return fmt.Errorf("train filter: resume %w", err)
	}
	r.st = old
	r.res.ResumedFrom, r.res.LastCheckpoint = latest, latest
	if r.run != nil {
		// The run goes on from the checkpoint: what was logged after it was lost work.
		if err := r.run.TruncateMetrics(r.st.GlobalStep); err != nil {
			return fmt.Errorf("train filter: resume: %w", err)
		}
	}
	return nil
}

func (r *trainRun) report(p Progress) {
	if r.progress != nil {
		p.Epochs, p.Steps = r.epochs, r.total
		r.progress(p)
	}
}

// loop runs the updates until the planned steps are done or early stopping
// ends the run, setting res.StopReason. Each epoch shuffles the windows with
// a permutation seeded by (cfg.Seed, epoch); ctx is checked before each
// update.
func (r *trainRun) loop(ctx context.Context) error {
	r.res.StopReason = "completed"
	for r.st.Epoch < r.epochs {
		if r.tr.GlobalStep() >= r.total {
			r.res.StopReason = "max_steps"
			return nil
		}
		perm := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(r.st.Epoch))).Perm(len(r.wins))
		for g := r.st.BatchInEpoch / r.cfg.GradAccumulation; g < r.perEpoch; g++ {
			if err := ctx.Err(); err != nil {
				r.res.GlobalStep = r.tr.GlobalStep()
				return fmt.Errorf("train filter: stopped at step %d: %w", r.tr.GlobalStep(), err)
			}
			stop, err := r.update(g, perm)
			if err != nil || stop {
				return err
			}
		}
	}
	return nil
}

// update runs update g of the epoch (micro-batches g·A … (g+1)·A−1 of perm),
// logs it and writes the checkpoints due after it; stop is true when the
// run ends here (max steps, early stopping).
func (r *trainRun) update(g int, perm []int) (stop bool, err error) {
	micro, tokens, rows := r.microBatches(g, perm)
	t0 := time.Now()
	sr, err := r.tr.Step(micro)
	if err != nil {
		return false, fmt.Errorf("train filter: epoch %d: %w", r.st.Epoch+1, err)
	}
	secs := time.Since(t0).Seconds()
	r.unsaved = true
	r.st.GlobalStep, r.st.BatchInEpoch = sr.Step, min((g+1)*r.cfg.GradAccumulation, r.numMicro)
	ep := float64(r.st.Epoch) + float64(g+1)/float64(r.perEpoch)
	r.lastEpoch = ep
	if !sr.Skipped {
		if err := r.logUpdate(sr, ep, tokens, rows, secs); err != nil {
			return false, err
		}
	}
	last := g == r.perEpoch-1
	if r.cfg.SaveSteps > 0 && !sr.Skipped && sr.Step%r.cfg.SaveSteps == 0 || r.cfg.SaveSteps == 0 && last {
		stop, err := r.checkpoint(last)
		if err != nil {
			return false, fmt.Errorf("train filter: checkpoint: %w", err)
		}
		if stop {
			r.res.StopReason = "early_stopping"
			return true, nil
		}
	} else if last {
		r.st.Epoch, r.st.BatchInEpoch = r.st.Epoch+1, 0
	}
	if sr.Step >= r.total {
		if sr.Step < r.epochs*r.perEpoch {
			r.res.StopReason = "max_steps"
		}
		return true, nil
	}
	return false, nil
}

// microBatches packs update g's micro-batches of perm as trainer inputs
// (ids, mask, decoder ids, labels), each padded to cfg.BatchSize rows, and
// counts their real tokens and rows.
func (r *trainRun) microBatches(g int, perm []int) (micro [][]*tensors.Tensor, tokens, rows int) {
	B, A := r.cfg.BatchSize, r.cfg.GradAccumulation
	for mb := g * A; mb < min((g+1)*A, r.numMicro); mb++ {
		idx := perm[mb*B : min((mb+1)*B, len(perm))]
		ids := make([][]int, len(idx))
		labels := make([]int, len(idx))
		for k, i := range idx {
			ids[k], labels[k] = r.wins[i].IDs, r.target[i]
			tokens += len(r.wins[i].IDs)
		}
		rows += len(idx)
		idT, maskT := filter.EncoderBatch(ids, B, r.lm.Model.Config.PadTokenID)
		decT, labT := r.lm.targetBatch(labels, B)
		micro = append(micro, []*tensors.Tensor{idT, maskT, decT, labT})
	}
	return micro, tokens, rows
}

// logUpdate records a taken update: result fields, the state's history,
// the run's train/* series and the "train" and (every LoggingSteps) "log"
// reports.
func (r *trainRun) logUpdate(sr trainer.StepResult, ep float64, tokens, rows int, secs float64) error {
	r.res.GlobalStep, r.res.FinalLoss = sr.Step, sr.Loss
	r.st.LogHistory = append(r.st.LogHistory, trainer.LogEntry{Step: sr.Step, Epoch: ep, Loss: sr.Loss, LearningRate: sr.LearningRate, GradNorm: sr.GradNorm})
	if r.run != nil {
		if err := r.run.LogMetrics(map[string]float64{"train/loss": sr.Loss, "train/learning_rate": sr.LearningRate,
			"train/grad_norm": sr.GradNorm, "train/tokens_per_second": float64(tokens) / secs,
			"train/windows_per_second": float64(rows) / secs}, sr.Step); err != nil {
			return fmt.Errorf("train filter: %w", err)
		}
	}
	r.report(Progress{Phase: "train", Epoch: r.st.Epoch + 1, EpochFrac: ep, Step: sr.Step, Loss: sr.Loss, LearningRate: sr.LearningRate,
		GradNorm: sr.GradNorm, TokensPerSec: float64(tokens) / secs, WindowsPerSec: float64(rows) / secs,
		SkippedNonFinite: r.tr.SkippedNonFinite()})
	l := &r.log
	l.loss, l.n, l.tokens, l.rows, l.secs = l.loss+sr.Loss, l.n+1, l.tokens+tokens, l.rows+rows, l.secs+secs
	if sr.Step%r.cfg.LoggingSteps == 0 {
		r.report(Progress{Phase: "log", Epoch: r.st.Epoch + 1, EpochFrac: ep, Step: sr.Step, Loss: l.loss / float64(l.n),
			LearningRate: sr.LearningRate, GradNorm: sr.GradNorm, TokensPerSec: float64(l.tokens) / l.secs,
			WindowsPerSec: float64(l.rows) / l.secs, SkippedNonFinite: r.tr.SkippedNonFinite()})
		*l = logWindow{}
	}
	return nil
}

// checkpoint validates (when there is validation data), then writes
// checkpoint-<step> and moves the best link when it improved; stop is true
// when early stopping's patience has run out. epochDone marks the epoch
// finished in the saved state.
func (r *trainRun) checkpoint(epochDone bool) (stop bool, err error) {
	step := r.tr.GlobalStep()
	improved := true
	if len(r.valid) > 0 {
		if improved, err = r.validate(step); err != nil {
			return false, err
		}
	}
	if epochDone {
		r.st.Epoch, r.st.BatchInEpoch = r.st.Epoch+1, 0
	}
	name := trainer.CheckpointName(step)
	if improved {
		r.st.BestModelCheckpoint = name
	}
	dir, err := trainer.WriteCheckpoint(r.cfg.OutputDir, step, r.save)
	if err != nil {
		return false, err
	}
	if improved {
		if err := trainer.SetBest(r.cfg.OutputDir, name); err != nil {
			return false, err
		}
	}
	if r.run != nil {
		if err := r.run.Artifact("checkpoint", filepath.Join(dir, "model.safetensors")); err != nil {
			return false, err
		}
	}
	r.unsaved, r.res.LastCheckpoint = false, dir
	r.report(Progress{Phase: "checkpoint", Epoch: r.st.Epoch, Step: step, Checkpoint: dir})
	return r.cfg.EarlyStoppingPatience > 0 && r.st.EvalsWithoutImprovement >= r.cfg.EarlyStoppingPatience, nil
}

// validate evaluates the model on the validation set at step (threshold
// 0.5), logs valid/* and reports "eval"; improved is true when the accuracy
// beats the best so far.
func (r *trainRun) validate(step int) (improved bool, err error) {
	ev, err := evaluate(r.lm.Predictor, r.valid, 0.5, nil)
	if err != nil {
		return false, fmt.Errorf("validation at step %d: %w", step, err)
	}
	if r.run != nil {
		if err := r.run.LogMetrics(ev.Metrics("valid/"), step); err != nil {
			return false, err
		}
	}
	r.st.LogHistory = append(r.st.LogHistory, trainer.LogEntry{Step: step, Epoch: float64(r.st.Epoch), EvalAccuracy: ev.Accuracy})
	r.report(Progress{Phase: "eval", Epoch: r.st.Epoch + 1, EpochFrac: r.lastEpoch, Step: step, ValidAccuracy: ev.Accuracy,
		Valid: ev.Metrics(""), SkippedNonFinite: r.tr.SkippedNonFinite()})
	if ev.Accuracy > r.st.BestMetric {
		r.st.BestMetric, r.st.EvalsWithoutImprovement = ev.Accuracy, 0
		return true, nil
	}
	r.st.EvalsWithoutImprovement++
	return false, nil
}

// save writes the checkpoint files into dir: model, tokenizer, optimizer
// state, training_args.json and trainer_state.json.
func (r *trainRun) save(dir string) error {
	if err := r.lm.Model.Save(dir); err != nil {
		return err
	}
	if err := r.lm.Tokenizer.Save(dir); err != nil {
		return err
	}
	if err := r.tr.SaveState(filepath.Join(dir, trainer.OptimizerFile)); err != nil {
		return err
	}
	args, err := json.MarshalIndent(r.cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ArgsFile), append(args, '\n'), 0o644); err != nil {
		return err
	}
	return trainer.WriteState(dir, r.st)
}

// finish writes the last checkpoint when data was consumed after the
// previous one, logs train/skipped_nonfinite and fills the result.
func (r *trainRun) finish() (*Result, error) {
	res := r.res
	if r.unsaved {
		if _, err := r.checkpoint(false); err != nil {
			return res, fmt.Errorf("train filter: checkpoint: %w", err)
		}
	}
	res.GlobalStep = r.tr.GlobalStep()
	res.SkippedNonFinite = r.tr.SkippedNonFinite()
	if r.run != nil {
		if err := r.run.LogMetrics(map[string]float64{"train/skipped_nonfinite": float64(res.SkippedNonFinite)}, res.GlobalStep); err != nil {
			return res, fmt.Errorf("train filter: %w", err)
		}
	}
	res.BestCheckpoint = filepath.Join(r.cfg.OutputDir, r.st.BestModelCheckpoint)
	res.BestAccuracy = r.st.BestMetric
	res.History = r.st.LogHistory
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
func dataHash(examples []filter.Example) string {
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
	if c.LabelSmoothing != 0 {
		fields = append(fields, "label_smoothing", c.LabelSmoothing) // likewise
	}
	if c.MatchMarks {
		fields = append(fields, "match_marks") // likewise
	}
	if len(c.MatchMarksRare) > 0 {
		fields = append(fields, "match_marks_rare", c.MatchMarksRare) // likewise
	}
	b, _ := json.Marshal(fields)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
