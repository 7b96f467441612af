package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/data/runs"
	"github.com/ragforge/ragforge/label"
)

// RunSummary is one row of GET /api/runs: the run and the final value of each
// of its metrics (the value at its highest step, as runs.Store.Compare
// reads it).
type RunSummary struct {
	runs.RunInfo
	Final map[string]float64 `json:"final"`
}

// CompareResult is the answer of GET /api/compare.
type CompareResult struct {
	A       *runs.RunDetail   `json:"a"`
	B       *runs.RunDetail   `json:"b"`
	Metrics []runs.MetricDiff `json:"metrics"`
}

// LabelView is a stored label as the review page shows it: the record, the
// reference evidence (Options.Evidence) and the snippet split for highlighting
// (Highlight).
type LabelView struct {
	label.Record
	Evidence  string    `json:"evidence,omitempty"`
	Highlight []Segment `json:"highlight"`
}

// LabelList is the answer of GET /api/labels. Counts (labels per effective
// class) is set when the request names a run.
type LabelList struct {
	Labels []LabelView    `json:"labels"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts,omitempty"`
}

// ReviewRequest is the body of POST /api/labels/{id}/review.
type ReviewRequest struct {
	Action   string `json:"action"`   // label.ReviewConfirm, label.ReviewFlip, label.Helpful or label.NotHelpful
	Reviewer string `json:"reviewer"` // free text; default "web"
}

func (s *server) runStore() (*runs.Store, error) {
	if s.opt.Runs == nil {
		return nil, errStatus(http.StatusServiceUnavailable, "no run store configured")
	}
	return s.opt.Runs, nil
}

func (s *server) labelStore() (*label.Store, error) {
	if s.opt.Labels == nil {
		return nil, errStatus(http.StatusServiceUnavailable, "no label store configured")
	}
	return s.opt.Labels, nil
}

// intParam parses a non-negative integer query parameter; "" gives def.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errStatus(http.StatusBadRequest, "query parameter %q: %q is not a non-negative integer", name, v)
	}
	return n, nil
}

// boolParam parses a boolean query parameter (strconv.ParseBool, plus "" = unset).
func boolParam(r *http.Request, name string) (val, set bool, err error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, false, errStatus(http.StatusBadRequest, "query parameter %q: %q is not a boolean", name, v)
	}
	return b, true, nil
}

// runErr maps run store lookup errors to 404 (unknown) and 400 (ambiguous prefix).
func runErr(err error) error {
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return &httpError{status: http.StatusNotFound, err: err}
	case errors.Is(err, runs.ErrAmbiguous):
		return &httpError{status: http.StatusBadRequest, err: err}
	}
	return err
}

func (s *server) listRuns(r *http.Request) (any, error) {
	st, err := s.runStore()
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", s.opt.RunListLimit)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	list, err := st.List(runs.ListOptions{Kind: q.Get("kind"), Status: q.Get("status"), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(list))
	for _, ri := range list {
		d, err := st.Get(ri.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, RunSummary{RunInfo: ri, Final: finalMetrics(d.Metrics)})
	}
	return out, nil
}

// finalMetrics returns each metric's last value, given points ordered by
// name, step and insertion (runs.Store.Get's order).
func finalMetrics(points []runs.MetricPoint) map[string]float64 {
	out := make(map[string]float64)
	for _, p := range points {
		out[p.Name] = p.Value
	}
	return out
}

func (s *server) getRun(r *http.Request) (any, error) {
	st, err := s.runStore()
	if err != nil {
		return nil, err
	}
	d, err := st.Get(r.PathValue("id"))
	if err != nil {
		return nil, runErr(err)
	}
	return d, nil
}

func (s *server) compare(r *http.Request) (any, error) {
	st, err := s.runStore()
	if err != nil {
		return nil, err
	}
	a, b := r.URL.Query().Get("a"), r.URL.Query().Get("b")
	if a == "" || b == "" {
		return nil, errStatus(http.StatusBadRequest, "compare: query parameters \"a\" and \"b\" (run ids) are required")
	}
	res := CompareResult{}
	if res.A, err = st.Get(a); err != nil {
		return nil, runErr(fmt.Errorf("compare: run a: %w", err))
	}
	if res.B, err = st.Get(b); err != nil {
		return nil, runErr(fmt.Errorf("compare: run b: %w", err))
	}
	if res.Metrics, err = st.Compare(res.A.ID, res.B.ID); err != nil {
		return nil, runErr(err)
	}
	return res, nil
}

func (s *server) view(rec label.Record) LabelView {
	ev := s.opt.Evidence(rec)
	return LabelView{Record: rec, Evidence: ev, Highlight: Highlight(rec.Snippet, ev, s.opt.MinRun)}
}

func (s *server) listLabels(r *http.Request) (any, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	f := label.Filter{RunID: q.Get("run"), Class: q.Get("class"), Method: q.Get("method")}
	if f.Class != "" && !label.ValidLabel(f.Class) {
		return nil, errStatus(http.StatusBadRequest, "query parameter %q: %q is neither %s nor %s", "class", f.Class, label.Helpful, label.NotHelpful)
	}
	if f.Disagreement, _, err = boolParam(r, "disagreement"); err != nil {
		return nil, err
	}
	if v := q.Get("low_confidence"); v != "" {
		f.LowConfidence, err = strconv.ParseFloat(v, 64)
		if err != nil || !(f.LowConfidence >= 0) || f.LowConfidence > 1e300 {
			return nil, errStatus(http.StatusBadRequest, "query parameter %q: %q is not a non-negative number (perplexity units)", "low_confidence", v)
		}
	}
	if rv, set, err := boolParam(r, "reviewed"); err != nil {
		return nil, err
	} else if set {
		f.Reviewed = &rv
	}
	if f.Limit, err = intParam(r, "limit", s.opt.LabelListLimit); err != nil {
		return nil, err
	}
	recs, err := st.List(f)
	if err != nil {
		return nil, err
	}
	out := LabelList{Labels: make([]LabelView, len(recs)), Total: len(recs)}
	for i, rec := range recs {
		out.Labels[i] = s.view(rec)
	}
	if f.RunID != "" {
		if out.Counts, err = st.Counts(f.RunID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// labelID parses the {id} path segment.
func labelID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, errStatus(http.StatusBadRequest, "label id %q is not a positive integer", v)
	}
	return id, nil
}

// labelErr maps label.ErrNotFound to 404.
func labelErr(err error) error {
	if errors.Is(err, label.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, err: err}
	}
	return err
}

func (s *server) getLabel(r *http.Request) (any, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, err
	}
	id, err := labelID(r)
	if err != nil {
		return nil, err
	}
	rec, err := st.Get(id)
	if err != nil {
		return nil, labelErr(err)
	}
	return s.view(rec), nil
}

// decodeBody decodes a JSON object strictly: unknown fields, trailing data
// and an empty body are 400 errors naming the field or offset.
func decodeBody(r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return errStatus(http.StatusUnsupportedMediaType, "request body: content type %q is not application/json", ct)
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return errStatus(http.StatusBadRequest, "request body: empty, want a JSON object")
		}
		return errStatus(http.StatusBadRequest, "request body: %v", err)
	}
	if dec.More() {
		return errStatus(http.StatusBadRequest, "request body: data after the JSON object")
	}
	return nil
}

func (s *server) review(r *http.Request) (any, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, err
	}
	id, err := labelID(r)
	if err != nil {
		return nil, err
	}
	var req ReviewRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	switch req.Action {
	case label.ReviewConfirm, label.ReviewFlip, label.Helpful, label.NotHelpful:
	default:
		return nil, errStatus(http.StatusBadRequest, "request body: field %q: %q is not %q, %q, %s or %s",
			"action", req.Action, label.ReviewConfirm, label.ReviewFlip, label.Helpful, label.NotHelpful)
	}
	reviewer := strings.TrimSpace(req.Reviewer)
	if reviewer == "" {
		reviewer = "web"
	}
	rec, err := st.Review(id, req.Action, reviewer)
	if err != nil {
		return nil, labelErr(err)
	}
	return s.view(rec), nil
}

func (s *server) undo(r *http.Request) (any, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, err
	}
	id, err := labelID(r)
	if err != nil {
		return nil, err
	}
	rec, err := st.Get(id)
	if err != nil {
		return nil, labelErr(err)
	}
	if rec.Reviews == 0 {
		return nil, errStatus(http.StatusConflict, "undo label %d: the label has no review", id)
	}
	rec, err = st.Undo(id)
	if err != nil {
		return nil, labelErr(err)
	}
	return s.view(rec), nil
}
