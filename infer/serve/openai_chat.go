package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

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
	ids, err := l.ChatIDs(msgs)
	if err != nil {
		return fmt.Errorf("%w: %v", lm.ErrBadPrompt, err)
	}
	if maxTok == nil {
		opt.MaxTokens = l.defaultMaxTokens(len(ids), opt.MaxTokens)
	}
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
