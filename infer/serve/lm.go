package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/nn"
)

// LLM writes a text for a prompt: the rationale, the answer and the HyDE
// documents of the pipeline. An empty text is a valid answer, not an error.
type LLM interface {
	Complete(ctx context.Context, prompt string, maxTokens int) (string, error)
	Name() string
}

// GeneratorLLM adapts an lm.Generator (an OpenAI-compatible server: Ollama,
// llama.cpp server, vLLM) to LLM, decoding greedily (temperature 0, one
// text). lm.ErrEmpty becomes "".
type GeneratorLLM struct{ G lm.Generator }

// Complete implements LLM.
func (g GeneratorLLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	outs, errs := g.G.Generate(ctx, []string{prompt}, lm.Options{MaxNewTokens: maxTokens, N: 1})
	if errs[0] != nil {
		if errors.Is(errs[0], lm.ErrEmpty) {
			return "", nil
		}
		return "", errs[0]
	}
	return outs[0][0], nil
}

// Name implements LLM.
func (g GeneratorLLM) Name() string { return g.G.Name() }

// LocalLM is the model run in this process behind /v1/completions and
// /v1/chat/completions, and the pipeline's LLM when no server is given: a
// T5 or a decoder (lm.Local; generation, echo scoring and, for T5, the
// encoder_input scoring are lm's, see lm.T5 and lm.Decoder for the
// conventions). LocalLM adds the LLM method.
type LocalLM struct{ lm.Local }

// LoadLocalLM loads an HF model directory by its config.json model_type
// (lm.Load: t5, llama, qwen2, qwen3) on the named backend. A T5 is named
// "t5:<dir base name>" (/v1/models), a decoder "<model_type>:<base>".
func LoadLocalLM(dir, backendName string) (*LocalLM, error) {
	return LoadLocalLMAs(dir, backendName, nn.Auto)
}

// LoadLocalLMAs is LoadLocalLM holding the weights as dt (nn.DType).
func LoadLocalLMAs(dir, backendName string, dt nn.DType) (*LocalLM, error) {
	m, err := lm.LoadAs(dir, backendName, dt)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	l, ok := m.(lm.Local)
	if !ok {
		return nil, fmt.Errorf("load generator %s: %s cannot be served", dir, m.Name())
	}
	if t, ok := m.(*lm.T5); ok {
		t.ID = "t5:" + filepath.Base(dir)
	}
	return &LocalLM{l}, nil
}

// Complete implements LLM with greedy decoding of prompt as one user
// message (lm.Local.UserIDs); ctx stops it between decoding steps.
func (l *LocalLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	ids, err := l.UserIDs(prompt)
	if err != nil {
		return "", err
	}
	r, err := l.GenerateIDs(ctx, ids, lm.GenOptions{MaxTokens: maxTokens, Logprobs: -1})
	return r.Text, err
}

// defaultMaxTokens is the generation length of a request that sets no
// max_tokens: def, bounded by what the context leaves after the prompt
// for a model with a context length (a decoder), as vLLM bounds it. A
// prompt that fills the context keeps def and is refused by the model.
func (l *LocalLM) defaultMaxTokens(promptTokens, def int) int {
	c, ok := l.Local.(interface{ MaxContext() int })
	if !ok || c.MaxContext()-promptTokens < 1 {
		return def
	}
	return min(def, c.MaxContext()-promptTokens)
}
