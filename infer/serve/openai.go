package serve

import (
	"encoding/json"
	"fmt"
	"github.com/ragforge/ragforge/models/lm"
	"net/http"
	"regexp"
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

// options validates the shared fields into lm.GenOptions (Logprobs -1) and n.
func (q *sampling) options(maxTokens *int, maxField string) (lm.GenOptions, int, error) {
	opt := lm.GenOptions{MaxTokens: 16, Logprobs: -1} // OpenAI's default max_tokens
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

// checkTokens bounds a text's work by Options.MaxRequestTokens before the
// model sees it (approx is a lower bound of its tokens).
func (s *Server) checkTokens(approx int, field string) error {
	if approx > s.opt.MaxRequestTokens {
		return &requestError{code: 413, param: field, msg: fmt.Sprintf("field %q: over the limit of %d tokens per request (max-request-tokens)", field, s.opt.MaxRequestTokens)}
	}
	return nil
}
