package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/train/lora"
)

// trainLoRAOptions are the flags of `train lora`.
type trainLoRAOptions struct {
	Model, Data, Out, Targets, InitAdapter string
	Resume, Merge                          bool
	// NoChatTemplate encodes prompts as raw text even when the tokenizer
	// has a chat template.
	NoChatTemplate bool
	Config         lora.Config
}

const trainLoRALong = `LoRA supervised fine-tuning (PEFT semantics) of a decoder-only LM (Llama,
Qwen2, Qwen3 HF directory) on prompt/response pairs: the SFT JSONL that
` + "`ragforge selflearn`" + ` writes in each round (sft_alpaca.jsonl:
instruction/input/output, or sft_messages.jsonl: one user and one assistant
message). Only the response tokens (and eos) are scored; the base weights
stay frozen and only the LoRA matrices A [r, in] and B [out, r] are trained,
y = W x + b + (lora_alpha/r)·B(A x). When the tokenizer has a chat template
(tokenizer_config.json chat_template), each prompt is rendered as one user
message with the assistant turn opened, exactly as the decoder is prompted
when it generates (selflearn, serve); --no-chat-template trains on the raw
prompt text instead.

Defaults are SL-HyDE's generator fine-tuning (AutoMIR): rank 8, AdamW,
cosine schedule after 200 warmup steps, learning rate 1e-5, batch 2, 1 epoch;
what the paper leaves open is peft's LoraConfig default (lora_alpha 8,
lora_dropout 0, target_modules q_proj,v_proj). --target-modules all-linear
adapts every projection.

--out receives checkpoint-<step>/ (resumable with --resume), adapter/ (a
PEFT adapter folder: adapter_config.json and adapter_model.safetensors,
loadable by PeftModel.from_pretrained) and, with --merge, merged/ (the base
checkpoint with W + (lora_alpha/r)·B·A, tokenizer files copied).`

func newTrainLoRACmd(g *globals) *cobra.Command {
	o := trainLoRAOptions{Config: lora.DefaultConfig()}
	cmd := &cobra.Command{
		Use:     "lora",
		Short:   "LoRA-fine-tune a Llama/Qwen2/Qwen3 decoder on prompt/response JSONL; export a PEFT adapter and a merged checkpoint",
		Long:    trainLoRALong,
		Example: `  ragforge train lora --model qwen2-0.5b --data work/round-1/sft_alpaca.jsonl --out work/generator-lora --merge`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTrainLoRA(cmdContext(cmd), g, o) },
	}
	f := cmd.Flags()
	c := &o.Config
	f.StringVar(&o.Model, "model", "", "base model: HF decoder directory with config.json, safetensors and tokenizer files (required)")
	f.StringVar(&o.Data, "data", "", "SFT JSONL: Alpaca instruction/input/output or messages records (required)")
	f.StringVar(&o.Out, "out", "", "output directory: checkpoints, adapter/, merged/ (required)")
	f.IntVar(&c.LoRA.R, "r", c.LoRA.R, "LoRA rank r")
	f.Float64Var(&c.LoRA.Alpha, "lora-alpha", c.LoRA.Alpha, "lora_alpha: the update is scaled by lora_alpha/r")
	f.Float64Var(&c.LoRA.Dropout, "lora-dropout", c.LoRA.Dropout, "dropout on the input of lora_A while training, in [0,1)")
	f.StringVar(&o.Targets, "target-modules", strings.Join(c.LoRA.TargetModules, ","), "comma-separated modules to adapt ("+strings.Join(lora.TargetModules, ", ")+") or "+lora.AllLinear)
	f.Float64Var(&c.LearningRate, "lr", c.LearningRate, "peak learning rate (AdamW)")
	f.IntVar(&c.WarmupSteps, "warmup-steps", c.WarmupSteps, "linear warmup updates before the cosine decay")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "passes over the data")
	f.IntVar(&c.BatchSize, "batch-size", c.BatchSize, "examples per micro-batch")
	f.IntVar(&c.GradAccumulation, "grad-accum", c.GradAccumulation, "micro-batches per update")
	f.Float64Var(&c.MaxGradNorm, "max-grad-norm", c.MaxGradNorm, "clip the global gradient norm of the LoRA weights (0 = off)")
	f.IntVar(&c.MaxLength, "max-length", c.MaxLength, "prompt + response tokens kept (the response is cut, eos kept)")
	f.IntVar(&c.SaveSteps, "save-steps", c.SaveSteps, "write a resumable checkpoint every N updates (0 = at the end only)")
	f.Int64Var(&c.Seed, "seed", c.Seed, "seed of the LoRA init, data order and dropout")
	f.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", false, "recompute each transformer block in the backward pass instead of keeping its activations (HF gradient_checkpointing): the same gradients, less memory, about one more forward pass per step")
	f.BoolVar(&o.Resume, "resume", false, "continue from the newest checkpoint in --out")
	f.StringVar(&o.InitAdapter, "init-adapter", "", "start from this PEFT adapter folder instead of a fresh LoRA init (its r, lora_alpha, lora_dropout and target modules must equal the flags')")
	f.BoolVar(&o.NoChatTemplate, "no-chat-template", false, "encode each prompt as raw text (with the tokenizer's specials) instead of one user message through the tokenizer's chat template")
	f.BoolVar(&o.Merge, "merge", false, "also write --out/merged: the base checkpoint with the adapter merged in")
	return cmd
}

// runTrainLoRA reads and tokenizes the data, trains, and records a run.
func runTrainLoRA(ctx context.Context, g *globals, o trainLoRAOptions) (err error) {
	if o.Model == "" || o.Data == "" || o.Out == "" {
		return fmt.Errorf("--model, --data and --out are required")
	}
	o.Config.LoRA.TargetModules = nil
	for _, m := range strings.Split(o.Targets, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Config.LoRA.TargetModules = append(o.Config.LoRA.TargetModules, m)
		}
	}
	opt := lora.Options{Config: o.Config, ModelDir: o.Model, OutputDir: o.Out, Backend: g.Backend, Resume: o.Resume, Merge: o.Merge, InitAdapter: o.InitAdapter}
	r, start := runStarter(func(kind string, config any) (*tracker.Store, *tracker.Run, error) {
		return startOrResumeRun(g, kind, config, o.Out, o.Resume)
	})
	defer r.finish(&err)
	var bar *progress.Bar
	rep, err := lora.RunTrain(ctx, lora.TrainJob{Options: opt, Data: o.Data, ChatTemplate: !o.NoChatTemplate}, barOnStart(start, &bar, g.Err, -1, "train lora"), func(p lora.Progress) {
		if p.Phase == "train" {
			bar.Describe(fmt.Sprintf("epoch %.2f loss %.4f lr %.2e grad_norm %.3f %.0f tok/s", p.Epoch, p.Loss, p.LearningRate, p.GradNorm, p.TokensPerSec))
			bar.Set(p.Step, p.Steps)
		}
	})
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rep)
	}
	res := rep.Result
	fmt.Fprintf(g.Out, "run %s: %d updates, final loss %.4f, %d examples (%d scored tokens); %d trainable LoRA parameters, %d frozen\n",
		rep.RunID, res.GlobalStep, res.FinalLoss, res.Examples, res.ScoredTokens, res.TrainableParams, res.FrozenParams)
	fmt.Fprintf(g.Out, "adapter %s\n", res.AdapterDir)
	if res.MergedDir != "" {
		fmt.Fprintf(g.Out, "merged checkpoint %s\n", res.MergedDir)
	}
	return nil
}
