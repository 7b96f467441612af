package lora

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/train/trainer"
)

// BenchResult is one LoRA training-step measurement.
type BenchResult struct {
	Batch             int     `json:"batch_size"`
	SeqLen            int     `json:"seq_length"`
	CompileMs         float64 `json:"compile_ms"` // first update: compile + run
	MsPerStepMin      float64 `json:"ms_per_step_min"`
	MsPerStepMedian   float64 `json:"ms_per_step_median"`
	TokensPerSec      float64 `json:"train_tokens_per_sec"`     // Batch·SeqLen / median step
	TrainableParams   int64   `json:"trainable_params"`         // LoRA A and B
	FrozenParams      int64   `json:"frozen_params"`            // base weights
	OptimizerFloats   int64   `json:"optimizer_floats"`         // AdamW moments held by the trainer (2 × trainable when only LoRA has state)
	OptimizerOnFrozen int     `json:"optimizer_vars_on_frozen"` // trainer state variables of a frozen weight (0)
}

// BenchStep measures LoRA SFT updates (forward, backward to the LoRA
// weights, clipping, AdamW) of a randomly initialised decoder of shape cfg
// with adapter l, on batch rows of seqLen random tokens (first half prompt,
// second half scored response), on the backend backendName: one update to
// compile, then steps timed updates. Errors: invalid sizes, config or
// adapter, compute failures.
func BenchStep(backendName string, cfg decoder.Config, l decoder.LoRA, batch, seqLen, steps int) (BenchResult, error) {
	if batch < 1 || seqLen < 2 || steps < 1 {
		return BenchResult{}, fmt.Errorf("bench lora step: batch %d, seqLen %d, steps %d: want ≥ 1, ≥ 2, ≥ 1", batch, seqLen, steps)
	}
	l, err := NormalizeLoRA(l)
	if err != nil {
		return BenchResult{}, err
	}
	be, err := backend.New(backendName)
	if err != nil {
		return BenchResult{}, err
	}
	m, err := decoder.NewRandom(be, cfg, 1)
	if err != nil {
		return BenchResult{}, err
	}
	if err := m.AddLoRA(l, 1); err != nil {
		return BenchResult{}, err
	}
	res := BenchResult{Batch: batch, SeqLen: seqLen}
	res.TrainableParams, res.FrozenParams = paramCounts(m)
	tcfg := trainer.DefaultConfig()
	tcfg.TotalSteps, tcfg.Scheduler, tcfg.MaxGradNorm, tcfg.LearningRate = steps+1, trainer.SchedulerCosine, 1, 1e-5
	tr, err := trainer.New(be, m.Ctx, lossFn(m), tcfg)
	if err != nil {
		return BenchResult{}, err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	ex := make([]Example, batch)
	for b := range ex {
		ids := make([]int, seqLen)
		for j := range ids {
			ids[j] = 3 + rng.IntN(cfg.VocabSize-3)
		}
		ex[b] = Example{Prompt: ids[:seqLen/2], Response: ids[seqLen/2:]}
	}
	in := [][]*tensors.Tensor{NewBatch(ex, batch, 0).Inputs(1)}
	t0 := time.Now()
	if _, err := tr.Step(in); err != nil {
		return BenchResult{}, err
	}
	res.CompileMs = float64(time.Since(t0).Microseconds()) / 1e3
	ms := make([]float64, steps)
	for i := range ms {
		t0 := time.Now()
		if _, err := tr.Step(in); err != nil {
			return BenchResult{}, err
		}
		ms[i] = float64(time.Since(t0).Microseconds()) / 1e3
	}
	slices.Sort(ms)
	res.MsPerStepMin, res.MsPerStepMedian = ms[0], ms[len(ms)/2]
	res.TokensPerSec = float64(batch*seqLen) / (res.MsPerStepMedian / 1e3)
	for v := range m.Ctx.IterVariables() {
		if !strings.HasPrefix(v.Scope(), trainer.StateScope+"/m/") && !strings.HasPrefix(v.Scope(), trainer.StateScope+"/v/") {
			continue
		}
		res.OptimizerFloats += int64(v.Shape().Size())
		if !strings.Contains(v.Scope(), "/lora_") {
			res.OptimizerOnFrozen++
		}
	}
	return res, nil
}
