package serve

import (
	"fmt"
	"net/http"
	"sort"
)

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
