package openai

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// CompletionRequest is the body of POST /v1/completions (OpenAI legacy
// completions, as vLLM and ragforge serve implement it).
type CompletionRequest struct {
	Model       string   `json:"model"`
	Prompt      string   `json:"prompt"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Logprobs    *int     `json:"logprobs,omitempty"` // number of top alternatives; 0 or more asks for token log-probabilities
	Echo        bool     `json:"echo,omitempty"`     // return the prompt tokens (with their log-probabilities) before the completion
	Stop        []string `json:"stop,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	// PromptLogprobs is vLLM's extension: log-probabilities of the prompt tokens.
	PromptLogprobs *int `json:"prompt_logprobs,omitempty"`
	// EncoderInput is ragforge serve's extension for encoder-decoder
	// models: with it, Prompt is the decoder target, scored teacher-forced
	// given EncoderInput as the encoder input (echo with logprobs, max_tokens
	// 0). A server honouring it says so with EncoderInputTokens in the
	// answer; one that ignores it (vLLM) does not.
	EncoderInput *string `json:"encoder_input,omitempty"`
}

// Logprobs is the completions "logprobs" object. TokenLogprobs[i] is the
// natural-log probability of Tokens[i] (nil for the first prompt token, which
// has no context); TextOffset[i] is the character offset of Tokens[i] in
// prompt+completion.
type Logprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs,omitempty"`
	TextOffset    []int                `json:"text_offset"`
}

// CompletionChoice is one choice of a completions answer.
type CompletionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	// PromptLogprobs is vLLM's extension: one map token-id → {logprob, ...} per
	// prompt token, the first null.
	PromptLogprobs []map[string]PromptLogprob `json:"prompt_logprobs,omitempty"`
}

// PromptLogprob is one entry of vLLM's prompt_logprobs maps.
type PromptLogprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         *int    `json:"rank,omitempty"`
	DecodedToken string  `json:"decoded_token,omitempty"`
}

// Usage is the token accounting of an answer.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// CompletionResponse is the answer of POST /v1/completions.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"` // Unix seconds
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage"` // null in stream chunks but the last
	// EncoderInputTokens is set by a server that honoured EncoderInput:
	// the encoder tokens it scored the prompt against.
	EncoderInputTokens int `json:"encoder_input_tokens,omitempty"`
}

// Completions calls POST /v1/completions.
func (c *Client) Completions(ctx context.Context, req CompletionRequest) (*CompletionResponse, error) {
	if req.Model == "" {
		req.Model = c.opt.Model
	}
	var out CompletionResponse
	if err := c.post(ctx, "/completions", req, &out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, fmt.Errorf("POST %s/completions: answer has no choices", c.base)
	}
	return &out, nil
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
	TopP        *float64  `json:"top_p,omitempty"`
	Seed        *int64    `json:"seed,omitempty"`
	Stop        []string  `json:"stop,omitempty"`
	// TopK is vLLM's top_k extension (not in OpenAI's API); nil: not sent.
	TopK *int `json:"top_k,omitempty"`
}

// ChatChoice is one choice of a chat answer.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      Message       `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

// ChatLogprobs is a chat choice's "logprobs": one entry per generated token.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatTokenLogprob is a token's log-probability with its UTF-8 bytes and,
// when top_logprobs is asked, the most likely alternatives.
type ChatTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []ChatTokenLogprob `json:"top_logprobs"`
}

// ChatResponse is the answer of POST /v1/chat/completions.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"` // Unix seconds
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
}

// ChatChunk is one server-sent event of a streamed chat answer
// (object "chat.completion.chunk"); the usage chunk of
// stream_options.include_usage has no choices.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage"`
}

// ChatChunkChoice is a choice's delta in a ChatChunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ChatDelta is the new part of a streamed message.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// Chat calls POST /v1/chat/completions.
func (c *Client) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	if req.Model == "" {
		req.Model = c.opt.Model
	}
	var out ChatResponse
	if err := c.post(ctx, "/chat/completions", req, &out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, fmt.Errorf("POST %s/chat/completions: answer has no choices", c.base)
	}
	return &out, nil
}

// ChatText sends one user message (and an optional system message) and
// returns the first choice's text. An empty or non-UTF-8 answer is an error,
// so callers can count it per item.
func (c *Client) ChatText(ctx context.Context, system, user string, maxTokens int, temperature float64) (string, error) {
	var msgs []Message
	if system != "" {
		msgs = append(msgs, Message{Role: "system", Content: system})
	}
	msgs = append(msgs, Message{Role: "user", Content: user})
	resp, err := c.Chat(ctx, ChatRequest{Messages: msgs, MaxTokens: maxTokens, Temperature: &temperature})
	if err != nil {
		return "", err
	}
	text := resp.Choices[0].Message.Content
	// encoding/json turns invalid UTF-8 into U+FFFD, so that is what a server
	// sending broken bytes looks like here.
	if !utf8.ValidString(text) || strings.ContainsRune(text, utf8.RuneError) {
		return "", ErrInvalidUTF8
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%w (finish_reason %q)", ErrEmptyAnswer, resp.Choices[0].FinishReason)
	}
	return text, nil
}

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

// EmbeddingData is one embedding of an answer.
type EmbeddingData struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// EmbeddingResponse is the answer of POST /v1/embeddings.
type EmbeddingResponse struct {
	Object string          `json:"object"`
	Model  string          `json:"model"`
	Data   []EmbeddingData `json:"data"`
	Usage  EmbeddingUsage  `json:"usage"`
}

// EmbeddingUsage is the token accounting of an embeddings answer.
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// Embeddings calls POST /v1/embeddings and returns one vector per input, in
// input order.
func (c *Client) Embeddings(ctx context.Context, inputs []string) ([][]float32, error) {
	var out EmbeddingResponse
	if err := c.post(ctx, "/embeddings", EmbeddingRequest{Model: c.opt.Model, Input: inputs}, &out); err != nil {
		return nil, err
	}
	if len(out.Data) != len(inputs) {
		return nil, fmt.Errorf("POST %s/embeddings: %d vectors for %d inputs", c.base, len(out.Data), len(inputs))
	}
	vecs := make([][]float32, len(inputs))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(inputs) {
			return nil, fmt.Errorf("POST %s/embeddings: index %d out of range", c.base, d.Index)
		}
		vecs[d.Index] = d.Embedding
	}
	return vecs, nil
}

// ErrNoPromptLogprobs reports a server that returned log-probabilities of
// generated tokens only (llama.cpp server, Ollama): a perplexity computed from
// them would be wrong.
var ErrNoPromptLogprobs = fmt.Errorf("server returned no log-probabilities for the prompt tokens (llama.cpp server and Ollama return them for generated tokens only); use a server that supports echo with logprobs, such as vLLM or ragforge serve")

// TargetLogprobs returns the natural-log probabilities of the tokens of
// target given prompt, from one completions call on prompt+target with
// echo=true, logprobs=0, max_tokens=1 (vLLM's and ragforge serve's
// convention). Tokens that end after the prompt's last character belong to
// the target; a token straddling the boundary counts for the target.
//
// Errors: ErrNoPromptLogprobs when the answer covers fewer tokens than the
// echoed text needs (the returned offsets must start at 0 and the tokens must
// spell prompt+target), or when a target token has a null log-probability.
func (c *Client) TargetLogprobs(ctx context.Context, prompt, target string) ([]float64, error) {
	zero := 0
	text := prompt + target
	resp, err := c.Completions(ctx, CompletionRequest{Prompt: text, MaxTokens: 1, Echo: true, Logprobs: &zero})
	if err != nil {
		return nil, err
	}
	return TargetFromEcho(resp.Choices[0].Logprobs, prompt, text)
}

// TargetFromEcho picks the target's log-probabilities out of the echoed
// logprobs of text = prompt + target: tokens that end after the prompt's
// last character belong to the target (a token straddling the boundary
// counts for the target); tokens past the text (generated) are ignored.
// Errors: ErrNoPromptLogprobs when the tokens do not spell text or a target
// token has a null log-probability; no target token.
func TargetFromEcho(lp *Logprobs, prompt, text string) ([]float64, error) {
	target := text[len(prompt):]
	if lp == nil || len(lp.Tokens) == 0 || len(lp.TokenLogprobs) != len(lp.Tokens) {
		return nil, ErrNoPromptLogprobs
	}
	// The echoed tokens must spell the text we sent (plus at most the
	// generated tail), after a leading special token without a
	// log-probability that the text does not hold (vLLM echoes Llama 3's
	// "<|begin_of_text|>").
	toks, lps := lp.Tokens, lp.TokenLogprobs
	if !strings.HasPrefix(strings.Join(toks, ""), text) && lps[0] == nil && strings.HasPrefix(strings.Join(toks[1:], ""), text) {
		toks, lps = toks[1:], lps[1:]
	}
	if !strings.HasPrefix(strings.Join(toks, ""), text) {
		return nil, fmt.Errorf("%w (the %d returned tokens do not spell the %d-byte prompt)", ErrNoPromptLogprobs, len(lp.Tokens), len(text))
	}
	// Offsets are in characters; convert the boundary to characters.
	boundary := utf8.RuneCountInString(prompt)
	textChars := utf8.RuneCountInString(text)
	// Offsets come from the tokens themselves (verified above to spell the
	// text), so servers that omit text_offset work too.
	var out []float64
	off := 0
	for i, tok := range toks {
		start := off
		off += utf8.RuneCountInString(tok)
		if off <= boundary || start >= textChars {
			continue // prompt token, or a generated token past the text
		}
		if lps[i] == nil {
			return nil, fmt.Errorf("%w (target token %d %q has no log-probability)", ErrNoPromptLogprobs, i, tok)
		}
		out = append(out, *lps[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no target tokens found in the answer for a %d-character target", utf8.RuneCountInString(target))
	}
	return out, nil
}

// ErrNoEncoderInput reports a server that did not honour the encoder_input
// extension (it scored the prompt alone).
var ErrNoEncoderInput = errors.New("server did not honour encoder_input (no encoder_input_tokens in the answer)")

// Seq2SeqLogprobs returns the natural-log probabilities of every token of
// target (the decoder labels, ending with the end-of-sequence token) given
// encoderInput as the encoder input, from one completions call with the
// encoder_input extension: prompt=target, echo=true, logprobs=0,
// max_tokens=0. Errors: ErrNoEncoderInput when the server ignored the
// extension, ErrNoPromptLogprobs when a token has no log-probability.
func (c *Client) Seq2SeqLogprobs(ctx context.Context, encoderInput, target string) ([]float64, error) {
	zero := 0
	resp, err := c.Completions(ctx, CompletionRequest{Prompt: target, MaxTokens: 0, Echo: true, Logprobs: &zero, EncoderInput: &encoderInput})
	if err != nil {
		return nil, err
	}
	if resp.EncoderInputTokens <= 0 {
		return nil, ErrNoEncoderInput
	}
	lp := resp.Choices[0].Logprobs
	if lp == nil || len(lp.TokenLogprobs) == 0 {
		return nil, ErrNoPromptLogprobs
	}
	out := make([]float64, len(lp.TokenLogprobs))
	for i, v := range lp.TokenLogprobs {
		if v == nil {
			return nil, fmt.Errorf("%w (target token %d has no log-probability)", ErrNoPromptLogprobs, i)
		}
		out[i] = *v
	}
	return out, nil
}
