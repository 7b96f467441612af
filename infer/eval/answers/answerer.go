package answers

import (
	"context"
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/models/t5"
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

// Generator is the part of *t5.Model a T5Answerer needs: greedy or sampled
// decoding of inputIDs, mask [B, L] to ids [B, 1+steps] (column 0 is the
// decoder start token).
type Generator interface {
	Generate(inputIDs, mask [][]int, opt t5.GenerateOptions) ([][]int, error)
}

// TextTokenizer encodes (addSpecial appends eos) and decodes (skipSpecial
// drops pad/eos) T5 ids; *sentencepiece.T5 implements it.
type TextTokenizer interface {
	Encode(text string, addSpecial bool) []int
	Decode(ids []int, skipSpecial bool) string
}

// T5Answerer answers with a local seq2seq model (Flan-T5): the filled
// Template is tokenized with eos, truncated to MaxInputTokens (first
// MaxInputTokens-1 ids and eos, HF truncation=True), decoded with Gen and
// detokenized without special tokens, trimmed.
type T5Answerer struct {
	Model          Generator
	Tokenizer      TextTokenizer
	Template       string             // "" means DefaultTemplate
	MaxInputTokens int                // default 512 (Flan-T5)
	Gen            t5.GenerateOptions // MaxNewTokens 0 means 20 (HF default); greedy unless DoSample
}

// Answer generates one answer (batch 1). Errors: the model's error, wrapped.
func (a *T5Answerer) Answer(ctx context.Context, question string, contexts []string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ids := a.Tokenizer.Encode(FillTemplate(a.Template, question, contexts), true)
	n := a.MaxInputTokens
	if n <= 0 {
		n = 512
	}
	if len(ids) > n {
		ids = append(ids[:n-1:n-1], ids[len(ids)-1])
	}
	mask := make([]int, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	out, err := a.Model.Generate([][]int{ids}, [][]int{mask}, a.Gen)
	if err != nil {
		return "", fmt.Errorf("t5 answer: %w", err)
	}
	if len(out) != 1 || len(out[0]) == 0 {
		return "", fmt.Errorf("t5 answer: model returned %d rows", len(out))
	}
	return strings.TrimSpace(a.Tokenizer.Decode(out[0][1:], true)), nil
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
