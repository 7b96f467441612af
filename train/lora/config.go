// Package lora fine-tunes a decoder-only language model (Llama, Qwen2,
// Qwen3 from models/decoder) with LoRA as PEFT does it (Hu et al., "LoRA:
// Low-Rank Adaptation of Large Language Models"; peft 0.15 LoraModel): each
// targeted projection gains y = W x + b + (lora_alpha/r)·B(A x) with A [r, in]
// drawn as kaiming_uniform_(a=√5) and B [out, r] zero, the base weights stay
// frozen and only A and B are trained (AdamW and the schedules of
// train/trainer, so no optimizer state exists for a frozen weight). The
// training objective is supervised fine-tuning on (prompt, response) pairs:
// the causal-LM cross-entropy of the response tokens, prompt tokens labelled
// -100 (transformers' shift: logits[:, :-1] against labels[:, 1:]).
//
// The result is written both as a PEFT adapter folder (adapter_config.json
// as peft 0.15 save_pretrained writes it, adapter_model.safetensors under
// base_model.model.* keys) and as a merged HF checkpoint (W + scaling·B·A).
//
// It is the generator fine-tuning of SL-HyDE (AutoMIR, Eq. 6) for a decoder
// generator; the package never prints.
package lora

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/models/decoder"
)

// TargetModules are the projections LoRA may adapt in a Llama / Qwen2 /
// Qwen3 decoder layer, by their HF module names (the last component of
// "model.layers.N.self_attn.q_proj"). lm_head and embed_tokens are left out,
// as PEFT's "all-linear" leaves out the output layer.
var TargetModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// AllLinear is PEFT's shorthand target_modules="all-linear": every linear
// layer but the output head, here TargetModules.
const AllLinear = "all-linear"

// PEFTDefaultTargets is peft's
// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING entry for llama and
// qwen2 (the targets LoraConfig uses when target_modules is None), taken
// for qwen3 too, whose projections have the same names.
var PEFTDefaultTargets = []string{"q_proj", "v_proj"}

// DefaultLoRA is SL-HyDE's LoRA: r 8 (AutoMIR, implementation details).
// The paper states nothing else; the other values are peft 0.15 LoraConfig
// defaults: lora_alpha 8, lora_dropout 0.0, target_modules None → q_proj and
// v_proj (PEFTDefaultTargets). LLaMA-Factory, whose
// Alpaca format the SFT export uses, would take lora_alpha 2·r and
// lora_target "all"; pass --lora-alpha 16 --target-modules all-linear for
// that.
func DefaultLoRA() decoder.LoRA {
	return decoder.LoRA{R: 8, Alpha: 8, Dropout: 0, TargetModules: slices.Clone(PEFTDefaultTargets)}
}

// NormalizeLoRA validates l for training (ValidateLoRA) and returns it with
// AllLinear expanded and the target modules sorted, as PEFT writes
// target_modules.
func NormalizeLoRA(l decoder.LoRA) (decoder.LoRA, error) {
	if err := ValidateLoRA(l); err != nil {
		return l, err
	}
	if len(l.TargetModules) == 1 && l.TargetModules[0] == AllLinear {
		l.TargetModules = slices.Clone(TargetModules)
	} else {
		l.TargetModules = slices.Clone(l.TargetModules)
	}
	slices.Sort(l.TargetModules)
	return l, nil
}

// ValidateLoRA checks l's ranges (decoder.LoRA.Validate) and, beyond what
// the forward needs, that every target module is a decoder projection
// named in TargetModules (or AllLinear alone), each once: a typo or another
// architecture's name ("c_attn", T5's "q") is refused by name instead of
// adapting fewer modules than asked.
func ValidateLoRA(l decoder.LoRA) error {
	// NaN passes decoder.LoRA.Validate's comparisons.
	if math.IsNaN(l.Alpha) || math.IsInf(l.Alpha, 0) || math.IsNaN(l.Dropout) {
		return fmt.Errorf("lora config: lora_alpha %v, lora_dropout %v: want finite numbers", l.Alpha, l.Dropout)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	bad := func(v any, want string) error {
		return fmt.Errorf("lora config: field %q: %v, want %s", "target_modules", v, want)
	}
	seen := map[string]bool{}
	for _, m := range l.TargetModules {
		switch {
		case m == AllLinear && len(l.TargetModules) > 1:
			return bad(l.TargetModules, AllLinear+" alone")
		case m == AllLinear:
		case !slices.Contains(TargetModules, m):
			return bad(fmt.Sprintf("%q", m), "one of "+strings.Join(TargetModules, ", ")+" or "+AllLinear+" (unknown module)")
		case seen[m]:
			return bad(fmt.Sprintf("%q", m), "each module once")
		}
		seen[m] = true
	}
	return nil
}

// Config holds a LoRA SFT run's settings; start from DefaultConfig.
type Config struct {
	LoRA decoder.LoRA

	// Optimisation (torch AdamW β 0.9/0.999, ε 1e-8 as train/trainer).
	LearningRate     float64 // peak learning rate (AutoMIR: 1e-5)
	WarmupSteps      int     // linear warmup updates, then the cosine decay (AutoMIR: 200)
	Epochs           int     // passes over the data (AutoMIR: 1)
	BatchSize        int     // examples per micro-batch (AutoMIR: 2)
	GradAccumulation int     // micro-batches per update (1)
	// MaxGradNorm clips the global gradient norm of the LoRA weights
	// (transformers TrainingArguments.max_grad_norm 1.0; 0 = off).
	MaxGradNorm float64
	WeightDecay float64 // AdamW decoupled decay (TrainingArguments default 0)
	// MaxLength caps prompt + response tokens (LLaMA-Factory cutoff_len
	// 2048 by default; here 1024 to bound memory on a CPU).
	MaxLength int
	Seed      int64 // LoRA init, data order and dropout
	// SaveSteps writes a resumable checkpoint every SaveSteps updates (0 =
	// only at the end).
	SaveSteps int
	// GradientCheckpointing recomputes each transformer block in the
	// backward pass instead of keeping its activations (HF
	// TrainingArguments.gradient_checkpointing, off by default): the same
	// gradients for about one more forward pass, with activation memory of
	// the block inputs plus one block (models/remat, train/memory).
	GradientCheckpointing bool
}

// DefaultConfig is SL-HyDE's generator fine-tuning (AutoMIR, implementation details: LoRA rank 8,
// AdamW, cosine schedule with 200 warmup steps, learning rate 1e-5, batch 2,
// 1 epoch) with transformers' max_grad_norm 1.0 and DefaultLoRA's
// values for what the paper leaves open.
func DefaultConfig() Config {
	return Config{
		LoRA:         DefaultLoRA(),
		LearningRate: 1e-5, WarmupSteps: 200, Epochs: 1, BatchSize: 2, GradAccumulation: 1,
		MaxGradNorm: 1.0, MaxLength: 1024, Seed: 42,
	}
}

// Validate checks every field; errors name it.
func (c Config) Validate() error {
	if err := ValidateLoRA(c.LoRA); err != nil {
		return err
	}
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("lora config: field %q: %v, want %s", field, v, want)
	}
	switch {
	case !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 0):
		return bad("LearningRate", c.LearningRate, "> 0")
	case c.WarmupSteps < 0:
		return bad("WarmupSteps", c.WarmupSteps, ">= 0")
	case c.Epochs < 1:
		return bad("Epochs", c.Epochs, ">= 1")
	case c.BatchSize < 1:
		return bad("BatchSize", c.BatchSize, ">= 1")
	case c.GradAccumulation < 1:
		return bad("GradAccumulation", c.GradAccumulation, ">= 1")
	case !(c.MaxGradNorm >= 0) || math.IsInf(c.MaxGradNorm, 0):
		return bad("MaxGradNorm", c.MaxGradNorm, ">= 0 (0 = off)")
	case !(c.WeightDecay >= 0):
		return bad("WeightDecay", c.WeightDecay, ">= 0")
	case c.MaxLength < 2:
		return bad("MaxLength", c.MaxLength, ">= 2 (one prompt token and eos)")
	case c.SaveSteps < 0:
		return bad("SaveSteps", c.SaveSteps, ">= 0")
	}
	return nil
}
