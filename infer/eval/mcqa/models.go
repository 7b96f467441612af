package mcqa

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/models/openai"
)

// Chat is the part of *openai.Client ChatAnswerer needs.
type Chat interface {
	ChatText(ctx context.Context, system, user string, maxTokens int, temperature float64) (string, error)
}

// ChatAnswerer answers through an OpenAI-compatible chat server (the
// system and user messages of the prompt), greedy by default as MIRAGE's
// runs are.
type ChatAnswerer struct {
	Client      Chat
	MaxTokens   int     // default DefaultMaxTokens
	Temperature float64 // default 0
}

// DefaultMaxTokens bounds an answer: room for the step-by-step thinking and
// the JSON answer.
const DefaultMaxTokens = 512

// Answer implements Answerer.
func (a *ChatAnswerer) Answer(ctx context.Context, p Prompt) (string, error) {
	mt := a.MaxTokens
	if mt <= 0 {
		mt = DefaultMaxTokens
	}
	s, err := a.Client.ChatText(ctx, p.System, p.User, mt, a.Temperature)
	if errors.Is(err, openai.ErrEmptyAnswer) {
		// A blank answer is the model's output, scored as a parse
		// failure ("empty"), not a failed request to retry on resume.
		return "", nil
	}
	return s, err
}

// Completer is a prompt-to-text model without chat roles (a local T5:
// serve.LocalLM).
type Completer interface {
	Complete(ctx context.Context, prompt string, maxTokens int) (string, error)
}

// CompleteAnswerer answers with a Completer: the system message, a blank
// line, then the user message, as one prompt.
type CompleteAnswerer struct {
	LM        Completer
	MaxTokens int // default DefaultMaxTokens
}

// Answer implements Answerer.
func (a *CompleteAnswerer) Answer(ctx context.Context, p Prompt) (string, error) {
	mt := a.MaxTokens
	if mt <= 0 {
		mt = DefaultMaxTokens
	}
	return a.LM.Complete(ctx, strings.TrimSpace(p.System+"\n\n"+p.User), mt)
}

// Poster posts JSON to a server path with timeouts and retries;
// *openai.Client implements it (Post).
type Poster interface {
	Post(ctx context.Context, path string, body, out any) error
}

// ServeRetriever retrieves through ragforge serve: /v1/retrieve for rag
// and /v1/pipeline (answer off) for rag2, so retrieval, balanced fusion,
// rerank and the filter are exactly what the server runs.
type ServeRetriever struct {
	Client Poster
}

// Search implements Retriever with POST /v1/retrieve (the pipeline's mode
// and corpora).
func (s *ServeRetriever) Search(ctx context.Context, query string, k int) ([]Snippet, error) {
	var resp serve.RetrieveResponse
	if err := s.Client.Post(ctx, "/retrieve", serve.RetrieveRequest{Query: query, K: k}, &resp); err != nil {
		return nil, err
	}
	return snippets(resp.Hits), nil
}

// Pipeline implements Retriever with POST /v1/pipeline: the rationale given
// (so the server writes none), answer off, filter as asked.
func (s *ServeRetriever) Pipeline(ctx context.Context, question, rationale string, k int, filter bool) (Retrieval, error) {
	off := false
	req := serve.PipelineRequest{Question: question, Rationale: rationale, K: k, Filter: &filter, Answer: &off}
	var resp serve.PipelineResponse
	if err := s.Client.Post(ctx, "/pipeline", req, &resp); err != nil {
		return Retrieval{}, err
	}
	// With filter on, the server either filtered, had nothing to filter
	// (kept none of none), or has no filter (refused below).
	out := Retrieval{Retrieved: snippets(resp.Retrieved), Kept: snippets(resp.Kept), Filtered: filter}
	if out.Filtered {
		p := map[string]float64{}
		for _, f := range resp.Filtered {
			p[f.ID] = f.PHelpful
		}
		for i := range out.Kept {
			v := p[out.Kept[i].ID]
			out.Kept[i].PHelpful = &v
		}
	}
	for _, st := range resp.Stages {
		if st.Name == "filter" && filter && st.Skipped && st.Note != "nothing retrieved" {
			return out, fmt.Errorf("the server ran no filter (%s); rag2 needs one", st.Note)
		}
	}
	return out, nil
}

// CheckFilter runs /v1/pipeline once (retrieval of one snippet, filter on,
// answer off) so that a server without a filter is refused before any
// question is answered under rag2. A query that retrieves nothing cannot
// tell, and passes.
func (s *ServeRetriever) CheckFilter(ctx context.Context) error {
	_, err := s.Pipeline(ctx, "Which stain shows nuclei?", "hematoxylin stains nuclei", 1, true)
	return err
}

func snippets(hits []serve.Hit) []Snippet {
	out := make([]Snippet, len(hits))
	for i, h := range hits {
		title, _ := h.Meta["title"].(string)
		out[i] = Snippet{ID: h.ID, Corpus: h.Corpus, Title: title, Text: h.Text}
	}
	return out
}
