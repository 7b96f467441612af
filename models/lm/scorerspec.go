package lm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/t5"
)

// SplitSpec splits a model spec "kind:target[#model]" ("t5:DIR",
// "openai:URL#name"); ok is false without a kind or a target.
func SplitSpec(spec string) (kind, target, model string, ok bool) {
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok || rest == "" {
		return "", "", "", false
	}
	target, model, _ = strings.Cut(rest, "#")
	return kind, target, model, true
}

// ScorerOptions are how OpenScorer reaches its model: the GoMLX backend of a
// local one, the client limits of an OpenAI-compatible server.
type ScorerOptions struct {
	Backend     string
	Timeout     time.Duration
	Retries     int
	Concurrency int
}

// OpenScorer builds the perplexity scorer of a spec, as `label perplexity
// --scorer`, `eval mcqa --scorer` and `eval sensitivity --scorer` take it:
// "t5:DIR", "hf:DIR" (a T5 or a Llama/Qwen2/Qwen3 decoder by config.json
// model_type) or "openai:URL[#model]" (an encoder-decoder server scores
// (prompt, target) as encoder input and labels, like t5:DIR; others by
// echo). Local weights are held as stored (nn.Auto). Errors name the spec.
func OpenScorer(ctx context.Context, spec string, o ScorerOptions) (Scorer, error) {
	kind, target, model, ok := SplitSpec(spec)
	if !ok {
		return nil, fmt.Errorf("--scorer %q: want t5:DIR or openai:URL[#model]", spec)
	}
	switch kind {
	case "t5":
		m, tok, err := t5.LoadWithTokenizerAs(target, o.Backend, nn.Auto)
		if err != nil {
			return nil, err
		}
		return NewT5Scorer(target, m, tok), nil
	case "hf":
		m, err := Load(target, o.Backend)
		if err != nil {
			return nil, fmt.Errorf("--scorer %q: %w", spec, err)
		}
		switch m := m.(type) {
		case *T5: // the same scorer, and cache key, as t5:DIR
			return NewT5Scorer(target, m.Model, m.Tokenizer), nil
		case *Decoder:
			m.ID = "hf:" + target
			return m, nil
		}
		return nil, fmt.Errorf("--scorer %q: %s cannot score", spec, m.Name())
	case "openai":
		sc := NewHTTPScorer(openai.New(target, openai.Options{Model: model, Timeout: o.Timeout, MaxRetries: o.Retries, Concurrency: o.Concurrency}))
		if err := sc.Detect(ctx); err != nil {
			return nil, err
		}
		return sc, nil
	}
	return nil, fmt.Errorf("--scorer %q: want t5:DIR, hf:DIR or openai:URL[#model]", spec)
}
