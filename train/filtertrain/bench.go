package filtertrain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/train/trainer"
)

// BenchResult is the throughput of BenchTrainStep. Compilation is timed
// apart (first call of each executable) and excluded from the rates.
type BenchResult struct {
	Steps               int     `json:"steps"`
	CompileMs           float64 `json:"compile_ms"`             // first train step (compile + run) + scoring compile
	MsPerStep           float64 `json:"ms_per_step"`            // mean of the timed updates (one AdamW update on one micro-batch)
	MsPerStepMin        float64 `json:"ms_per_step_min"`        // fastest timed update
	MsPerStepMedian     float64 `json:"ms_per_step_median"`     // median timed update (the peer benchmark's figure)
	TrainTokensPerSec   float64 `json:"train_tokens_per_sec"`   // encoder tokens (batch·encLen) per second
	InferExamplesPerSec float64 `json:"infer_examples_per_sec"` // first-decoder-step label scoring
	TrainExamplesPerSec float64 `json:"train_examples_per_sec"` // rows per second in training
	BatchSize           int     `json:"batch_size"`
	EncLength           int     `json:"enc_length"`
	DecLength           int     `json:"dec_length"`
}

// BenchShape is one filter training step: Batch windows of EncLen random
// tokens and DecLen target tokens, optionally with per-block gradient
// checkpointing; SkipScoring leaves the scoring rate out (0).
type BenchShape struct {
	Batch, EncLen, DecLen int
	GradientCheckpointing bool
	SkipScoring           bool
}

// BenchTrainStep measures training and scoring speed of a randomly
// initialised T5 of shape cfg on the backend backendName (see
// models/backend.New; "" = $GOMLX_BACKEND, else pure Go): batch rows of
// encLen random tokens, decLen target tokens; one warm-up step compiles the executables, then steps updates and steps
// scoring batches are timed. Errors: invalid sizes or config, compute failures.
func BenchTrainStep(backendName string, cfg t5.Config, batch, encLen, decLen, steps int) (BenchResult, error) {
	return BenchStep(backendName, cfg, BenchShape{Batch: batch, EncLen: encLen, DecLen: decLen}, steps)
}

// BenchStep is BenchTrainStep for a BenchShape.
func BenchStep(backendName string, cfg t5.Config, s BenchShape, steps int) (BenchResult, error) {
	batch, encLen, decLen := s.Batch, s.EncLen, s.DecLen
	if batch < 1 || encLen < 1 || decLen < 1 || steps < 1 {
		return BenchResult{}, fmt.Errorf("bench train step: batch %d, encLen %d, decLen %d, steps %d must all be >= 1", batch, encLen, decLen, steps)
	}
	be, err := backend.New(backendName)
	if err != nil {
		return BenchResult{}, err
	}
	m, err := t5.NewRandom(be, cfg, 1)
	if err != nil {
		return BenchResult{}, err
	}
	m.GradientCheckpointing = s.GradientCheckpointing
	if err := m.Ctx.SetRNGStateFromSeed(1); err != nil {
		return BenchResult{}, err
	}
	lm := &labeled{Predictor: &filter.Predictor{Model: m, Helpful: cfg.VocabSize - 2, NotHelpful: cfg.VocabSize - 1, Config: filter.Config{BatchSize: batch}}}
	oc := trainer.DefaultConfig()
	oc.TotalSteps = steps + 1
	tr, err := trainer.New(be, m.Ctx, lm.lossFn, oc)
	if err != nil {
		return BenchResult{}, err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([][]int, batch)
	lab := make([][]int, batch)
	for b := range batch {
		ids[b] = make([]int, encLen)
		for j := range ids[b] {
			ids[b][j] = 2 + rng.IntN(cfg.VocabSize-2)
		}
		ids[b][encLen-1] = cfg.EOSTokenID
		lab[b] = make([]int, decLen)
		for j := range lab[b] {
			lab[b][j] = 2 + rng.IntN(cfg.VocabSize-2)
		}
	}
	idT, maskT := filter.EncoderBatch(ids, batch, cfg.PadTokenID)
	dec := t5.ShiftRight(lab, cfg.DecoderStartTokenID, cfg.PadTokenID)
	toT := func(x [][]int) *tensors.Tensor {
		v := make([]int32, 0, batch*decLen)
		for _, r := range x {
			for _, y := range r {
				v = append(v, int32(y))
			}
		}
		return tensors.FromFlatDataAndDimensions(v, batch, decLen)
	}
	in := [][]*tensors.Tensor{{idT, maskT, toT(dec), toT(lab)}}
	t0 := time.Now()
	// Training compiles on its first update, which also runs (GoMLX's
	// PreCompile would hand the variables' buffers to a graph it does not run).
	if _, err := tr.Step(in); err != nil {
		return BenchResult{}, err
	}
	if !s.SkipScoring {
		// Scoring changes no variable: compile it without running it.
		score, err := lm.Compile()
		if err != nil {
			return BenchResult{}, err
		}
		if err := catch.Do(func() {
			if err := score.PreCompile(idT, maskT); err != nil {
				panic(err)
			}
		}); err != nil {
			return BenchResult{}, fmt.Errorf("bench train step: compile scoring: %w", err)
		}
	}
	res := BenchResult{Steps: steps, BatchSize: batch, EncLength: encLen, DecLength: decLen}
	res.CompileMs = float64(time.Since(t0).Microseconds()) / 1e3
	perStep := make([]float64, steps)
	var train float64
	for i := range steps {
		t := time.Now()
		if _, err := tr.Step(in); err != nil {
			return BenchResult{}, err
		}
		perStep[i] = time.Since(t).Seconds()
		train += perStep[i]
	}
	slices.Sort(perStep)
	res.MsPerStepMin = 1e3 * perStep[0]
	res.MsPerStepMedian = 1e3 * trainer.Median(perStep)
	res.MsPerStep = 1e3 * train / float64(steps)
	res.TrainTokensPerSec = float64(batch*encLen*steps) / train
	res.TrainExamplesPerSec = float64(batch*steps) / train
	if s.SkipScoring {
		return res, nil
	}
	t0 = time.Now()
	for range steps {
		if _, err := lm.ScoreRows(context.Background(), ids, nil); err != nil {
			return BenchResult{}, err
		}
	}
	res.InferExamplesPerSec = float64(batch*steps) / time.Since(t0).Seconds()
	return res, nil
}
