package generate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ragforge/ragforge/models/openai"
)

// OpenAIGenerator sends each prompt as one user message to an
// OpenAI-compatible /v1/chat/completions endpoint (Ollama, llama.cpp server,
// vLLM), once per requested text, with seed ItemSeed(opt.Seed, prompt)+k for
// text k (servers that honour "seed" are then reproducible). Timeouts,
// retries with exponential backoff on 429/5xx/transport errors and the
// concurrency limit are those of Client (models/openai.Options).
//
// Per-item errors: an HTTP failure after the retries (e.g. 500, a timeout),
// an answer without choices, an empty or non-UTF-8 text (CheckText).
type OpenAIGenerator struct {
	Client *openai.Client
	// System is an optional system message.
	System string
}

// Name is "openai:<base url>#<model>".
func (g *OpenAIGenerator) Name() string {
	return "openai:" + g.Client.BaseURL() + "#" + g.Client.Model()
}

// Generate implements Generator; requests run concurrently up to the
// client's concurrency limit.
func (g *OpenAIGenerator) Generate(ctx context.Context, prompts []string, opt Options) ([][]string, []error) {
	n := opt.n()
	outs := make([][]string, len(prompts))
	errs := make([]error, len(prompts))
	texts := make([][]string, len(prompts))
	terrs := make([][]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		texts[i] = make([]string, n)
		terrs[i] = make([]error, n)
		for k := range n {
			wg.Go(func() {
				texts[i][k], terrs[i][k] = g.one(ctx, p, opt, ItemSeed(opt.Seed, p)+int64(k))
			})
		}
	}
	wg.Wait()
	for i := range prompts {
		var bad []error
		for k := range n {
			if terrs[i][k] != nil {
				bad = append(bad, fmt.Errorf("text %d: %w", k, terrs[i][k]))
				continue
			}
			outs[i] = append(outs[i], texts[i][k])
		}
		if len(bad) > 0 {
			errs[i] = fmt.Errorf("%s: %w", g.Name(), errors.Join(bad...))
		}
	}
	return outs, errs
}

func (g *OpenAIGenerator) one(ctx context.Context, prompt string, opt Options, seed int64) (string, error) {
	var msgs []openai.Message
	if g.System != "" {
		msgs = append(msgs, openai.Message{Role: "system", Content: g.System})
	}
	msgs = append(msgs, openai.Message{Role: "user", Content: prompt})
	req := openai.ChatRequest{Messages: msgs, MaxTokens: max(opt.MaxNewTokens, 0), Seed: &seed}
	t := opt.Temperature
	req.Temperature = &t
	if opt.TopP > 0 && opt.TopP < 1 {
		p := opt.TopP
		req.TopP = &p
	}
	resp, err := g.Client.Chat(ctx, req)
	if err != nil {
		return "", err
	}
	return CheckText(resp.Choices[0].Message.Content)
}
