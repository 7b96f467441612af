package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// prompt is one prompt of a completions request: text or token ids.
type prompt struct {
	text string
	ids  []int
}

// parsePrompt accepts a string, a list of strings, a list of token ids or
// a list of lists of token ids.
func parsePrompt(raw json.RawMessage) ([]prompt, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fieldError("prompt", "missing")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []prompt{{text: one}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		out := make([]prompt, len(texts))
		for i, t := range texts {
			out[i] = prompt{text: t}
		}
		return nonEmpty(out)
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return nonEmpty([]prompt{{ids: ids}})
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil {
		out := make([]prompt, len(lists))
		for i, l := range lists {
			out[i] = prompt{ids: l}
		}
		return nonEmpty(out)
	}
	return nil, fieldError("prompt", "want a string, a list of strings, a list of token ids or a list of lists of token ids")
}

func nonEmpty(ps []prompt) ([]prompt, error) {
	if len(ps) == 0 {
		return nil, fieldError("prompt", "empty list")
	}
	for i, p := range ps {
		if p.text == "" && len(p.ids) == 0 && p.ids != nil {
			return nil, fieldError("prompt", "entry %d is empty", i)
		}
		if p.ids != nil && len(p.ids) == 0 {
			return nil, fieldError("prompt", "entry %d is empty", i)
		}
	}
	return ps, nil
}

// completionBody is POST /v1/completions as the official clients and vLLM
// send it, plus ragforge's encoder_input (see lm.T5.Seq2SeqScore).
type completionBody struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	sampling
	Logprobs       *int    `json:"logprobs"`
	Echo           bool    `json:"echo"`
	PromptLogprobs *int    `json:"prompt_logprobs"` // vLLM
	EncoderInput   *string `json:"encoder_input"`   // ragforge
	BestOf         *int    `json:"best_of"`
	Suffix         *string `json:"suffix"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	if s.c.Local == nil {
		return notAvailable("the local generator (completions)")
	}
	var req completionBody
	if err := decodeOpenAI(r, &req); err != nil {
		return err
	}
	l := s.c.Local
	if err := s.checkModel(req.Model, l.Name(), "completions"); err != nil {
		return err
	}
	prompts, opt, n, top, err := req.params()
	if err != nil {
		return err
	}
	c := &completionRun{l: l, req: &req, top: top, id: fmt.Sprintf("cmpl-%d", s.reqID.Load()), created: time.Now().Unix()}
	resp := c.response(nil)
	resp.Usage = &openai.Usage{}
	if req.EncoderInput != nil {
		return s.seq2seqCompletion(w, r, &req, prompts, n, top, &resp)
	}
	if req.Stream {
		c.st = newSSE(w)
	}
	for pi, p := range prompts {
		if p.text == "" && p.ids == nil {
			return fieldError("prompt", "entry %d is empty", pi)
		}
		for j := range n {
			idx := pi*n + j
			o := opt
			o.Seed = opt.Seed + int64(j) // n samples differ when sampling
			var ch openai.CompletionChoice
			var pt, gt int
			if req.Echo || req.PromptLogprobs != nil {
				if err := s.checkEcho(p, opt, n); err != nil {
					return err
				}
				ch, pt, gt, err = c.echo(r.Context(), p, o)
			} else {
				ch, pt, gt, err = c.generate(r.Context(), p, o, idx)
			}
			if err != nil {
				return err
			}
			ch.Index = idx
			if j == 0 {
				resp.Usage.PromptTokens += pt
			}
			resp.Usage.CompletionTokens += gt
			resp.Choices = append(resp.Choices, ch)
		}
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	if c.st != nil {
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			u := c.response([]openai.CompletionChoice{})
			u.Usage = resp.Usage
			if err := c.st.send(u); err != nil {
				return err
			}
		}
		return c.st.done()
	}
	writeJSON(w, 200, resp)
	return nil
}

// params validates a completions request: its prompts, the decoding
// options, n and top (the logprobs alternatives per token, -1 for none).
func (req *completionBody) params() (prompts []prompt, opt lm.GenOptions, n, top int, err error) {
	if prompts, err = parsePrompt(req.Prompt); err != nil {
		return
	}
	if opt, n, err = req.options(req.MaxTokens, "max_tokens"); err != nil {
		return
	}
	fail := func(e error) ([]prompt, lm.GenOptions, int, int, error) { return nil, opt, 0, 0, e }
	if req.BestOf != nil && *req.BestOf != n {
		return fail(unsupported("best_of", "only equal to n is supported"))
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return fail(unsupported("suffix", "not supported"))
	}
	if len(prompts)*n > maxChoices {
		return fail(fieldError("n", "%d prompts × n %d = %d choices, at most %d per request", len(prompts), n, len(prompts)*n, maxChoices))
	}
	top = -1
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxTopLogs {
			return fail(fieldError("logprobs", "%d outside [0, %d]", *req.Logprobs, maxTopLogs))
		}
		top = *req.Logprobs
	}
	if req.PromptLogprobs != nil && *req.PromptLogprobs != 0 {
		return fail(unsupported("prompt_logprobs", "only 0 (the prompt tokens' own log-probabilities) is supported; use echo with logprobs for alternatives"))
	}
	if req.Stream && (top >= 0 || req.PromptLogprobs != nil || req.Echo) {
		return fail(unsupported("stream", "streaming with logprobs, prompt_logprobs or echo is not supported"))
	}
	return prompts, opt, n, top, nil
}

// completionRun is one /v1/completions request being answered by the
// local generator, streamed when st is set.
type completionRun struct {
	l       *LocalLM
	req     *completionBody
	top     int // logprobs alternatives per token; -1: no logprobs
	id      string
	created int64
	st      *sse
}

// response is the response (or stream chunk) frame with these choices.
func (c *completionRun) response(choices []openai.CompletionChoice) openai.CompletionResponse {
	return openai.CompletionResponse{ID: c.id, Object: "text_completion", Created: c.created, Model: c.l.Name(), Choices: choices}
}

// checkEcho refuses what echo and prompt_logprobs cannot do (they score
// the text prompt and decode greedily) and a prompt over the token limit.
func (s *Server) checkEcho(p prompt, opt lm.GenOptions, n int) error {
	if p.ids != nil {
		return unsupported("echo", "echo and prompt_logprobs need a text prompt, not token ids")
	}
	if n > 1 || len(opt.Stop) > 0 || opt.Temperature > 0 {
		return unsupported("echo", "echo and prompt_logprobs decode greedily: n > 1, stop and temperature are not supported with them")
	}
	return s.checkTokens(len(p.text)/2, "prompt")
}

// echo answers one choice of echo and/or prompt_logprobs: the prompt's
// scores (lm.Local.Echo) and, with echo, the prompt followed by its greedy
// continuation of up to o.MaxTokens tokens.
func (c *completionRun) echo(ctx context.Context, p prompt, o lm.GenOptions) (ch openai.CompletionChoice, promptTokens, genTokens int, err error) {
	maxTok := o.MaxTokens
	if !c.req.Echo {
		maxTok = 0 // prompt_logprobs alone: score the prompt only
	}
	lp, completion, pt, gt, err := c.l.Echo(ctx, p.text, maxTok, max(c.top, 0))
	if err != nil {
		return ch, 0, 0, err
	}
	if c.req.PromptLogprobs != nil {
		ch.PromptLogprobs = promptLogprobs(c.l, p.text, lp)
	}
	if c.req.Echo {
		ch.Text = p.text + completion
		if c.top >= 0 {
			ch.Logprobs = lp
		}
	} else {
		ch.Text = completion
	}
	ch.FinishReason = "length"
	return ch, pt, gt, nil
}

// generate answers one choice by generation from the prompt, streaming
// its text as choice idx when the request streams.
func (c *completionRun) generate(ctx context.Context, p prompt, o lm.GenOptions, idx int) (ch openai.CompletionChoice, promptTokens, genTokens int, err error) {
	ids := p.ids
	if ids == nil {
		ids = c.l.PromptIDs(p.text)
	}
	if c.req.MaxTokens == nil {
		o.MaxTokens = c.l.defaultMaxTokens(len(ids), o.MaxTokens)
	}
	if c.st != nil {
		o.OnText = func(delta string) error {
			return c.st.send(c.response([]openai.CompletionChoice{{Index: idx, Text: delta}}))
		}
	}
	o.Logprobs = c.top
	g, err := c.l.GenerateIDs(ctx, ids, o)
	if err != nil {
		return ch, 0, 0, err
	}
	ch.Text, ch.FinishReason, ch.Logprobs = g.Text, g.Finish, g.Logprobs
	if ch.Logprobs == nil && c.top >= 0 {
		ch.Logprobs = &openai.Logprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TextOffset: []int{}}
	}
	if c.st != nil {
		if err := c.st.send(c.response([]openai.CompletionChoice{{Index: idx, FinishReason: g.Finish}})); err != nil {
			return ch, 0, 0, err
		}
	}
	return ch, g.PromptTokens, g.GenTokens, nil
}

// seq2seqCompletion answers the encoder_input extension: each prompt is a
// decoder target scored given encoder_input (lm.T5.Seq2SeqScore).
// It needs echo (the scored target is the answer's text), no generation
// (max_tokens 0) and n 1; logprobs or prompt_logprobs select the forms of
// the scores returned.
func (s *Server) seq2seqCompletion(w http.ResponseWriter, r *http.Request, req *completionBody, prompts []prompt, n, top int, resp *openai.CompletionResponse) error {
	switch {
	case !req.Echo:
		return unsupported("encoder_input", "needs echo: true (the prompt is the decoder target that is scored)")
	case req.MaxTokens == nil || *req.MaxTokens != 0:
		return unsupported("encoder_input", "needs max_tokens: 0 (the target is scored, nothing is generated)")
	case n != 1:
		return unsupported("encoder_input", "needs n 1")
	case req.Stream:
		return unsupported("encoder_input", "cannot be streamed")
	}
	if err := s.checkTokens(len(*req.EncoderInput)/2, "encoder_input"); err != nil {
		return err
	}
	l, ok := s.c.Local.Local.(*lm.T5)
	if !ok {
		return unsupported("encoder_input", "the local model is not encoder-decoder")
	}
	for i, p := range prompts {
		if p.ids != nil {
			return unsupported("prompt", "with encoder_input the prompt must be text")
		}
		if strings.TrimSpace(p.text) == "" {
			return fieldError("prompt", "entry %d is empty", i)
		}
		lp, enc, err := l.Seq2SeqScore(r.Context(), *req.EncoderInput, p.text, max(top, 0))
		if err != nil {
			return err
		}
		ch := openai.CompletionChoice{Index: i, Text: p.text, FinishReason: "length"}
		if top >= 0 {
			ch.Logprobs = lp
		}
		if req.PromptLogprobs != nil {
			ch.PromptLogprobs = make([]map[string]openai.PromptLogprob, len(lp.Tokens))
			ids := l.Tokenizer.Encode(p.text, true)
			for t := range lp.Tokens {
				key := fmt.Sprint(t)
				if t < len(ids) {
					key = fmt.Sprint(ids[t])
				}
				ch.PromptLogprobs[t] = map[string]openai.PromptLogprob{key: {Logprob: *lp.TokenLogprobs[t], DecodedToken: lp.Tokens[t]}}
			}
		}
		resp.Choices = append(resp.Choices, ch)
		resp.Usage.PromptTokens += len(lp.Tokens)
		resp.EncoderInputTokens += enc
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeJSON(w, 200, resp)
	return nil
}

// promptLogprobs is vLLM's prompt_logprobs of an echo: per prompt token a
// map token id → its log-probability and text, the first null.
func promptLogprobs(l *LocalLM, text string, lp *openai.Logprobs) []map[string]openai.PromptLogprob {
	ids := l.EchoIDs(text)
	if ids == nil {
		return nil
	}
	out := make([]map[string]openai.PromptLogprob, len(ids))
	for i, id := range ids {
		if i == 0 || i >= len(lp.TokenLogprobs) || lp.TokenLogprobs[i] == nil {
			continue
		}
		out[i] = map[string]openai.PromptLogprob{fmt.Sprint(id): {Logprob: *lp.TokenLogprobs[i], DecodedToken: lp.Tokens[i]}}
	}
	return out
}
