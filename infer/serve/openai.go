package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// The OpenAI-compatible endpoints follow the OpenAI API reference (and
// vLLM's extensions) as the official clients (openai-python, openai Node)
// send it. Every field of those requests is either honoured or refused with
// a 400 naming it: bodies are decoded strictly, fields with no effect here
// are accepted only at their neutral value. Limits:

const (
	maxGenTokens = 1024 // max_tokens / max_completion_tokens
	maxChoices   = 16   // prompts × n of one request
	maxTopLogs   = 20   // logprobs / top_logprobs (vLLM's limit)
)

// unknownFieldRE matches encoding/json's DisallowUnknownFields error.
var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]*)"`)

// decodeOpenAI decodes a body strictly; an unknown field is a 400 naming it.
func decodeOpenAI(r *http.Request, v any) error {
	err := decode(r, v, true)
	if re, ok := err.(*requestError); ok && re.code == 400 {
		if m := unknownFieldRE.FindStringSubmatch(re.msg); m != nil {
			return &requestError{code: 400, param: m[1], msg: fmt.Sprintf("field %q is not supported by this server", m[1])}
		}
	}
	return err
}

func unsupported(field, why string) error {
	return &requestError{code: 400, param: field, msg: fmt.Sprintf("field %q: %s", field, why)}
}

func fieldError(field, format string, args ...any) error {
	return &requestError{code: 400, param: field, msg: fmt.Sprintf("field %q: ", field) + fmt.Sprintf(format, args...)}
}

// neutral checks the fields accepted only at their no-op value.
func neutral(presence, frequency *float64, logitBias map[string]float64) error {
	if presence != nil && *presence != 0 {
		return unsupported("presence_penalty", "only 0 is supported")
	}
	if frequency != nil && *frequency != 0 {
		return unsupported("frequency_penalty", "only 0 is supported")
	}
	if len(logitBias) > 0 {
		return unsupported("logit_bias", "not supported")
	}
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// sampling are the decoding fields shared by completions and chat.
type sampling struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	N                *int               `json:"n"`
	Seed             *int64             `json:"seed"`
	Stop             json.RawMessage    `json:"stop"`
	Stream           bool               `json:"stream"`
	StreamOptions    *streamOptions     `json:"stream_options"`
	User             string             `json:"user"` // an end-user id; only logged
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
}

// options validates the shared fields into GenOptions (Logprobs -1) and n.
func (q *sampling) options(maxTokens *int, maxField string) (GenOptions, int, error) {
	opt := GenOptions{MaxTokens: 16, Logprobs: -1} // OpenAI's default max_tokens
	if maxTokens != nil {
		if *maxTokens < 0 || *maxTokens > maxGenTokens {
			return opt, 0, fieldError(maxField, "%d outside [0, %d]", *maxTokens, maxGenTokens)
		}
		opt.MaxTokens = *maxTokens
	}
	if t := q.Temperature; t != nil {
		if !(*t >= 0 && *t <= 2) {
			return opt, 0, fieldError("temperature", "%v outside [0, 2]", *t)
		}
		opt.Temperature = *t
	}
	if p := q.TopP; p != nil {
		if !(*p > 0 && *p <= 1) {
			return opt, 0, fieldError("top_p", "%v outside (0, 1]", *p)
		}
		opt.TopP = *p
	}
	if q.Seed != nil {
		opt.Seed = *q.Seed
	}
	n := 1
	if q.N != nil {
		if *q.N < 1 || *q.N > maxChoices {
			return opt, 0, fieldError("n", "%d outside [1, %d]", *q.N, maxChoices)
		}
		n = *q.N
	}
	stop, err := parseStop(q.Stop)
	if err != nil {
		return opt, 0, err
	}
	opt.Stop = stop
	if q.StreamOptions != nil && !q.Stream {
		return opt, 0, unsupported("stream_options", "only allowed with stream: true")
	}
	if err := neutral(q.PresencePenalty, q.FrequencyPenalty, q.LogitBias); err != nil {
		return opt, 0, err
	}
	return opt, n, nil
}

// parseStop accepts a string or a list of up to 4 non-empty strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, fieldError("stop", "empty string")
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fieldError("stop", "want a string or a list of strings")
	}
	if len(list) > 4 {
		return nil, fieldError("stop", "%d strings, at most 4", len(list))
	}
	for i, s := range list {
		if s == "" {
			return nil, fieldError("stop", "entry %d is empty", i)
		}
	}
	return list, nil
}

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
// send it, plus ragforge's encoder_input (see LocalLM.Seq2SeqScore).
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

// checkModel answers 404 model_not_found for a model the server does not
// list, 400 for a listed one that cannot do what (completions, embeddings);
// "" picks the default.
func (s *Server) checkModel(model, serving, what string) error {
	if model == "" || model == serving {
		return nil
	}
	for _, m := range s.modelList() {
		if m.ID == model {
			return &requestError{code: 400, param: "model", msg: fmt.Sprintf("model %q does not serve %s; use %q", model, what, serving)}
		}
	}
	return &requestError{code: 404, param: "model", errCode: "model_not_found", msg: fmt.Sprintf("The model %q does not exist (GET /v1/models lists the models served)", model)}
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
	prompts, err := parsePrompt(req.Prompt)
	if err != nil {
		return err
	}
	opt, n, err := req.options(req.MaxTokens, "max_tokens")
	if err != nil {
		return err
	}
	if req.BestOf != nil && *req.BestOf != n {
		return unsupported("best_of", "only equal to n is supported")
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return unsupported("suffix", "not supported")
	}
	if len(prompts)*n > maxChoices {
		return fieldError("n", "%d prompts × n %d = %d choices, at most %d per request", len(prompts), n, len(prompts)*n, maxChoices)
	}
	top := -1
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxTopLogs {
			return fieldError("logprobs", "%d outside [0, %d]", *req.Logprobs, maxTopLogs)
		}
		top = *req.Logprobs
	}
	if req.PromptLogprobs != nil && *req.PromptLogprobs != 0 {
		return unsupported("prompt_logprobs", "only 0 (the prompt tokens' own log-probabilities) is supported; use echo with logprobs for alternatives")
	}
	if req.Stream && (top >= 0 || req.PromptLogprobs != nil || req.Echo) {
		return unsupported("stream", "streaming with logprobs, prompt_logprobs or echo is not supported")
	}
	id := fmt.Sprintf("cmpl-%d", s.reqID.Load())
	created := time.Now().Unix()
	resp := openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: l.Name(), Usage: &openai.Usage{}}
	ctx := r.Context()
	if req.EncoderInput != nil {
		return s.seq2seqCompletion(w, r, &req, prompts, n, top, &resp)
	}
	var st *sse
	if req.Stream {
		st = newSSE(w)
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
			ch.Index = idx
			var pt, gt int
			switch {
			case req.Echo || req.PromptLogprobs != nil:
				if p.ids != nil {
					return unsupported("echo", "echo and prompt_logprobs need a text prompt, not token ids")
				}
				if n > 1 || len(opt.Stop) > 0 || opt.Temperature > 0 {
					return unsupported("echo", "echo and prompt_logprobs decode greedily: n > 1, stop and temperature are not supported with them")
				}
				maxTok := opt.MaxTokens
				if !req.Echo {
					maxTok = 0 // prompt_logprobs alone: score the prompt only
				}
				if err := s.checkTokens(len(p.text)/2, "prompt"); err != nil {
					return err
				}
				lp, completion, ptok, gtok, err := l.Echo(ctx, p.text, maxTok, max(top, 0))
				if err != nil {
					return err
				}
				pt, gt = ptok, gtok
				if req.PromptLogprobs != nil {
					ch.PromptLogprobs = promptLogprobs(l, p.text, lp)
				}
				if req.Echo {
					ch.Text = p.text + completion
					if top >= 0 {
						ch.Logprobs = lp
					}
				} else {
					ch.Text = completion
				}
				ch.FinishReason = "length"
			default:
				ids := p.ids
				if ids == nil {
					ids = l.PromptIDs(p.text)
				}
				if st != nil {
					o.OnText = func(delta string) error {
						return st.send(openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: l.Name(),
							Choices: []openai.CompletionChoice{{Index: idx, Text: delta}}})
					}
				}
				o.Logprobs = top
				g, err := l.GenerateIDs(ctx, ids, o)
				if err != nil {
					return err
				}
				pt, gt = g.PromptTokens, g.GenTokens
				ch.Text, ch.FinishReason, ch.Logprobs = g.Text, g.Finish, g.Logprobs
				if ch.Logprobs == nil && top >= 0 {
					ch.Logprobs = &openai.Logprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TextOffset: []int{}}
				}
				if st != nil {
					if err := st.send(openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: l.Name(),
						Choices: []openai.CompletionChoice{{Index: idx, FinishReason: g.Finish}}}); err != nil {
						return err
					}
				}
			}
			if j == 0 {
				resp.Usage.PromptTokens += pt
			}
			resp.Usage.CompletionTokens += gt
			resp.Choices = append(resp.Choices, ch)
		}
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	if st != nil {
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			if err := st.send(openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: l.Name(), Choices: []openai.CompletionChoice{}, Usage: resp.Usage}); err != nil {
				return err
			}
		}
		return st.done()
	}
	writeJSON(w, 200, resp)
	return nil
}

// seq2seqCompletion answers the encoder_input extension: each prompt is a
// decoder target scored given encoder_input (LocalLM.Seq2SeqScore).
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
	l := s.c.Local
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

// checkTokens bounds a text's work by Options.MaxRequestTokens before the
// model sees it (approx is a lower bound of its tokens).
func (s *Server) checkTokens(approx int, field string) error {
	if approx > s.opt.MaxRequestTokens {
		return &requestError{code: 413, param: field, msg: fmt.Sprintf("field %q: over the limit of %d tokens per request (max-request-tokens)", field, s.opt.MaxRequestTokens)}
	}
	return nil
}

// promptLogprobs is vLLM's prompt_logprobs of an echo: per prompt token a
// map token id → its log-probability and text, the first null.
func promptLogprobs(l *LocalLM, text string, lp *openai.Logprobs) []map[string]openai.PromptLogprob {
	sp, ok := l.Tokenizer.(*sentencepiece.T5)
	if !ok {
		return nil
	}
	toks := sp.SentencePiece().Encode(text)
	out := make([]map[string]openai.PromptLogprob, len(toks))
	for i, t := range toks {
		if i == 0 || i >= len(lp.TokenLogprobs) || lp.TokenLogprobs[i] == nil {
			continue
		}
		out[i] = map[string]openai.PromptLogprob{fmt.Sprint(t.ID): {Logprob: *lp.TokenLogprobs[i], DecodedToken: lp.Tokens[i]}}
	}
	return out
}

// chatMessage accepts content as a string or a list of text parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (m chatMessage) text(i int) (string, error) {
	field := fmt.Sprintf("messages[%d].content", i)
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", fieldError(field, "missing")
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(m.Content, &parts) != nil {
		return "", fieldError(field, "want a string or a list of content parts")
	}
	var b strings.Builder
	for j, raw := range parts {
		var p contentPart
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return "", unsupported(fmt.Sprintf("%s[%d]", field, j), fmt.Sprintf("want {\"type\": \"text\", \"text\": ...}: %v", err))
		}
		if p.Type != "text" {
			return "", unsupported(fmt.Sprintf("%s[%d].type", field, j), fmt.Sprintf("%q: only text parts are supported", p.Type))
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// chatBody is POST /v1/chat/completions as the official clients send it.
type chatBody struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	sampling
	Logprobs       bool `json:"logprobs"`
	TopLogprobs    *int `json:"top_logprobs"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// ChatPrompt is how chat messages become the T5 encoder input: the
// contents of all messages, in order, joined by a blank line (Flan-T5 has
// no chat template; roles are not written).
func ChatPrompt(msgs []openai.Message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	return strings.Join(parts, "\n\n")
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	if s.c.Local == nil {
		return notAvailable("the local generator (chat)")
	}
	var req chatBody
	if err := decodeOpenAI(r, &req); err != nil {
		return err
	}
	l := s.c.Local
	if err := s.checkModel(req.Model, l.Name(), "chat completions"); err != nil {
		return err
	}
	if len(req.Messages) == 0 {
		return fieldError("messages", "empty")
	}
	msgs := make([]openai.Message, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			return unsupported(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("%q: want system, developer, user or assistant", m.Role))
		}
		text, err := m.text(i)
		if err != nil {
			return err
		}
		msgs[i] = openai.Message{Role: m.Role, Content: text}
	}
	maxTok, maxField := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTok == nil {
		maxTok, maxField = req.MaxTokens, "max_tokens"
	} else if req.MaxTokens != nil && *req.MaxTokens != *maxTok {
		return unsupported("max_tokens", "differs from max_completion_tokens; send one")
	}
	opt, n, err := req.options(maxTok, maxField)
	if err != nil {
		return err
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type != "text" {
		return unsupported("response_format", fmt.Sprintf("type %q: only text is supported", req.ResponseFormat.Type))
	}
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			return unsupported("top_logprobs", "needs logprobs: true")
		}
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogs {
			return fieldError("top_logprobs", "%d outside [0, %d]", *req.TopLogprobs, maxTopLogs)
		}
	}
	if req.Logprobs {
		opt.Logprobs = 0
		if req.TopLogprobs != nil {
			opt.Logprobs = *req.TopLogprobs
		}
		if req.Stream {
			return unsupported("logprobs", "not supported with stream")
		}
	}
	id := fmt.Sprintf("chatcmpl-%d", s.reqID.Load())
	created := time.Now().Unix()
	ids := l.PromptIDs(ChatPrompt(msgs))
	resp := openai.ChatResponse{ID: id, Object: "chat.completion", Created: created, Model: l.Name()}
	var st *sse
	if req.Stream {
		st = newSSE(w)
	}
	chunk := func(c openai.ChatChunkChoice) error {
		return st.send(openai.ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: l.Name(), Choices: []openai.ChatChunkChoice{c}})
	}
	resp.Usage.PromptTokens = len(ids)
	for j := range n {
		o := opt
		o.Seed = opt.Seed + int64(j)
		if st != nil {
			empty := ""
			if err := chunk(openai.ChatChunkChoice{Index: j, Delta: openai.ChatDelta{Role: "assistant", Content: &empty}}); err != nil {
				return err
			}
			o.OnText = func(delta string) error {
				return chunk(openai.ChatChunkChoice{Index: j, Delta: openai.ChatDelta{Content: &delta}})
			}
		}
		g, err := l.GenerateIDs(r.Context(), ids, o)
		if err != nil {
			return err
		}
		resp.Usage.CompletionTokens += g.GenTokens
		ch := openai.ChatChoice{Index: j, Message: openai.Message{Role: "assistant", Content: g.Text}, FinishReason: g.Finish}
		if req.Logprobs {
			ch.Logprobs = chatLogprobs(g.Logprobs)
		}
		resp.Choices = append(resp.Choices, ch)
		if st != nil {
			fin := g.Finish
			if err := chunk(openai.ChatChunkChoice{Index: j, FinishReason: &fin}); err != nil {
				return err
			}
		}
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	if st != nil {
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			u := resp.Usage
			if err := st.send(openai.ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: l.Name(), Choices: []openai.ChatChunkChoice{}, Usage: &u}); err != nil {
				return err
			}
		}
		return st.done()
	}
	writeJSON(w, 200, resp)
	return nil
}

// chatLogprobs converts completions logprobs to the chat form.
func chatLogprobs(lp *openai.Logprobs) *openai.ChatLogprobs {
	out := &openai.ChatLogprobs{Content: []openai.ChatTokenLogprob{}}
	if lp == nil {
		return out
	}
	for i, tok := range lp.Tokens {
		e := openai.ChatTokenLogprob{Token: tok, Logprob: *lp.TokenLogprobs[i], Bytes: utf8Bytes(tok), TopLogprobs: []openai.ChatTokenLogprob{}}
		if i < len(lp.TopLogprobs) {
			for t, v := range lp.TopLogprobs[i] {
				e.TopLogprobs = append(e.TopLogprobs, openai.ChatTokenLogprob{Token: t, Logprob: v, Bytes: utf8Bytes(t)})
			}
			sort.Slice(e.TopLogprobs, func(a, b int) bool { return e.TopLogprobs[a].Logprob > e.TopLogprobs[b].Logprob })
		}
		out.Content = append(out.Content, e)
	}
	return out
}

func utf8Bytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// sse writes server-sent events: "data: <json>\n\n" per event, flushed,
// and "data: [DONE]\n\n" at the end (the OpenAI stream terminator).
type sse struct {
	w       http.ResponseWriter
	started bool
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w} }

func (s *sse) send(v any) error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(200)
		s.started = true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (s *sse) done() error {
	if !s.started {
		return s.send(struct{}{})
	}
	_, err := fmt.Fprint(s.w, "data: [DONE]\n\n")
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}

// embeddingBody is POST /v1/embeddings as the official clients send it
// (openai Node asks for base64 by default), plus ragforge's input_type
// ("document", the default, or "query", which adds the retriever's query
// instruction).
type embeddingBody struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
	InputType      string          `json:"input_type"`
}

// embeddingOut is one embedding: a float list, or base64 of the
// little-endian float32 bytes (encoding_format base64, as OpenAI).
type embeddingOut struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	if s.eng.enc == nil {
		return notAvailable("the retriever (embeddings)")
	}
	var req embeddingBody
	if err := decodeOpenAI(r, &req); err != nil {
		return err
	}
	name := s.eng.enc.Name()
	if err := s.checkModel(req.Model, name, "embeddings"); err != nil {
		return err
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err2 := json.Unmarshal(req.Input, &one); err2 != nil {
			var ids []json.RawMessage
			if json.Unmarshal(req.Input, &ids) == nil && len(ids) > 0 && !bytes.HasPrefix(bytes.TrimSpace(ids[0]), []byte(`"`)) {
				return unsupported("input", "token-id input is not supported: send text")
			}
			return fieldError("input", "want a string or a list of strings")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 {
		return fieldError("input", "empty")
	}
	if len(inputs) > s.opt.MaxSnippets {
		return &requestError{code: 413, param: "input", msg: fmt.Sprintf("field %q: %d texts, over the limit of %d per request (max-snippets)", "input", len(inputs), s.opt.MaxSnippets)}
	}
	for i, in := range inputs {
		if in == "" {
			return fieldError("input", "entry %d is empty", i)
		}
	}
	dim := s.eng.enc.Dim()
	if req.Dimensions != nil && *req.Dimensions != dim {
		return unsupported("dimensions", fmt.Sprintf("%d: this model's embeddings have %d dimensions and are not truncated", *req.Dimensions, dim))
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return fieldError("encoding_format", "%q, want float or base64", req.EncodingFormat)
	}
	var vecs [][]float32
	var err error
	switch req.InputType {
	case "", "document":
		vecs, err = s.benc.docsCtx(r.Context(), inputs)
	case "query":
		vecs, err = s.benc.queriesCtx(r.Context(), inputs)
	default:
		return fieldError("input_type", "%q, want document or query", req.InputType)
	}
	if err != nil {
		return err
	}
	data := make([]embeddingOut, len(vecs))
	for i, v := range vecs {
		data[i] = embeddingOut{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	tokens := 0
	if tz, ok := s.c.Encoder.(interface {
		Tokenize([]string) ([][]int, error)
	}); ok {
		if ids, err := tz.Tokenize(inputs); err == nil {
			for _, x := range ids {
				tokens += len(x)
			}
		}
	}
	writeJSON(w, 200, map[string]any{"object": "list", "model": name, "data": data,
		"usage": openai.EmbeddingUsage{PromptTokens: tokens, TotalTokens: tokens}})
	return nil
}

// Model is one entry of GET /v1/models (the OpenAI model object plus
// ragforge's kind).
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"` // Unix seconds: when the server loaded it
	OwnedBy string `json:"owned_by"`
	Kind    string `json:"kind"` // retriever, filter, reranker, generator, llm
}

func (s *Server) modelList() []Model {
	var data []Model
	add := func(id, kind string) {
		data = append(data, Model{ID: id, Object: "model", Created: s.started.Unix(), OwnedBy: "ragforge", Kind: kind})
	}
	if s.c.Encoder != nil {
		add(s.c.Encoder.Name(), "retriever")
	}
	if s.c.Filter != nil {
		add("filter", "filter")
	}
	if s.c.Reranker != nil {
		add("reranker", "reranker")
	}
	if s.c.Local != nil {
		add(s.c.Local.Name(), "generator")
	}
	if s.c.LLM != nil && s.c.LLM != LLM(s.c.Local) {
		add(s.c.LLM.Name(), "llm")
	}
	sort.SliceStable(data, func(i, j int) bool { return data[i].Kind < data[j].Kind })
	return data
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, 200, map[string]any{"object": "list", "data": s.modelList()})
	return nil
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	for _, m := range s.modelList() {
		if m.ID == id {
			writeJSON(w, 200, m)
			return nil
		}
	}
	return &requestError{code: 404, param: "model", errCode: "model_not_found", msg: fmt.Sprintf("The model %q does not exist", id)}
}
