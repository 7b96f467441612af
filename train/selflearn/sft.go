package selflearn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/trainer"
)

// SFTPair is one generator fine-tuning example (Eq. 6): the query q and the
// selected hypothetical document d*.
type SFTPair struct {
	Query  string `json:"query"`
	Output string `json:"output"`
}

// SFTInstruction is the instruction of the Alpaca-form export.
const SFTInstruction = "Please write a medical passage to answer the question."

// WriteSFTAlpaca writes one {"instruction", "input", "output"} line per pair
// (Stanford Alpaca / LLaMA-Factory "alpaca" format): instruction
// SFTInstruction, input the query, output d*.
func WriteSFTAlpaca(w io.Writer, pairs []SFTPair) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, p := range pairs {
		if err := enc.Encode(struct {
			Instruction string `json:"instruction"`
			Input       string `json:"input"`
			Output      string `json:"output"`
		}{SFTInstruction, p.Query, p.Output}); err != nil {
			return fmt.Errorf("sft alpaca: record %d: %w", i, err)
		}
	}
	return nil
}

// WriteSFTMessages writes one {"messages": [user, assistant]} line per pair
// (OpenAI / TRL chat format): the user message is template rendered with the
// query (generate.Render), the assistant message d*.
func WriteSFTMessages(w io.Writer, pairs []SFTPair, template string) error {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, p := range pairs {
		if err := enc.Encode(struct {
			Messages []msg `json:"messages"`
		}{[]msg{{"user", generate.Render(template, p.Query, "")}, {"assistant", p.Output}}}); err != nil {
			return fmt.Errorf("sft messages: record %d: %w", i, err)
		}
	}
	return nil
}

// writeFileAtomic creates path's directory and writes path atomically.
func writeFileAtomic(path string, fill func(w io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(path, 0o644, fill); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SFTConfig sets the generator fine-tuning (Eq. 6).
type SFTConfig struct {
	LearningRate    float64 // AdamW peak (1e-5)
	WarmupRatio     float64 // linear warmup fraction (0.1), then the cosine decay (SFTScheduler)
	Epochs          int     // 1
	BatchSize       int     // 8
	MaxTargetTokens int     // d* tokens kept, eos included (256)
	Template        string  // Eq. 3 prompt rendered with the query as encoder input
	Seed            int64   // data order and dropout
	// GradientCheckpointing recomputes each T5 block in the backward pass
	// (HF gradient_checkpointing; models/remat).
	GradientCheckpointing bool
}

// SFTScheduler is the generator fine-tuning schedule: SL-HyDE trains the
// generator with a cosine learning-rate schedule after warmup
// (transformers get_cosine_schedule_with_warmup, as LLaMA-Factory's
// lr_scheduler_type cosine).
const SFTScheduler = trainer.SchedulerCosine

// FineTuneT5 trains g's model in place on pairs with the HF T5 loss
// (teacher forcing; encoder input Render(cfg.Template, q, "") cut as
// g.EncodePrompt does, target d* cut to MaxTargetTokens−1 tokens plus eos),
// torch AdamW (β 0.9/0.999, ε 1e-8, no decay) and SFTScheduler (warmup,
// then cosine decay to 0). Batches are a PCG(Seed, epoch) permutation of the
// pairs, padded to BatchSize rows so one graph is compiled per padded length.
// It returns the mean loss of each update. Cancelling ctx stops between
// updates with ctx.Err(). Errors: no pairs, graph or execution failures.
func FineTuneT5(ctx context.Context, g *lm.T5, pairs []SFTPair, cfg SFTConfig) ([]float64, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("fine-tune t5: no pairs")
	}
	m, tok := g.Model, g.Tokenizer
	m.GradientCheckpointing = cfg.GradientCheckpointing // training graphs only
	c := m.Config
	B := max(cfg.BatchSize, 1)
	perEpoch := (len(pairs) + B - 1) / B
	tcfg := trainer.DefaultConfig()
	tcfg.LearningRate, tcfg.WarmupRatio, tcfg.TotalSteps = cfg.LearningRate, cfg.WarmupRatio, perEpoch*max(cfg.Epochs, 1)
	tcfg.Scheduler = SFTScheduler
	loss := func(gctx *mlctx.Context, in []*graph.Node) *graph.Node {
		return t5.LossGraph(m.LogitsGraph(gctx, in[0], in[1], in[2]), in[3])
	}
	tr, err := trainer.New(m.Backend, m.Ctx, loss, tcfg)
	if err != nil {
		return nil, fmt.Errorf("fine-tune t5: %w", err)
	}
	if err := m.Ctx.SetRNGStateFromSeed(cfg.Seed); err != nil {
		return nil, fmt.Errorf("fine-tune t5: seed: %w", err)
	}
	inputs := make([][]int, len(pairs))
	labels := make([][]int, len(pairs))
	maxT := max(cfg.MaxTargetTokens, 2)
	for i, p := range pairs {
		inputs[i] = g.InputIDs(generate.Render(cfg.Template, p.Query, ""))
		l := tok.Encode(p.Output, false)
		if len(l) > maxT-1 {
			l = l[:maxT-1]
		}
		labels[i] = append(l, tok.EOSID())
	}
	var losses []float64
	for ep := range max(cfg.Epochs, 1) {
		perm := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(ep))).Perm(len(pairs))
		for b := 0; b < len(perm); b += B {
			if err := ctx.Err(); err != nil {
				return losses, err
			}
			idx := perm[b:min(b+B, len(perm))]
			in, lab := make([][]int, len(idx)), make([][]int, len(idx))
			for r, i := range idx {
				in[r], lab[r] = inputs[i], labels[i]
			}
			sr, err := tr.Step([][]*tensors.Tensor{c.TrainBatch(in, lab, B)})
			if err != nil {
				return losses, fmt.Errorf("fine-tune t5: epoch %d batch %d: %w", ep+1, b/B+1, err)
			}
			losses = append(losses, sr.Loss)
		}
	}
	return losses, nil
}

// DecoderSFTExamples encodes pairs for the LoRA SFT of a decoder generator
// (Eq. 6): the prompt is Render(template, q, "") as the generator is asked
// for a hypothetical document, encoded by lm.UserPromptIDs (one user turn
// through the chat template, the assistant turn opened: the ids generation
// uses); the response is d* cut to maxTargetTokens−1 tokens plus eos (the
// tokenizer's eos_token, Qwen's <|im_end|>), and the whole to maxLength
// (lora.EncodePairs). Errors name the pair.
func DecoderSFTExamples(tok *bpe.Tokenizer, pairs []SFTPair, template string, maxTargetTokens, maxLength int) ([]lora.Example, error) {
	lp := make([]lora.Pair, len(pairs))
	for i, p := range pairs {
		lp[i] = lora.Pair{Prompt: generate.Render(template, p.Query, ""), Response: p.Output}
	}
	resp := func(s string) []int {
		ids := tok.Encode(s, false)
		return ids[:min(len(ids), max(maxTargetTokens-1, 1))]
	}
	ex, err := lora.EncodePairs(lp, func(s string) ([]int, error) { return lm.UserPromptIDs(tok, s) }, resp, tok.EOSID(), maxLength)
	if err != nil {
		return nil, fmt.Errorf("decoder sft: %w", err)
	}
	return ex, nil
}
