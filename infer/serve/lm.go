package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/models/lm"
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

// LocalLM is the local T5 (lm.T5) behind /v1/completions and
// /v1/chat/completions, and the pipeline's LLM when no server is given:
// generation, the echo/logprobs scoring and the encoder_input scoring are
// lm.T5's (see there for the conventions); LocalLM adds the LLM method.
type LocalLM struct{ *lm.T5 }

// LoadLocalLM loads an HF T5 directory on the named backend; its name
// (/v1/models) is "t5:<dir base name>".
func LoadLocalLM(dir, backendName string) (*LocalLM, error) {
	m, err := lm.LoadT5(dir, backendName)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	m.ID = "t5:" + filepath.Base(dir)
	return &LocalLM{m}, nil
}

// Complete implements LLM with greedy decoding; ctx stops it between
// decoding steps.
func (l *LocalLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	r, err := l.GenerateIDs(ctx, l.PromptIDs(prompt), lm.GenOptions{MaxTokens: maxTokens, Logprobs: -1})
	return r.Text, err
}
