package lm

import (
	"context"
	"fmt"
	"strings"
)

// Seq2SeqModel is the part of a seq2seq model a T5Scorer needs; *t5.Model
// implements it (teacher-forced per-token log p of labels, -100 skipped;
// inputIDs, mask [B, L], labels [B, T] → [B, T]).
type Seq2SeqModel interface {
	TokenLogProbs(inputIDs, mask, labels [][]int) ([][]float32, error)
}

// Encoder turns text into token ids; addSpecial appends eos (HF T5Tokenizer).
// *sentencepiece.T5 implements it.
type Encoder interface {
	Encode(text string, addSpecial bool) []int
}

// DefaultT5MaxTokens is Flan-T5's model_max_length, the default cut of
// encoder inputs and labels.
const DefaultT5MaxTokens = 512

// T5Scorer scores with a local seq2seq model: the prompt is the encoder
// input, the target the decoder labels, both tokenized with eos appended (HF
// T5Tokenizer(text) / T5ForConditionalGeneration(labels=...)). The returned
// log-probabilities include the final eos, as HF's loss does.
type T5Scorer struct {
	ID        string // scorer name (cache key), e.g. "t5:/models/flan-t5-base"
	Model     Seq2SeqModel
	Tokenizer Encoder
	// MaxInputTokens truncates the encoder input (eos kept last), as HF
	// truncation=True with model_max_length; default 512 (Flan-T5).
	MaxInputTokens int
	// MaxTargetTokens truncates the labels the same way; default 512.
	MaxTargetTokens int
}

// NewT5Scorer returns a T5Scorer named "t5:" + name with the default
// 512-token limits.
func NewT5Scorer(name string, model Seq2SeqModel, tok Encoder) *T5Scorer {
	return &T5Scorer{ID: "t5:" + name, Model: model, Tokenizer: tok, MaxInputTokens: DefaultT5MaxTokens, MaxTargetTokens: DefaultT5MaxTokens}
}

// Name returns s.ID.
func (s *T5Scorer) Name() string { return s.ID }

// TargetLogProbs runs one teacher-forced pass (batch 1). Errors: an empty
// target, or the model's error.
func (s *T5Scorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(target) == "" {
		return nil, fmt.Errorf("%s: empty target", s.ID)
	}
	in, lab := s.Tokens(prompt, target)
	mask := make([]int, len(in))
	for i := range mask {
		mask[i] = 1
	}
	lp, err := s.Model.TokenLogProbs([][]int{in}, [][]int{mask}, [][]int{lab})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.ID, err)
	}
	if len(lp) != 1 || len(lp[0]) != len(lab) {
		return nil, fmt.Errorf("%s: model returned %d rows for 1, %d log-probabilities for %d labels", s.ID, len(lp), len(lp[0]), len(lab))
	}
	out := make([]float64, len(lab))
	for i, v := range lp[0] {
		out[i] = float64(v)
	}
	return out, nil
}

// Tokens returns the encoder input and label ids TargetLogProbs scores:
// both texts tokenized with eos appended and truncated to MaxInputTokens /
// MaxTargetTokens (eos kept last).
func (s *T5Scorer) Tokens(prompt, target string) (input, labels []int) {
	return truncate(s.Tokenizer.Encode(prompt, true), s.MaxInputTokens), truncate(s.Tokenizer.Encode(target, true), s.MaxTargetTokens)
}

// truncate keeps the first n-1 ids and the last (eos) when len(ids) > n > 0.
func truncate(ids []int, n int) []int {
	if n <= 0 || len(ids) <= n {
		return ids
	}
	return append(ids[:n-1:n-1], ids[len(ids)-1])
}
