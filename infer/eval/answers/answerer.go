package answers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/models/lm"
)

// Answerer answers a question from retrieved contexts (best first).
type Answerer interface {
	Answer(ctx context.Context, question string, contexts []string) (string, error)
}

// DefaultTemplate is the answering prompt of both adapters. {question} is
// replaced by the question and {context} by the contexts, each prefixed
// with its 1-based rank ("[1] ...") and separated by blank lines. The
// question comes first so truncation of a long prompt cuts context, not the
// question.
const DefaultTemplate = "Answer the question using only the context.\n\nQuestion: {question}\n\nContext:\n{context}\n\nAnswer:"

// FillTemplate fills tmpl (DefaultTemplate when empty) as documented there.
func FillTemplate(tmpl, question string, contexts []string) string {
	if tmpl == "" {
		tmpl = DefaultTemplate
	}
	parts := make([]string, len(contexts))
	for i, c := range contexts {
		parts[i] = fmt.Sprintf("[%d] %s", i+1, c)
	}
	return strings.NewReplacer("{question}", question, "{context}", strings.Join(parts, "\n\n")).Replace(tmpl)
}

// LMAnswerer answers with a local language model (a models/lm backend: a
// Flan-T5, or a Llama/Qwen decoder through its chat template): the filled
// Template is one prompt, tokenized and cut to the model's input as the
// backend always does (T5: the first 511 ids and eos, HF truncation=True),
// decoded greedily for MaxNewTokens (0 means 20, HF generate's default) and
// trimmed. An empty answer is an answer (it scores 0), not an error.
type LMAnswerer struct {
	LM           lm.Generator
	Template     string // "" means DefaultTemplate
	MaxNewTokens int
}

// Answer generates one answer. Errors: the model's error, wrapped.
func (a *LMAnswerer) Answer(ctx context.Context, question string, contexts []string) (string, error) {
	n := a.MaxNewTokens
	if n <= 0 {
		n = 20
	}
	outs, errs := a.LM.Generate(ctx, []string{FillTemplate(a.Template, question, contexts)}, lm.Options{MaxNewTokens: n})
	if len(outs) != 1 || len(errs) != 1 {
		return "", fmt.Errorf("%s answer: model returned %d answers for 1 prompt", a.LM.Name(), len(outs))
	}
	if errors.Is(errs[0], lm.ErrEmpty) {
		return "", nil
	}
	if errs[0] != nil {
		return "", fmt.Errorf("%s answer: %w", a.LM.Name(), errs[0])
	}
	if len(outs[0]) == 0 {
		return "", fmt.Errorf("%s answer: model returned no text", a.LM.Name())
	}
	return strings.TrimSpace(outs[0][0]), nil
}

// Chat is the part of *openai.Client the chat adapters need: one user
// message (and an optional system message) → the first choice's text, with
// the client's timeouts, retries and backoff; an empty answer is an error.
type Chat interface {
	ChatText(ctx context.Context, system, user string, maxTokens int, temperature float64) (string, error)
}

// ChatAnswerer answers through an OpenAI-compatible chat server: System as
// the system message, the filled Template as the user message.
type ChatAnswerer struct {
	Client      Chat
	System      string  // optional system message
	Template    string  // "" means DefaultTemplate
	MaxTokens   int     // default 256
	Temperature float64 // default 0 (greedy)
}

// Answer asks the server once (retries are the client's). Errors: the
// client's error, wrapped.
func (a *ChatAnswerer) Answer(ctx context.Context, question string, contexts []string) (string, error) {
	mt := a.MaxTokens
	if mt <= 0 {
		mt = 256
	}
	s, err := a.Client.ChatText(ctx, a.System, FillTemplate(a.Template, question, contexts), mt, a.Temperature)
	if err != nil {
		return "", fmt.Errorf("chat answer: %w", err)
	}
	return strings.TrimSpace(s), nil
}
