package serve

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/retrieval"
)

func notAvailable(what string) error {
	return &requestError{code: 404, msg: what + " is not available: the pipeline has none"}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, 200, map[string]any{
		"status": "ok", "corpora": s.c.Pipeline.Manifest.Corpora,
		"retriever": s.c.Encoder != nil, "filter": s.c.Filter != nil, "reranker": s.c.Reranker != nil,
		"llm": s.c.LLM != nil, "generator": s.c.Local != nil,
	})
	return nil
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, err := s.metrics.WriteTo(w)
	return err
}

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
		l := label.NotHelpful
		if v >= th {
			l = label.Helpful
		}
		out[i] = FilterResult{Index: i, Label: l, PHelpful: v}
	}
	return out
}

// PipelineRequest is the body of POST /v1/pipeline.
type PipelineRequest struct {
	Question string `json:"question"`
	// Rationale, when given, is used instead of asking the LLM for one.
	Rationale string   `json:"rationale,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	K         int      `json:"k,omitempty"`
	Corpora   []string `json:"corpora,omitempty"`
	Balanced  *bool    `json:"balanced,omitempty"`
	// Rerank and Filter turn those stages off when false (default on when
	// the model exists); Answer turns answer generation off.
	Rerank    *bool    `json:"rerank,omitempty"`
	Filter    *bool    `json:"filter,omitempty"`
	Answer    *bool    `json:"answer,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"` // per generation; default 128
}

// Stage is one pipeline stage's report: its time, whether it ran, and why
// not.
type Stage struct {
	Name    string  `json:"name"`
	Ms      float64 `json:"ms"`
	Skipped bool    `json:"skipped,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// FilteredHit is a hit with the filter's decision.
type FilteredHit struct {
	Hit
	Label    string  `json:"label"`
	PHelpful float64 `json:"p_helpful"`
}

// Citation links an answer's [n] to the n-th kept snippet.
type Citation struct {
	N      int    `json:"n"`
	ID     string `json:"id"`
	Corpus string `json:"corpus"`
	DocID  string `json:"doc_id"`
}

// PipelineResponse is the answer of POST /v1/pipeline: every stage's output
// and time.
type PipelineResponse struct {
	Question  string        `json:"question"`
	Rationale string        `json:"rationale"`
	Query     string        `json:"query"` // the retrieval query: the rationale, else the question
	Retrieved []Hit         `json:"retrieved"`
	Reranked  []Hit         `json:"reranked,omitempty"`
	Filtered  []FilteredHit `json:"filtered,omitempty"`
	Kept      []Hit         `json:"kept"`
	Answer    string        `json:"answer"`
	Citations []Citation    `json:"citations"`
	Stages    []Stage       `json:"stages"`
	TookMs    float64       `json:"took_ms"`
}

func on(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

var citeRE = regexp.MustCompile(`\[(\d+)\]`)

// Citations returns, in order of first mention, the snippets an answer
// cites as [n] (1-based into kept); numbers outside 1..len(kept) are
// ignored.
func Citations(answer string, kept []Hit) []Citation {
	out := []Citation{}
	seen := map[int]bool{}
	for _, m := range citeRE.FindAllStringSubmatch(answer, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > len(kept) || seen[n] {
			continue
		}
		seen[n] = true
		h := kept[n-1]
		out = append(out, Citation{N: n, ID: h.ID, Corpus: h.Corpus, DocID: h.DocID})
	}
	return out
}

// ContextBlock numbers snippets for the answer prompt: "[1] text\n[2] text".
func ContextBlock(kept []Hit) string {
	var b strings.Builder
	for i, h := range kept {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%d] %s", i+1, h.Text)
	}
	return b.String()
}

// pipeline runs RAG²: (1) the LLM writes a rationale for the question
// (prompt Prompts.Rationale), (2) balanced retrieval with the rationale as
// the query (RAG² §3.2; the question when there is no rationale), (3) the
// cross-encoder reranks (question, snippet) pairs, (4) the filter keeps
// [HELPFUL] snippets, (5) the LLM answers from the kept snippets numbered
// [n] and its [n] mentions become citations.
func (s *Server) pipeline(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	var req PipelineRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if strings.TrimSpace(req.Question) == "" {
		return badRequest("field %q: empty", "question")
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = 128
	}
	ctx := r.Context()
	m := s.c.Pipeline.Manifest
	resp := &PipelineResponse{Question: req.Question, Citations: []Citation{}}
	stage := func(name string, t time.Time, skipped bool, note string) {
		resp.Stages = append(resp.Stages, Stage{Name: name, Ms: msSince(t), Skipped: skipped, Note: note})
	}
	// 1. rationale
	t := time.Now()
	switch {
	case req.Rationale != "":
		resp.Rationale = req.Rationale
		stage("rationale", t, true, "given in the request")
	case s.c.LLM == nil:
		stage("rationale", t, true, "no LLM")
	default:
		prompt := strings.ReplaceAll(m.Prompts.Rationale, "{question}", req.Question)
		text, err := s.c.LLM.Complete(ctx, prompt, maxTok)
		if err != nil {
			return fmt.Errorf("pipeline: rationale: %w", err)
		}
		resp.Rationale = text
		note := ""
		if strings.TrimSpace(text) == "" {
			note = "empty rationale: retrieving with the question"
		}
		stage("rationale", t, false, note)
	}
	resp.Query = resp.Rationale
	if strings.TrimSpace(resp.Query) == "" {
		resp.Query = req.Question
	}
	// 2. retrieval
	t = time.Now()
	rr, err := s.eng.Retrieve(ctx, RetrieveRequest{Query: resp.Query, Mode: req.Mode, K: req.K, Corpora: req.Corpora, Balanced: req.Balanced})
	if err != nil {
		return err
	}
	resp.Retrieved = rr.Hits
	stage("retrieve", t, false, fmt.Sprintf("mode %s, k %d", rr.Mode, rr.K))
	hits := rr.Hits
	// 3. rerank
	t = time.Now()
	switch {
	case s.c.Reranker == nil:
		stage("rerank", t, true, "no reranker")
	case !on(req.Rerank, true):
		stage("rerank", t, true, "turned off in the request")
	default:
		in := make([]retrieval.Hit, len(hits))
		for i, h := range hits {
			in[i] = retrieval.Hit{ID: h.ID, Score: h.Score}
		}
		out, err := s.c.Reranker.Rerank(req.Question, in, s.eng.text)
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		hits = make([]Hit, len(out))
		for i, h := range out {
			hits[i], _ = s.eng.hit(h.ID, h.Score)
		}
		resp.Reranked = hits
		stage("rerank", t, false, "")
	}
	// 4. filter
	t = time.Now()
	kept := hits
	switch {
	case s.c.Filter == nil:
		stage("filter", t, true, "no filter")
	case !on(req.Filter, true):
		stage("filter", t, true, "turned off in the request")
	case len(hits) == 0:
		stage("filter", t, true, "nothing retrieved")
	default:
		th := m.Filter.Threshold
		if req.Threshold != nil {
			if th = *req.Threshold; !(th >= 0 && th <= 1) {
				return badRequest("field %q: %v outside [0, 1]", "threshold", th)
			}
		}
		texts := make([]string, len(hits))
		for i, h := range hits {
			texts[i] = h.Text
		}
		p, err := s.c.Filter.Predict(ctx, req.Question, texts)
		if err != nil {
			return fmt.Errorf("pipeline: filter: %w", err)
		}
		kept = nil
		for i, d := range decide(p, th) {
			resp.Filtered = append(resp.Filtered, FilteredHit{Hit: hits[i], Label: d.Label, PHelpful: d.PHelpful})
			if d.Label == label.Helpful {
				kept = append(kept, hits[i])
			}
		}
		stage("filter", t, false, fmt.Sprintf("kept %d of %d", len(kept), len(hits)))
	}
	resp.Kept = append([]Hit{}, kept...)
	// 5. answer
	t = time.Now()
	switch {
	case !on(req.Answer, true):
		stage("answer", t, true, "turned off in the request")
	case s.c.LLM == nil:
		stage("answer", t, true, "no LLM")
	default:
		prompt := strings.NewReplacer("{question}", req.Question, "{rationale}", resp.Rationale, "{context}", ContextBlock(kept)).Replace(m.Prompts.Answer)
		text, err := s.c.LLM.Complete(ctx, prompt, maxTok)
		if err != nil {
			return fmt.Errorf("pipeline: answer: %w", err)
		}
		resp.Answer = text
		resp.Citations = Citations(text, kept)
		stage("answer", t, false, "")
	}
	resp.TookMs = msSince(start)
	writeJSON(w, 200, resp)
	return nil
}

func (s *Server) labels() (*label.Store, error) {
	if s.opt.Labels == nil {
		return nil, &requestError{code: 503, msg: "no label store: start the server with a labels database"}
	}
	return s.opt.Labels, nil
}

func labelID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("label id %q: want a positive integer", r.PathValue("id"))
	}
	return id, nil
}

func labelErr(err error) error {
	if errors.Is(err, label.ErrNotFound) {
		return &requestError{code: 404, msg: err.Error()}
	}
	return err
}

func (s *Server) listLabels(w http.ResponseWriter, r *http.Request) error {
	st, err := s.labels()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := label.Filter{RunID: q.Get("run"), Class: q.Get("class"), Method: q.Get("method")}
	if f.Class != "" && !label.ValidLabel(f.Class) {
		return badRequest("query %q: %q is neither %s nor %s", "class", f.Class, label.Helpful, label.NotHelpful)
	}
	f.Limit = 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return badRequest("query %q: %q outside [1, 10000]", "limit", v)
		}
		f.Limit = n
	}
	recs, err := st.List(f)
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []label.Record{}
	}
	writeJSON(w, 200, map[string]any{"labels": recs})
	return nil
}

func (s *Server) getLabel(w http.ResponseWriter, r *http.Request) error {
	st, err := s.labels()
	if err != nil {
		return err
	}
	id, err := labelID(r)
	if err != nil {
		return err
	}
	rec, err := st.Get(id)
	if err != nil {
		return labelErr(err)
	}
	writeJSON(w, 200, rec)
	return nil
}

// ReviewRequest is the body of POST /v1/labels/{id}/review.
type ReviewRequest struct {
	Action   string `json:"action"` // [HELPFUL], [NOT_HELPFUL], confirm or flip
	Reviewer string `json:"reviewer"`
}

func (s *Server) reviewLabel(w http.ResponseWriter, r *http.Request) error {
	st, err := s.labels()
	if err != nil {
		return err
	}
	id, err := labelID(r)
	if err != nil {
		return err
	}
	var req ReviewRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	switch req.Action {
	case label.Helpful, label.NotHelpful, label.ReviewConfirm, label.ReviewFlip:
	default:
		return badRequest("field %q: %q, want %s, %s, %s or %s", "action", req.Action, label.Helpful, label.NotHelpful, label.ReviewConfirm, label.ReviewFlip)
	}
	if strings.TrimSpace(req.Reviewer) == "" {
		return badRequest("field %q: empty", "reviewer")
	}
	rec, err := st.Review(id, req.Action, req.Reviewer)
	if err != nil {
		return labelErr(err)
	}
	writeJSON(w, 200, rec)
	return nil
}

func (s *Server) undoLabel(w http.ResponseWriter, r *http.Request) error {
	st, err := s.labels()
	if err != nil {
		return err
	}
	id, err := labelID(r)
	if err != nil {
		return err
	}
	rec, err := st.Undo(id)
	if err != nil {
		if errors.Is(err, label.ErrNotFound) {
			return labelErr(err)
		}
		return &requestError{code: 409, msg: err.Error()}
	}
	writeJSON(w, 200, rec)
	return nil
}
