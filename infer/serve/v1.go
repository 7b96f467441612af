package serve

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/filter"
)

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) error {
	var req RetrieveRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	resp, err := s.eng.Retrieve(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, 200, resp)
	return nil
}

// FilterRequest is the body of POST /v1/filter.
type FilterRequest struct {
	Question string   `json:"question"`
	Snippets []string `json:"snippets"`
	// Threshold overrides the pipeline's decision threshold (0.5).
	Threshold *float64 `json:"threshold,omitempty"`
}

// FilterResult is the filter's decision on one snippet.
type FilterResult struct {
	Index    int     `json:"index"`
	Label    string  `json:"label"` // [HELPFUL] when PHelpful ≥ threshold, else [NOT_HELPFUL]
	PHelpful float64 `json:"p_helpful"`
}

// FilterResponse is the answer of POST /v1/filter.
type FilterResponse struct {
	Threshold float64        `json:"threshold"`
	Results   []FilterResult `json:"results"`
	TookMs    float64        `json:"took_ms"`
}

func (s *Server) checkFilter(req *FilterRequest) (float64, error) {
	if s.c.Filter == nil {
		return 0, notAvailable("the filter")
	}
	if strings.TrimSpace(req.Question) == "" {
		return 0, badRequest("field %q: empty", "question")
	}
	if len(req.Snippets) == 0 {
		return 0, badRequest("field %q: empty", "snippets")
	}
	if len(req.Snippets) > s.opt.MaxSnippets {
		return 0, &requestError{code: 413, param: "snippets", msg: fmt.Sprintf("field %q: %d snippets, over the limit of %d per request (max-snippets)", "snippets", len(req.Snippets), s.opt.MaxSnippets)}
	}
	th := s.c.Pipeline.Manifest.Filter.Threshold
	if req.Threshold != nil {
		th = *req.Threshold
		if !(th >= 0 && th <= 1) {
			return 0, badRequest("field %q: %v outside [0, 1]", "threshold", th)
		}
	}
	return th, nil
}

func (s *Server) filter(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	var req FilterRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	th, err := s.checkFilter(&req)
	if err != nil {
		return err
	}
	p, err := s.c.Filter.Predict(r.Context(), req.Question, req.Snippets)
	if err != nil {
		return err
	}
	writeJSON(w, 200, FilterResponse{Threshold: th, Results: decide(p, th), TookMs: msSince(start)})
	return nil
}

func decide(p []float64, th float64) []FilterResult {
	out := make([]FilterResult, len(p))
	for i, v := range p {
		l := filter.NotHelpful
		if v >= th {
			l = filter.Helpful
		}
		out[i] = FilterResult{Index: i, Label: l, PHelpful: v}
	}
	return out
}
