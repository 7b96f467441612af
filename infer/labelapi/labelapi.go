// Package labelapi is the label-review API over HTTP, written once for the
// server's /v1/labels (infer/serve) and the web workbench's /api/labels
// (infer/web): it parses a label id, a list query and a review request,
// applies reviews and undos to a labelstore.Store, and gives every refusal its
// HTTP status (Error). Each server decodes bodies, checks tokens and writes
// errors in its own JSON shape.
package labelapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// Error is a refused label request: its HTTP status (400, 404 or 409), the
// field or query parameter at fault ("" when none) and why.
type Error struct {
	Status int
	Param  string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func refuse(status int, param, format string, args ...any) error {
	return &Error{Status: status, Param: param, Err: fmt.Errorf(format, args...)}
}

// StoreErr gives labelstore.ErrNotFound its 404; other errors are returned as
// they are (server errors).
func StoreErr(err error) error {
	if errors.Is(err, labelstore.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Err: err}
	}
	return err
}

// ParseID parses the {id} path segment: a positive integer, else a 400
// quoting it.
func ParseID(v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, refuse(http.StatusBadRequest, "", "label id %q: want a positive integer", v)
	}
	return id, nil
}

// ParseFilter reads the list query: run, class (filter.Helpful or
// filter.NotHelpful), method, disagreement and reviewed (booleans, as
// strconv.ParseBool) and low_confidence (a non-negative perplexity
// difference, see labelstore.Filter). The limit is left to the caller, whose
// defaults and bounds differ. Errors are 400s naming the parameter.
func ParseFilter(q url.Values) (labelstore.Filter, error) {
	f := labelstore.Filter{RunID: q.Get("run"), Class: q.Get("class"), Method: q.Get("method")}
	if f.Class != "" && !filter.ValidLabel(f.Class) {
		return f, refuse(http.StatusBadRequest, "class", "query parameter %q: %q is neither %s nor %s", "class", f.Class, filter.Helpful, filter.NotHelpful)
	}
	var err error
	if f.Disagreement, _, err = boolParam(q, "disagreement"); err != nil {
		return f, err
	}
	if v := q.Get("low_confidence"); v != "" {
		f.LowConfidence, err = strconv.ParseFloat(v, 64)
		if err != nil || !(f.LowConfidence >= 0) || f.LowConfidence > 1e300 {
			return f, refuse(http.StatusBadRequest, "low_confidence", "query parameter %q: %q is not a non-negative number (perplexity units)", "low_confidence", v)
		}
	}
	if rv, set, err := boolParam(q, "reviewed"); err != nil {
		return f, err
	} else if set {
		f.Reviewed = &rv
	}
	return f, nil
}

// boolParam parses a boolean query parameter; "" is unset.
func boolParam(q url.Values, name string) (val, set bool, err error) {
	v := q.Get(name)
	if v == "" {
		return false, false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, false, refuse(http.StatusBadRequest, name, "query parameter %q: %q is not a boolean", name, v)
	}
	return b, true, nil
}

// ReviewRequest is the body of POST …/labels/{id}/review.
type ReviewRequest struct {
	Action   string `json:"action"`   // filter.Helpful, filter.NotHelpful, labelstore.ReviewConfirm or labelstore.ReviewFlip
	Reviewer string `json:"reviewer"` // who reviewed; see Review for an empty one
}

// Review applies req to label id and returns the label after it. The
// reviewer is trimmed of spaces; an empty one takes defaultReviewer, and
// is a 400 when that is empty too. Errors: 400 (action, reviewer), 404
// (unknown id), store errors.
func Review(st *labelstore.Store, id int64, req ReviewRequest, defaultReviewer string) (labelstore.Record, error) {
	switch req.Action {
	case filter.Helpful, filter.NotHelpful, labelstore.ReviewConfirm, labelstore.ReviewFlip:
	default:
		return labelstore.Record{}, refuse(http.StatusBadRequest, "action", "field %q: %q, want %s, %s, %s or %s",
			"action", req.Action, filter.Helpful, filter.NotHelpful, labelstore.ReviewConfirm, labelstore.ReviewFlip)
	}
	reviewer := strings.TrimSpace(req.Reviewer)
	if reviewer == "" {
		reviewer = defaultReviewer
	}
	if reviewer == "" {
		return labelstore.Record{}, refuse(http.StatusBadRequest, "reviewer", "field %q: empty", "reviewer")
	}
	rec, err := st.Review(id, req.Action, reviewer)
	return rec, StoreErr(err)
}

// Undo removes the latest review of label id and returns the label after
// it. Errors: 404 (unknown id), 409 (the label has no review), store
// errors.
func Undo(st *labelstore.Store, id int64) (labelstore.Record, error) {
	rec, err := st.Get(id)
	if err != nil {
		return rec, StoreErr(err)
	}
	if rec.Reviews == 0 {
		return rec, refuse(http.StatusConflict, "", "undo label %d: the label has no review", id)
	}
	rec, err = st.Undo(id)
	return rec, StoreErr(err)
}
