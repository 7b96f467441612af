package generate

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// DefaultT5Temperature is SL-HyDE's sampling temperature.
const DefaultT5Temperature = 0.7

// T5Generator samples a local T5 model (models/t5.Model.Generate, HF
// generate(do_sample=True, num_beams=1) conventions). Each prompt is encoded
// (T5 tokenizer, eos appended, cut to MaxInputTokens) and decoded as one
// batch of opt.N copies seeded with ItemSeed(opt.Seed, prompt), so results do
// not depend on the other prompts. Temperature 0 decodes greedily.
//
// Per-item errors: a generation failure, an empty or non-UTF-8 text
// (CheckText). Calls are serialized (the model is not re-entrant for
// training, and the CPU is the bottleneck anyway).
type T5Generator struct {
	Model     *t5.Model
	Tokenizer tokenizer.Tokenizer
	// Dir is the checkpoint directory (for Name); may be empty.
	Dir string
	// MaxInputTokens cuts prompts (default 512, T5's training length).
	MaxInputTokens int

	mu sync.Mutex
}

// LoadT5Generator loads the model and tokenizer of an HF T5 directory on
// the named GoMLX backend ("" = default).
func LoadT5Generator(dir, backendName string) (*T5Generator, error) {
	m, tok, err := t5.LoadWithTokenizer(dir, backendName)
	if err != nil {
		return nil, fmt.Errorf("t5 generator %s: %w", dir, err)
	}
	return &T5Generator{Model: m, Tokenizer: tok, Dir: dir}, nil
}

// Name is "t5:<dir base name>".
func (g *T5Generator) Name() string {
	if g.Dir == "" {
		return "t5"
	}
	return "t5:" + filepath.Base(g.Dir)
}

// EncodePrompt returns the encoder ids of a prompt: tokens cut to
// MaxInputTokens−1 (default 512), then eos.
func (g *T5Generator) EncodePrompt(prompt string) []int {
	maxIn := g.MaxInputTokens
	if maxIn <= 1 {
		maxIn = 512
	}
	return EncoderIDs(g.Tokenizer, prompt, maxIn)
}

// EncoderIDs tokenizes a T5 encoder input as HF T5Tokenizer with
// truncation=True and max_length limit (≥ 1): pieces cut to limit−1, then
// </s>.
func EncoderIDs(tok tokenizer.Tokenizer, text string, limit int) []int {
	ids := tok.Encode(text, false)
	if len(ids) > limit-1 {
		ids = ids[:max(limit-1, 0)]
	}
	return append(ids, tok.EOSID())
}

// Generate implements Generator.
func (g *T5Generator) Generate(ctx context.Context, prompts []string, opt Options) ([][]string, []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := opt.n()
	maxNew := opt.MaxNewTokens
	if maxNew <= 0 {
		maxNew = 64
	}
	outs := make([][]string, len(prompts))
	errs := make([]error, len(prompts))
	for i, p := range prompts {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		ids := g.EncodePrompt(p)
		rows := make([][]int, n)
		for k := range rows {
			rows[k] = ids
		}
		res, err := g.Model.Generate(rows, nil, t5.GenerateOptions{MaxNewTokens: maxNew,
			DoSample: opt.Temperature > 0, Temperature: opt.Temperature, TopP: opt.TopP, Seed: ItemSeed(opt.Seed, p)})
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", g.Name(), err)
			continue
		}
		for k, row := range res {
			text, err := CheckText(g.Tokenizer.Decode(row, true))
			if err != nil {
				errs[i] = fmt.Errorf("%s: text %d: %w", g.Name(), k, err)
				continue
			}
			outs[i] = append(outs[i], text)
		}
	}
	return outs, errs
}
