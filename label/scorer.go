package label

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ragforge/ragforge/models/openai"
)

// Scorer returns the natural-log probabilities log p(target token | prompt,
// earlier target tokens), one per target token, of a language model.
// Name identifies the model and its settings; it keys the score cache, so two
// scorers that may disagree must have different names.
type Scorer interface {
	Name() string
	TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error)
}

// Perplexity is exp(-mean(logprobs)) over natural-log token probabilities
// (HF convention: exp of the mean token cross-entropy). Errors: no tokens, or a
// NaN / +Inf log-probability.
func Perplexity(logprobs []float64) (float64, error) {
	if len(logprobs) == 0 {
		return 0, errors.New("perplexity of zero tokens")
	}
	var sum float64
	for i, lp := range logprobs {
		if math.IsNaN(lp) || math.IsInf(lp, 1) {
			return 0, fmt.Errorf("token %d: log-probability %v", i, lp)
		}
		sum += lp
	}
	return math.Exp(-sum / float64(len(logprobs))), nil
}

// Seq2SeqLM is the part of a seq2seq model a LocalT5Scorer needs;
// *t5.Model implements it (teacher-forced per-token log p of labels, -100
// skipped; inputIDs, mask [B, L], labels [B, T]).
type Seq2SeqLM interface {
	TokenLogProbs(inputIDs, mask, labels [][]int) ([][]float32, error)
}

// Encoder turns text into token ids; addSpecial appends eos (HF T5Tokenizer).
// *sentencepiece.T5 implements it.
type Encoder interface {
	Encode(text string, addSpecial bool) []int
}

// LocalT5Scorer scores with a local seq2seq model: the prompt is the encoder
// input, the target the decoder labels, both tokenized with eos appended (HF
// T5Tokenizer(text) / T5ForConditionalGeneration(labels=...)). The returned
// log-probabilities include the final eos, as HF's loss does.
type LocalT5Scorer struct {
	ID        string // scorer name (cache key), e.g. "t5:/models/flan-t5-base"
	Model     Seq2SeqLM
	Tokenizer Encoder
	// MaxInputTokens truncates the encoder input (eos kept last), as HF
	// truncation=True with model_max_length; default 512 (Flan-T5).
	MaxInputTokens int
	// MaxTargetTokens truncates the labels the same way; default 512.
	MaxTargetTokens int
}

// NewLocalT5Scorer returns a LocalT5Scorer named "t5:" + name with the
// default 512-token limits.
func NewLocalT5Scorer(name string, model Seq2SeqLM, tok Encoder) *LocalT5Scorer {
	return &LocalT5Scorer{ID: "t5:" + name, Model: model, Tokenizer: tok, MaxInputTokens: 512, MaxTargetTokens: 512}
}

// Name returns s.ID.
func (s *LocalT5Scorer) Name() string { return s.ID }

// TargetLogProbs runs one teacher-forced pass (batch 1). Errors: an empty
// target, or the model's error.
func (s *LocalT5Scorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
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
func (s *LocalT5Scorer) Tokens(prompt, target string) (input, labels []int) {
	return truncate(s.Tokenizer.Encode(prompt, true), s.MaxInputTokens), truncate(s.Tokenizer.Encode(target, true), s.MaxTargetTokens)
}

// truncate keeps the first n-1 ids and the last (eos) when len(ids) > n > 0.
func truncate(ids []int, n int) []int {
	if n <= 0 || len(ids) <= n {
		return ids
	}
	return append(ids[:n-1:n-1], ids[len(ids)-1])
}

// HTTPScorer scores with an OpenAI-compatible /v1/completions server in
// one of two forms:
//
//   - decoder-only (vLLM and other echo servers): one request on prompt +
//     Separator + target with echo=true, logprobs=0, max_tokens=1 (see
//     openai.Client.TargetLogprobs); the target's tokens are those after the
//     prompt.
//   - encoder-decoder (Seq2Seq; ragforge serve with a T5 generator): one
//     request with the encoder_input extension, encoder_input=prompt and
//     prompt=target (openai.Client.Seq2SeqLogprobs): the server scores the
//     target as decoder labels given the prompt as encoder input, exactly
//     as LocalT5Scorer does locally (no separator; the final </s> counts).
//
// Detect picks the form from the server. Timeouts, retries with backoff and
// the concurrency limit are the Client's Options.
//
// A server that returns log-probabilities of generated tokens only (llama.cpp
// server, Ollama) makes every call fail with an error wrapping
// openai.ErrNoPromptLogprobs; PerplexityLabeler stops on it.
type HTTPScorer struct {
	Client    *openai.Client
	Separator string // between prompt and target (decoder-only form); NewHTTPScorer sets " "
	Seq2Seq   bool   // use the encoder_input form
}

// NewHTTPScorer returns an HTTPScorer with Separator " " in the
// decoder-only form; call Detect to let the server choose.
func NewHTTPScorer(c *openai.Client) *HTTPScorer { return &HTTPScorer{Client: c, Separator: " "} }

// Detect sets Seq2Seq when the server honours the encoder_input extension:
// it sends one tiny scoring request; an answer carrying
// encoder_input_tokens means yes, an answer without it or a 400 (a server
// refusing the field) means no. Errors: transport errors and other HTTP
// failures.
func (s *HTTPScorer) Detect(ctx context.Context) error {
	_, err := s.Client.Seq2SeqLogprobs(ctx, "a", "a")
	var se *openai.StatusError
	switch {
	case err == nil:
		s.Seq2Seq = true
	case errors.Is(err, openai.ErrNoEncoderInput), errors.Is(err, openai.ErrNoPromptLogprobs),
		errors.As(err, &se) && se.Code >= 400 && se.Code < 500 && se.Code != 401 && se.Code != 403 && se.Code != 404:
		s.Seq2Seq = false
	default:
		return fmt.Errorf("scorer %s: probe encoder_input: %w", s.Client.BaseURL(), err)
	}
	return nil
}

// Name is "http:<base url>/<model>", plus "|seq2seq" in the
// encoder-decoder form and the separator when it is not " ".
func (s *HTTPScorer) Name() string {
	n := "http:" + s.Client.BaseURL() + "/" + s.Client.Model()
	if s.Seq2Seq {
		return n + "|seq2seq"
	}
	if s.Separator != " " {
		n += fmt.Sprintf("|sep=%q", s.Separator)
	}
	return n
}

// TargetLogProbs returns the log-probabilities of the tokens of the target
// (Separator+target in the decoder-only form) given prompt.
func (s *HTTPScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	if strings.TrimSpace(target) == "" {
		return nil, fmt.Errorf("%s: empty target", s.Name())
	}
	var lp []float64
	var err error
	if s.Seq2Seq {
		lp, err = s.Client.Seq2SeqLogprobs(ctx, prompt, target)
	} else {
		lp, err = s.Client.TargetLogprobs(ctx, prompt, s.Separator+target)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(), err)
	}
	return lp, nil
}
