// Package trainer is the optimisation core shared by ragforge's model
// trainers (the RAG² filter in train/filter, the SL-HyDE retriever): AdamW
// with decoupled weight decay and parameter groups, the linear learning-rate
// schedule with warmup, global-norm gradient clipping and gradient
// accumulation, written as GoMLX graphs over the trainable variables of a
// context; optimizer state save/restore for exact resume; and atomic HF-style
// checkpoint directories (checkpoint-<step>/ with trainer_state.json).
//
// Conventions follow PyTorch / Hugging Face so that a run can be compared with
// a transformers script line by line: torch.optim.AdamW, transformers
// get_linear_schedule_with_warmup / get_cosine_schedule_with_warmup /
// get_constant_schedule_with_warmup, torch.nn.utils.clip_grad_norm_, and the
// Accelerate no_trainer loop (mean of the micro-batch losses per update).
//
// The package never prints; callers report progress themselves.
package trainer

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Config holds the optimiser, schedule and accumulation settings (names of HF
// TrainingArguments). Defaults (DefaultConfig) are those of RAG²'s
// run_classifier.py (an Accelerate no_trainer loop): torch AdamW with
// betas (0.9, 0.999), eps 1e-8, weight decay 0, linear schedule, no warmup,
// no gradient clipping, accumulation 1; learning rate 3e-5 as in RAG²'s
// launch script.
type Config struct {
	LearningRate float64 // peak learning rate (after warmup)
	WeightDecay  float64 // decoupled (AdamW) decay, applied to parameters where NoDecay is false
	Beta1, Beta2 float64 // AdamW moment coefficients
	Epsilon      float64 // AdamW denominator epsilon (torch default 1e-8)
	// MaxGradNorm clips the global L2 norm of the (accumulated) gradient as
	// torch.nn.utils.clip_grad_norm_ does (coefficient max/(norm+1e-6), capped
	// at 1); 0 disables clipping (RAG²'s loop does not clip; HF Trainer uses 1.0).
	MaxGradNorm float64
	// WarmupSteps of linear warmup from 0; when 0, WarmupRatio·TotalSteps
	// (rounded up, HF) is used.
	WarmupSteps int
	WarmupRatio float64
	// TotalSteps is the number of optimiser updates of the whole run; the
	// linear and cosine schedules decay to 0 at TotalSteps. Required (> 0).
	TotalSteps int
	// Scheduler is the learning-rate schedule after warmup: SchedulerLinear
	// (HF default), SchedulerCosine or SchedulerConstant (see Schedule).
	Scheduler string
	// SkipNonFinite makes Step skip (and count) an update whose loss or
	// gradient is not finite instead of returning an error; either way such
	// an update leaves the parameters and the optimiser state untouched.
	SkipNonFinite bool
	// GradAccumulation is the number of micro-batches per update (HF
	// gradient_accumulation_steps); informative here: Trainer.Step takes the
	// micro-batches of one update explicitly.
	GradAccumulation int
	// NoDecay reports which parameters are exempt from weight decay, by the
	// variable's full context path ("/encoder/block/0/layer/0/layer_norm/weight").
	// nil means DefaultNoDecay (HF's rule on the HF parameter name).
	NoDecay func(path string) bool `json:"-"`
}

// DefaultConfig returns the RAG² defaults documented on Config; TotalSteps is
// left 0 for the caller to fill.
func DefaultConfig() Config {
	return Config{
		LearningRate: 3e-5, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8,
		GradAccumulation: 1, Scheduler: SchedulerLinear,
	}
}

// NoDecaySubstrings is the no_decay list of the HF examples (run_glue_no_trainer.py,
// run_clm_no_trainer.py) and of RAG²'s run_classifier.py: a parameter whose HF
// name contains one of them gets weight decay 0. As substrings, "bias" also
// exempts T5's relative_attention_bias.weight.
var NoDecaySubstrings = []string{"bias", "LayerNorm.weight", "layer_norm.weight"}

// NoDecayName reports whether the HF parameter name ("encoder.block.0.layer.0.
// SelfAttention.relative_attention_bias.weight") is exempt from weight decay
// (NoDecaySubstrings). It is the one home of the rule.
func NoDecayName(hfName string) bool {
	for _, s := range NoDecaySubstrings {
		if strings.Contains(hfName, s) {
			return true
		}
	}
	return false
}

// HFName maps a variable's context path to its HF parameter name: the path
// without the leading separator, with "/" replaced by "." (the layout of
// models/t5 and models/bert: "/a/b/weight" ↔ "a.b.weight").
func HFName(path string) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", ".")
}

// DefaultNoDecay is NoDecayName applied to the HF name of a context path.
func DefaultNoDecay(path string) bool { return NoDecayName(HFName(path)) }

// Learning-rate schedules (Config.Scheduler), named as HF's
// TrainingArguments.lr_scheduler_type.
const (
	SchedulerLinear   = "linear"   // get_linear_schedule_with_warmup
	SchedulerCosine   = "cosine"   // get_cosine_schedule_with_warmup, num_cycles 0.5
	SchedulerConstant = "constant" // get_constant_schedule_with_warmup (= get_constant_schedule without warmup)
)

// Schedulers lists the valid Config.Scheduler values.
var Schedulers = []string{SchedulerLinear, SchedulerCosine, SchedulerConstant}

// ValidScheduler reports whether name is one of Schedulers.
func ValidScheduler(name string) bool { return slices.Contains(Schedulers, name) }

// Validate checks ranges; errors name the field.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("trainer config: field %q: %v, want %s", field, v, want)
	}
	switch {
	case !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 0):
		return bad("LearningRate", c.LearningRate, "> 0")
	case c.WeightDecay < 0:
		return bad("WeightDecay", c.WeightDecay, ">= 0")
	case c.Beta1 < 0 || c.Beta1 >= 1:
		return bad("Beta1", c.Beta1, "in [0,1)")
	case c.Beta2 < 0 || c.Beta2 >= 1:
		return bad("Beta2", c.Beta2, "in [0,1)")
	case !(c.Epsilon > 0):
		return bad("Epsilon", c.Epsilon, "> 0")
	case c.MaxGradNorm < 0:
		return bad("MaxGradNorm", c.MaxGradNorm, ">= 0 (0 = off)")
	case c.WarmupSteps < 0:
		return bad("WarmupSteps", c.WarmupSteps, ">= 0")
	case c.WarmupRatio < 0 || c.WarmupRatio >= 1:
		return bad("WarmupRatio", c.WarmupRatio, "in [0,1)")
	case c.TotalSteps <= 0:
		return bad("TotalSteps", c.TotalSteps, "> 0")
	case c.GradAccumulation < 1:
		return bad("GradAccumulation", c.GradAccumulation, ">= 1")
	case !ValidScheduler(c.Scheduler):
		return bad("Scheduler", fmt.Sprintf("%q", c.Scheduler), "one of "+strings.Join(Schedulers, ", "))
	}
	return nil
}

// Warmup returns the number of warmup updates: WarmupSteps, or
// ceil(WarmupRatio·TotalSteps) when WarmupSteps is 0 (HF get_warmup_steps).
func (c Config) Warmup() int {
	if c.WarmupSteps > 0 {
		return c.WarmupSteps
	}
	return int(math.Ceil(c.WarmupRatio * float64(c.TotalSteps)))
}

// LinearSchedule is transformers.get_linear_schedule_with_warmup: the
// learning rate used by the update that follows `step` completed updates
// (0-based, as LambdaLR sees it) is
//
//	peak·step/warmup                                  if step < warmup
//	peak·max(0, (total−step)/max(1, total−warmup))    otherwise.
//
// With warmup > 0 the first update therefore uses learning rate 0, as in HF.
func LinearSchedule(step, warmup, total int, peak float64) float64 {
	if step < warmup {
		return peak * float64(step) / float64(max(1, warmup))
	}
	return peak * math.Max(0, float64(total-step)/float64(max(1, total-warmup)))
}

// CosineSchedule is transformers.get_cosine_schedule_with_warmup with
// num_cycles 0.5 (half a cosine from peak to 0), same step convention as
// LinearSchedule:
//
//	peak·step/warmup                                        if step < warmup
//	peak·max(0, ½(1 + cos(π·(step−warmup)/max(1, total−warmup))))  otherwise.
func CosineSchedule(step, warmup, total int, peak float64) float64 {
	if step < warmup {
		return peak * float64(step) / float64(max(1, warmup))
	}
	progress := float64(step-warmup) / float64(max(1, total-warmup))
	return peak * math.Max(0, 0.5*(1+math.Cos(math.Pi*progress)))
}

// ConstantSchedule is transformers.get_constant_schedule_with_warmup: linear
// warmup from 0 (as LinearSchedule), then peak.
func ConstantSchedule(step, warmup int, peak float64) float64 {
	if step < warmup {
		return peak * float64(step) / float64(max(1, warmup))
	}
	return peak
}

// Schedule returns the learning rate of the update that follows `step`
// completed updates under the named schedule (Schedulers). It panics on an
// unknown name: Config.Validate rejects those first.
func Schedule(name string, step, warmup, total int, peak float64) float64 {
	switch name {
	case SchedulerLinear:
		return LinearSchedule(step, warmup, total, peak)
	case SchedulerCosine:
		return CosineSchedule(step, warmup, total, peak)
	case SchedulerConstant:
		return ConstantSchedule(step, warmup, peak)
	}
	panic(fmt.Sprintf("trainer: unknown learning-rate schedule %q", name))
}
