package serve

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/search"
)

// PipelineRequest is the body of POST /v1/pipeline.
type PipelineRequest struct {
	Question string `json:"question"`
	// Rationale, when given, is used instead of asking the LLM for one.
	Rationale string      `json:"rationale,omitempty"`
	Mode      search.Mode `json:"mode,omitempty"`
	K         int         `json:"k,omitempty"`
	Corpora   []string    `json:"corpora,omitempty"`
	Balanced  *bool       `json:"balanced,omitempty"`
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
	p := &pipelineRun{s: s, req: &req, maxTok: maxTok, m: s.c.Pipeline.Manifest,
		resp: &PipelineResponse{Question: req.Question, Citations: []Citation{}}}
	if err := p.rationale(ctx); err != nil {
		return err
	}
	hits, err := p.retrieve(ctx)
	if err != nil {
		return err
	}
	if hits, err = p.rerank(hits); err != nil {
		return err
	}
	kept, err := p.filter(ctx, hits)
	if err != nil {
		return err
	}
	p.resp.Kept = append([]Hit{}, kept...)
	if err := p.answer(ctx, kept); err != nil {
		return err
	}
	p.resp.TookMs = msSince(start)
	writeJSON(w, 200, p.resp)
	return nil
}

// pipelineRun is one /v1/pipeline request on its way through the stages:
// each stage method fills its part of resp and reports itself in
// resp.Stages.
type pipelineRun struct {
	s      *Server
	req    *PipelineRequest
	m      pipeline.Manifest
	resp   *PipelineResponse
	maxTok int // per generation
}

// stage reports a stage that began at t.
func (p *pipelineRun) stage(name string, t time.Time, skipped bool, note string) {
	p.resp.Stages = append(p.resp.Stages, Stage{Name: name, Ms: msSince(t), Skipped: skipped, Note: note})
}

// rationale sets resp.Rationale (given, written by the LLM, or none) and
// resp.Query, the rationale unless it is empty, else the question.
func (p *pipelineRun) rationale(ctx context.Context) error {
	t := time.Now()
	switch {
	case p.req.Rationale != "":
		p.resp.Rationale = p.req.Rationale
		p.stage("rationale", t, true, "given in the request")
	case p.s.c.LLM == nil:
		p.stage("rationale", t, true, "no LLM")
	default:
		prompt := strings.ReplaceAll(p.m.Prompts.Rationale, "{question}", p.req.Question)
		text, err := p.s.c.LLM.Complete(ctx, prompt, p.maxTok)
		if err != nil {
			return fmt.Errorf("pipeline: rationale: %w", err)
		}
		p.resp.Rationale = text
		note := ""
		if strings.TrimSpace(text) == "" {
			note = "empty rationale: retrieving with the question"
		}
		p.stage("rationale", t, false, note)
	}
	p.resp.Query = p.resp.Rationale
	if strings.TrimSpace(p.resp.Query) == "" {
		p.resp.Query = p.req.Question
	}
	return nil
}

// retrieve runs the request's retrieval with resp.Query.
func (p *pipelineRun) retrieve(ctx context.Context) ([]Hit, error) {
	t := time.Now()
	req := p.req
	rr, err := p.s.eng.Retrieve(ctx, RetrieveRequest{Query: p.resp.Query, Mode: req.Mode, K: req.K, Corpora: req.Corpora, Balanced: req.Balanced})
	if err != nil {
		return nil, err
	}
	p.resp.Retrieved = rr.Hits
	p.stage("retrieve", t, false, fmt.Sprintf("mode %s, k %d", rr.Mode, rr.K))
	return rr.Hits, nil
}

// rerank reorders hits by the cross-encoder's (question, snippet) scores;
// without a reranker, or turned off, it returns hits as they are.
func (p *pipelineRun) rerank(hits []Hit) ([]Hit, error) {
	t := time.Now()
	switch {
	case p.s.c.Reranker == nil:
		p.stage("rerank", t, true, "no reranker")
		return hits, nil
	case !on(p.req.Rerank, true):
		p.stage("rerank", t, true, "turned off in the request")
		return hits, nil
	}
	in := make([]retrieval.Hit, len(hits))
	for i, h := range hits {
		in[i] = retrieval.Hit{ID: h.ID, Score: h.Score}
	}
	out, err := p.s.c.Reranker.Rerank(p.req.Question, in, p.s.eng.text)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	hits = make([]Hit, len(out))
	for i, h := range out {
		hits[i], _ = p.s.eng.hit(h.ID, h.Score)
	}
	p.resp.Reranked = hits
	p.stage("rerank", t, false, "")
	return hits, nil
}

// filter returns the hits the RAG² filter labels [HELPFUL] at the
// request's threshold (the manifest's by default), recording every
// decision in resp.Filtered; without a filter, turned off or with nothing
// retrieved, it keeps every hit.
func (p *pipelineRun) filter(ctx context.Context, hits []Hit) ([]Hit, error) {
	t := time.Now()
	switch {
	case p.s.c.Filter == nil:
		p.stage("filter", t, true, "no filter")
		return hits, nil
	case !on(p.req.Filter, true):
		p.stage("filter", t, true, "turned off in the request")
		return hits, nil
	case len(hits) == 0:
		p.stage("filter", t, true, "nothing retrieved")
		return hits, nil
	}
	th := p.m.Filter.Threshold
	if p.req.Threshold != nil {
		if th = *p.req.Threshold; !(th >= 0 && th <= 1) {
			return nil, badRequest("field %q: %v outside [0, 1]", "threshold", th)
		}
	}
	texts := make([]string, len(hits))
	for i, h := range hits {
		texts[i] = h.Text
	}
	probs, err := p.s.c.Filter.Predict(ctx, p.req.Question, texts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: filter: %w", err)
	}
	var kept []Hit
	for i, d := range decide(probs, th) {
		p.resp.Filtered = append(p.resp.Filtered, FilteredHit{Hit: hits[i], Label: d.Label, PHelpful: d.PHelpful})
		if d.Label == filter.Helpful {
			kept = append(kept, hits[i])
		}
	}
	p.stage("filter", t, false, fmt.Sprintf("kept %d of %d", len(kept), len(hits)))
	return kept, nil
}

// answer asks the LLM to answer from the kept snippets numbered [n] and
// turns its [n] mentions into resp.Citations.
func (p *pipelineRun) answer(ctx context.Context, kept []Hit) error {
	t := time.Now()
	switch {
	case !on(p.req.Answer, true):
		p.stage("answer", t, true, "turned off in the request")
		return nil
	case p.s.c.LLM == nil:
		p.stage("answer", t, true, "no LLM")
		return nil
	}
	prompt := strings.NewReplacer("{question}", p.req.Question, "{rationale}", p.resp.Rationale, "{context}", ContextBlock(kept)).Replace(p.m.Prompts.Answer)
	text, err := p.s.c.LLM.Complete(ctx, prompt, p.maxTok)
	if err != nil {
		return fmt.Errorf("pipeline: answer: %w", err)
	}
	p.resp.Answer = text
	p.resp.Citations = Citations(text, kept)
	p.stage("answer", t, false, "")
	return nil
}
