package lm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ragforge/ragforge/models/openai"
)

// OpenAI generates through an OpenAI-compatible /v1/chat/completions
// endpoint (Ollama, llama.cpp server, vLLM, ragforge serve): each prompt is
// one user message, sent once per requested text, with seed
// ItemSeed(opt.Seed, prompt)+k for text k (servers that honour "seed" are
// then reproducible). Stop strings and top_k (a vLLM extension) are sent to
// the server. Timeouts, retries with exponential backoff on 429/5xx/
// transport errors and the concurrency limit are those of Client
// (models/openai.Options).
//
// Per-item errors: an HTTP failure after the retries (e.g. 500, a timeout),
// an answer without choices, an empty or non-UTF-8 text (CheckText).
type OpenAI struct {
	Client *openai.Client
	// System is an optional system message.
	System string
}

// Name is "openai:<base url>#<model>".
func (g *OpenAI) Name() string {
	return "openai:" + g.Client.BaseURL() + "#" + g.Client.Model()
}

// Generate implements Generator; requests run concurrently up to the
// client's concurrency limit.
func (g *OpenAI) Generate(ctx context.Context, prompts []string, opt Options) ([][]string, []error) {
	n := opt.Texts()
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

func (g *OpenAI) one(ctx context.Context, prompt string, opt Options, seed int64) (string, error) {
	var msgs []openai.Message
	if g.System != "" {
		msgs = append(msgs, openai.Message{Role: "system", Content: g.System})
	}
	msgs = append(msgs, openai.Message{Role: "user", Content: prompt})
	req := openai.ChatRequest{Messages: msgs, MaxTokens: max(opt.MaxNewTokens, 0), Seed: &seed, Stop: opt.Stop}
	t := opt.Temperature
	req.Temperature = &t
	if opt.TopP > 0 && opt.TopP < 1 {
		p := opt.TopP
		req.TopP = &p
	}
	if opt.TopK > 0 {
		k := opt.TopK
		req.TopK = &k
	}
	resp, err := g.Client.Chat(ctx, req)
	if err != nil {
		return "", err
	}
	return CheckText(resp.Choices[0].Message.Content)
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
//     as T5Scorer does locally (no separator; the final </s> counts).
//
// Detect picks the form from the server. Timeouts, retries with backoff and
// the concurrency limit are the Client's Options.
//
// A server that returns log-probabilities of generated tokens only (llama.cpp
// server, Ollama) makes every call fail with an error wrapping
// openai.ErrNoPromptLogprobs; the perplexity labeler stops on it.
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
