package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/labelapi"
	"github.com/ragforge/ragforge/models/labelstore"
)

// RunSummary is one row of GET /api/runs: the run, the final value of each
// of its metrics (the value at its highest step, as tracker.Store.Compare
// reads it) and the few of them its row shows (Headline).
type RunSummary struct {
	tracker.RunInfo
	Final    map[string]float64 `json:"final"`
	Headline []NamedValue       `json:"headline"`
}

// RunList is the answer of GET /api/runs: one page of the runs matching the
// kind and status filters, newest first, with Total matches, and the kinds
// and statuses present in the whole store for the page's filter menus.
type RunList struct {
	Runs     []RunSummary `json:"runs"`
	Total    int          `json:"total"`
	Offset   int          `json:"offset"`
	Limit    int          `json:"limit"`
	Kinds    []string     `json:"kinds"`
	Statuses []string     `json:"statuses"`
}

// StatusStale is the status data/tracker reports for a run whose process died
// without finishing it. The page styles it apart from running runs.
const StatusStale = "stale"

// knownStatuses are offered by the status filter even before any run has them.
var knownStatuses = []string{tracker.StatusRunning, tracker.StatusDone, tracker.StatusFailed, StatusStale}

// MetricChange is one row of the comparison: the final values of a metric in
// runs A and B, its Direction and whether B is better, worse or the same as
// A by that direction ("" without a direction or when a run lacks it).
type MetricChange struct {
	tracker.MetricDiff
	Better string `json:"better"` // HigherIsBetter, LowerIsBetter or "" (NoDirection)
	Change string `json:"change"` // ChangeBetter, ChangeWorse, ChangeSame or ""
}

// CompareResult is the answer of GET /api/compare.
type CompareResult struct {
	A       *tracker.RunDetail `json:"a"`
	B       *tracker.RunDetail `json:"b"`
	Metrics []MetricChange     `json:"metrics"`
}

// LabelView is a stored label as the review page shows it: the record, the
// reference evidence (Options.Evidence) and the snippet split for highlighting
// (Highlight).
type LabelView struct {
	labelstore.Record
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

// ReviewRequest is the body of POST /api/labels/{id}/review: action
// labelstore.ReviewConfirm, labelstore.ReviewFlip, models/filter.Helpful or models/filter.NotHelpful,
// and a reviewer (free text; default "web").
type ReviewRequest = labelapi.ReviewRequest

func (s *server) runStore() (*tracker.Store, error) {
	if s.opt.Runs == nil {
		return nil, errStatus(http.StatusServiceUnavailable, "no run store configured")
	}
	return s.opt.Runs, nil
}

func (s *server) labelStore() (*labelstore.Store, error) {
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

// runErr maps run store lookup errors to 404 (unknown) and 400 (ambiguous prefix).
func runErr(err error) error {
	switch {
	case errors.Is(err, tracker.ErrNotFound):
		return &httpError{status: http.StatusNotFound, err: err}
	case errors.Is(err, tracker.ErrAmbiguous):
		return &httpError{status: http.StatusBadRequest, err: err}
	}
	return err
}

// listRuns answers GET /api/runs?kind=&status=&limit=&offset=. The filters
// are applied here rather than in SQL so that a status data/tracker derives
// when reading a run (stale) filters like a stored one.
func (s *server) listRuns(r *http.Request) (any, error) {
	st, err := s.runStore()
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", s.opt.RunListLimit)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = s.opt.RunListLimit
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	all, err := st.List(tracker.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := RunList{Runs: []RunSummary{}, Offset: offset, Limit: limit, Kinds: []string{}, Statuses: append([]string(nil), knownStatuses...)}
	kinds, statuses := map[string]bool{}, map[string]bool{}
	for _, st := range knownStatuses {
		statuses[st] = true
	}
	var match []tracker.RunInfo
	for _, ri := range all {
		if !kinds[ri.Kind] {
			kinds[ri.Kind] = true
			out.Kinds = append(out.Kinds, ri.Kind)
		}
		if !statuses[ri.Status] {
			statuses[ri.Status] = true
			out.Statuses = append(out.Statuses, ri.Status)
		}
		if (q.Get("kind") == "" || ri.Kind == q.Get("kind")) && (q.Get("status") == "" || ri.Status == q.Get("status")) {
			match = append(match, ri)
		}
	}
	sort.Strings(out.Kinds)
	out.Total = len(match)
	if offset > len(match) {
		offset = len(match)
	}
	match = match[offset:min(len(match), offset+limit)]
	for _, ri := range match {
		d, err := st.Get(ri.ID)
		if err != nil {
			return nil, err
		}
		final := finalMetrics(d.Metrics)
		out.Runs = append(out.Runs, RunSummary{RunInfo: ri, Final: final, Headline: Headline(final)})
	}
	return out, nil
}

// finalMetrics returns each metric's last value, given points ordered by
// name, step and insertion (tracker.Store.Get's order).
func finalMetrics(points []tracker.MetricPoint) map[string]float64 {
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
	diffs, err := st.Compare(res.A.ID, res.B.ID)
	if err != nil {
		return nil, runErr(err)
	}
	res.Metrics = make([]MetricChange, len(diffs))
	for i, d := range diffs {
		c := MetricChange{MetricDiff: d, Better: Direction(d.Name)}
		if d.HasA && d.HasB {
			c.Change = judge(c.Better, d.A, d.B)
		}
		res.Metrics[i] = c
	}
	return res, nil
}

func (s *server) view(rec labelstore.Record) LabelView {
	ev := s.opt.Evidence(rec)
	return LabelView{Record: rec, Evidence: ev, Highlight: Highlight(rec.Snippet, ev, s.opt.MinRun)}
}

func (s *server) listLabels(r *http.Request) (any, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, err
	}
	f, err := labelapi.ParseFilter(r.URL.Query())
	if err != nil {
		return nil, labelErr(err)
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

// labelErr gives a labelapi.Error its status; other errors are server
// errors.
func labelErr(err error) error {
	var le *labelapi.Error
	if errors.As(err, &le) {
		return &httpError{status: le.Status, err: le}
	}
	return err
}

// labelRequest returns the store and the {id} of a request on one label.
func (s *server) labelRequest(r *http.Request) (*labelstore.Store, int64, error) {
	st, err := s.labelStore()
	if err != nil {
		return nil, 0, err
	}
	id, err := labelapi.ParseID(r.PathValue("id"))
	return st, id, labelErr(err)
}

func (s *server) getLabel(r *http.Request) (any, error) {
	st, id, err := s.labelRequest(r)
	if err != nil {
		return nil, err
	}
	rec, err := st.Get(id)
	if err != nil {
		return nil, labelErr(labelapi.StoreErr(err))
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
	st, id, err := s.labelRequest(r)
	if err != nil {
		return nil, err
	}
	var req ReviewRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	rec, err := labelapi.Review(st, id, req, "web")
	if err != nil {
		return nil, labelErr(err)
	}
	return s.view(rec), nil
}

func (s *server) undo(r *http.Request) (any, error) {
	st, id, err := s.labelRequest(r)
	if err != nil {
		return nil, err
	}
	rec, err := labelapi.Undo(st, id)
	if err != nil {
		return nil, labelErr(err)
	}
	return s.view(rec), nil
}
